package output

import (
	"strings"
	"unicode/utf8"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// ANSI colours of Salt's default theme (salt.utils.color.get_colors).
const (
	colorGreen       = "\x1b[32m"
	colorCyan        = "\x1b[36m"
	colorLightYellow = "\x1b[1;33m"
	colorReset       = "\x1b[0m"
)

// nested renders like Salt's nested outputter (salt/output/nested.py).
type nested struct {
	color bool
	b     strings.Builder
	lines int
}

func renderNested(v any, opts Options) (string, error) {
	n := &nested{color: opts.Color}
	n.display(v, max(opts.Indent, 0), "")
	return n.b.String(), nil
}

// line writes one output line: indent, colour, prefix, text, reset, suffix.
func (n *nested) line(indent int, color, prefix, text, suffix string) {
	if n.lines > 0 {
		n.b.WriteByte('\n')
	}
	n.lines++
	n.b.WriteString(strings.Repeat(" ", indent))
	if n.color {
		n.b.WriteString(color)
	}
	n.b.WriteString(prefix)
	n.b.WriteString(text)
	if n.color {
		n.b.WriteString(colorReset)
	}
	n.b.WriteString(suffix)
}

func (n *nested) display(v any, indent int, prefix string) {
	if p, ok := v.([]byte); ok && utf8.Valid(p) {
		v = string(p) // Salt decodes bytes that are UTF-8
	}
	switch x := v.(type) {
	case nil, bool, int64, uint64, float64:
		n.line(indent, colorLightYellow, prefix, saltdata.Repr(x), "")
	case string:
		pad := strings.Repeat(" ", len(prefix))
		for i, l := range splitLines(x) {
			p := prefix
			if i > 0 {
				p = pad
			}
			n.line(indent, colorGreen, p, stripEscapes(l), "")
		}
	case list:
		for _, e := range x {
			switch e.(type) {
			case list:
				n.line(indent, colorGreen, "", "|_", "")
				n.display(e, indent+2, "- ")
			case *dict:
				n.line(indent, colorGreen, "", "|_", "")
				n.display(e, indent+2, "")
			default:
				n.display(e, indent, "- ")
			}
		}
	case *dict:
		x = x.sorted() // nested.py sorts a plain dict's keys
		if indent > 0 {
			n.line(indent, colorCyan, "", "----------", "")
		}
		for i, k := range x.keys {
			n.line(indent, colorCyan, prefix, stripEscapes(saltdata.Str(k)), ":")
			n.display(x.vals[i], indent+4, "")
		}
	default:
		// Bytes that are not text and big integers: Salt prints nothing
		// for the first, which hides data; show the repr instead.
		n.line(indent, colorLightYellow, prefix, saltdata.Repr(x), "")
	}
}

// stripEscapes replaces ESC with '?' so that returned text cannot drive the
// terminal, as Salt's strip_colors (on by default) does.
func stripEscapes(s string) string {
	return strings.ReplaceAll(s, "\x1b", "?")
}
