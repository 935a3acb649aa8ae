package output

import (
	"strings"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// renderTxt renders like Salt's txt outputter: for a dict, one
// "key: value" line per entry, a string value giving one line per line of
// text (and none when empty), any other value its Python str(); a string
// on its own is printed as is, anything else pretty-printed as Python's
// pprint would.
func renderTxt(v any, _ Options) (string, error) {
	var b strings.Builder
	switch x := v.(type) {
	case *dict:
		for i, k := range x.keys {
			key := saltdata.Str(k)
			switch val := x.vals[i].(type) {
			case string:
				for _, l := range splitLines(val) {
					b.WriteString(key + ": " + l + "\n")
				}
			case []byte:
				for _, l := range splitByteLines(val) {
					b.WriteString(key + ": " + saltdata.Repr(l) + "\n")
				}
			default:
				b.WriteString(key + ": " + saltdata.Str(val) + "\n")
			}
		}
	case string:
		b.WriteString(x + "\n")
	default:
		b.WriteString(pyPformat(x) + "\n")
	}
	return b.String(), nil
}

// renderRaw renders like Salt's raw outputter: Python's str() of the data.
func renderRaw(v any, _ Options) (string, error) {
	return saltdata.Str(v), nil
}
