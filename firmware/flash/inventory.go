package flash

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/halite-fleet/halite/firmware"
	"github.com/halite-fleet/halite/protocol"
)

// ParseInventory reads an inventory: one device a line,
//
//	HOST[:PORT] [id=ID] [user=USER] [arch=ARCH]
//
// '#' starts a comment; blank lines are skipped. name names the file in
// errors (file:line).
func ParseInventory(r io.Reader, name string) ([]Target, error) {
	var out []Target
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		t := Target{Addr: f[0]}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			switch {
			case !ok || v == "":
				return nil, fmt.Errorf("%s:%d: %q: want key=value (id, user, arch)", name, n, kv)
			case k == "id":
				if err := protocol.ValidID(v); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", name, n, err)
				}
				t.ID = v
			case k == "user":
				t.User = v
			case k == "arch":
				if _, err := firmware.LookupArch(v); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", name, n, err)
				}
				t.Arch = v
			default:
				return nil, fmt.Errorf("%s:%d: unknown key %q (id, user, arch)", name, n, k)
			}
		}
		if prev, ok := seen[t.Addr]; ok {
			return nil, fmt.Errorf("%s:%d: %s is listed twice (first on line %d)", name, n, t.Addr, prev)
		}
		seen[t.Addr] = n
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
