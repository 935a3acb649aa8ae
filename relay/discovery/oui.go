package discovery

import (
	"bufio"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ieeeOUI is Debian's ieee-data list (package ieee-data): every MA-L
// assignment, read when present instead of the small table built in.
const ieeeOUI = "/usr/share/ieee-data/oui.txt"

// maxOUIFile bounds what is read of the list (about 5 MiB in 2022).
const maxOUIFile = 32 << 20

// ouis maps the first three bytes of a MAC address to its vendor: sorted
// prefixes and, at the same index, the vendor's name.
type ouis struct {
	prefix []uint32
	vendor []string
}

func (o *ouis) lookup(mac net.HardwareAddr) string {
	if len(mac) < 3 || mac[0]&2 != 0 { // locally administered: no vendor
		return ""
	}
	p := uint32(mac[0])<<16 | uint32(mac[1])<<8 | uint32(mac[2])
	if i, ok := slices.BinarySearch(o.prefix, p); ok {
		return o.vendor[i]
	}
	return ""
}

// add appends one assignment; sort once after the last.
func (o *ouis) add(hex6, name string) {
	v, err := strconv.ParseUint(hex6, 16, 32)
	if err != nil || len(hex6) != 6 {
		return
	}
	o.prefix = append(o.prefix, uint32(v))
	o.vendor = append(o.vendor, name)
}

func (o *ouis) sort() {
	idx := make([]int, len(o.prefix))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return int(o.prefix[a]) - int(o.prefix[b]) })
	p, v := make([]uint32, 0, len(idx)), make([]string, 0, len(idx))
	for _, i := range idx {
		if n := len(p); n > 0 && p[n-1] == o.prefix[i] {
			continue
		}
		p, v = append(p, o.prefix[i]), append(v, o.vendor[i])
	}
	o.prefix, o.vendor = p, v
}

// builtinOUIs parses ouiTable (oui_table.go).
func builtinOUIs() *ouis {
	o := &ouis{prefix: make([]uint32, 0, ouiCount), vendor: make([]string, 0, ouiCount)}
	for line := range strings.Lines(ouiTable) {
		name, hex, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		if !ok {
			continue
		}
		for i := 0; i+6 <= len(hex); i += 6 {
			o.add(hex[i:i+6], name)
		}
	}
	o.sort()
	return o
}

// readOUIs reads an ieee-data oui.txt: its "XXXXXX     (base 16)\tName"
// lines. Vendor names are interned (one string per vendor).
func readOUIs(path string) (*ouis, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	o := &ouis{}
	names := map[string]string{}
	sc := bufio.NewScanner(&limitReader{f, maxOUIFile})
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "(base 16)")
		if i < 6 {
			continue
		}
		hex := strings.TrimSpace(line[:i])
		name := strings.Join(strings.Fields(line[i+len("(base 16)"):]), " ")
		if len(name) > maxString {
			name = name[:maxString]
		}
		if n, ok := names[name]; ok {
			name = n
		} else {
			names[name] = name
		}
		o.add(hex, name)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	o.sort()
	return o, nil
}

type limitReader struct {
	f *os.File
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, os.ErrClosed
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

var (
	vendorsOnce sync.Once
	vendorTable *ouis
	vendorFrom  string // "ieee-data" or "built-in"
)

// Vendor names the maker of a MAC address from its OUI: from Debian's
// ieee-data list when it is installed (every assignment; about 1.5 MiB
// of memory once loaded), else from the table built in (the camera and
// network vendors: oui_table.go), "" when unknown.
func Vendor(mac net.HardwareAddr) string {
	vendorsOnce.Do(func() {
		if o, err := readOUIs(ieeeOUI); err == nil && len(o.prefix) > 0 {
			vendorTable, vendorFrom = o, "ieee-data"
			return
		}
		vendorTable, vendorFrom = builtinOUIs(), "built-in"
	})
	return vendorTable.lookup(mac)
}
