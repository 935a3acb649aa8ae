package state

// A small tar reader for archive.extracted: ustar and GNU headers, GNU long
// names, PAX path/linkpath/size records; regular files, directories and
// symlinks. archive/tar costs about 60 KB on the armv7 agent; this is what
// archive.extracted needs, bounded (names, sizes), and every other member
// type is refused with the member's name.

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

const maxTarName = 64 << 10

// tarNumber reads an octal (or GNU base-256) numeric field.
func tarNumber(b []byte) (int64, error) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		if b[0]&0x40 != 0 {
			return 0, fmt.Errorf("negative number in tar header")
		}
		var n int64
		for i, c := range b {
			if i == 0 {
				c &= 0x7f
			}
			if n > 1<<55 {
				return 0, fmt.Errorf("number too large in tar header")
			}
			n = n<<8 | int64(c)
		}
		return n, nil
	}
	s := strings.Trim(string(b), " \x00")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 8, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad number %q in tar header", s)
	}
	return n, nil
}

func tarString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// tarChecksum says whether the header's checksum field matches (unsigned
// or signed sums, as tar readers accept).
func tarChecksum(h []byte) bool {
	want, err := tarNumber(h[148:156])
	if err != nil {
		return false
	}
	var u, s int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		u += int64(c)
		s += int64(int8(c))
	}
	return want == u || want == s
}

// readTar lists r's members, file contents read into memory (the caller
// bounds the total).
func readTar(r io.Reader, add func(member) error) error {
	var hdr [512]byte
	var longName, longLink string
	var pax map[string]string
	var total int64
	readData := func(size int64) ([]byte, error) {
		if size < 0 || size > maxArchiveBytes {
			return nil, fmt.Errorf("the archive would extract to more than %d bytes", maxArchiveBytes)
		}
		padded := (size + 511) &^ 511
		b := make([]byte, padded)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("Failed to read from tar archive: %w", err)
		}
		return b[:size], nil
	}
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("Failed to read from tar archive: %w", err)
		}
		if hdr == [512]byte{} {
			return nil // end of archive
		}
		if !tarChecksum(hdr[:]) {
			return fmt.Errorf("Failed to read from tar archive: bad header checksum")
		}
		size, err := tarNumber(hdr[124:136])
		if err != nil {
			return err
		}
		if v, ok := pax["size"]; ok {
			if size, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("bad PAX size %q", v)
			}
		}
		name := tarString(hdr[0:100])
		if string(hdr[257:263]) == "ustar\x00" {
			if p := tarString(hdr[345:500]); p != "" {
				name = p + "/" + name
			}
		}
		link := tarString(hdr[157:257])
		typ := hdr[156]
		switch typ {
		case 'L', 'K':
			if size > maxTarName {
				return fmt.Errorf("tar long name of %d bytes: refused", size)
			}
			b, err := readData(size)
			if err != nil {
				return err
			}
			if typ == 'L' {
				longName = tarString(b)
			} else {
				longLink = tarString(b)
			}
			continue
		case 'x', 'g':
			if size > maxTarName {
				return fmt.Errorf("tar PAX header of %d bytes: refused", size)
			}
			b, err := readData(size)
			if err != nil {
				return err
			}
			if typ == 'x' {
				pax = parsePAX(b)
			}
			continue
		}
		if longName != "" {
			name = longName
		}
		if longLink != "" {
			link = longLink
		}
		if v, ok := pax["path"]; ok {
			name = v
		}
		if v, ok := pax["linkpath"]; ok {
			link = v
		}
		longName, longLink, pax = "", "", nil
		mode, _ := tarNumber(hdr[100:108])
		mtime, _ := tarNumber(hdr[136:148])
		m := member{raw: name, mode: fsMode(mode), mtime: time.Unix(mtime, 0)}
		switch typ {
		case '0', 0, '7':
			m.kind = 'f'
			if strings.HasSuffix(name, "/") && typ == 0 {
				m.kind = 'd'
			}
			total += size
			if total > maxArchiveBytes {
				return fmt.Errorf("the archive would extract to more than %d bytes", maxArchiveBytes)
			}
			b, err := readData(size)
			if err != nil {
				return err
			}
			m.open = func() (io.Reader, error) { return bytes.NewReader(b), nil }
		case '5':
			m.kind = 'd'
			if _, err := readData(size); err != nil {
				return err
			}
		case '2':
			m.kind = 'l'
			m.linkname = link
		case '1':
			return fmt.Errorf("member '%s' is a hard link: hard links are refused", name)
		default:
			return fmt.Errorf("member '%s' is a device, FIFO or other special file: refused", name)
		}
		if err := add(m); err != nil {
			return err
		}
	}
}

// parsePAX reads "<len> <key>=<value>\n" records.
func parsePAX(b []byte) map[string]string {
	out := map[string]string{}
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			break
		}
		n, err := strconv.Atoi(string(b[:sp]))
		if err != nil || n <= sp || n > len(b) {
			break
		}
		rec := strings.TrimSuffix(string(b[sp+1:n]), "\n")
		if k, v, ok := strings.Cut(rec, "="); ok {
			out[k] = v
		}
		b = b[n:]
	}
	return out
}
