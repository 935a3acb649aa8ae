package output

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// renderYAML renders like Salt's yaml_out (PyYAML's safe_dump in block
// style): two-space indents, sequences level with their key, keys sorted,
// strings quoted only when needed and then in single quotes, floats as
// PyYAML writes them (1.0, 1.0e+20, .inf), bytes as !!binary. Multi-line
// strings are literal blocks (|), where PyYAML would fold them into a
// quoted scalar; both read back the same.
func renderYAML(v any, opts Options) (string, error) {
	y := &yamlBuilder{}
	y.scan(v)
	root := y.node(v)
	if opts.Indent < 0 {
		root.Style |= yaml.FlowStyle
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if opts.Indent > 0 {
		enc.SetIndent(opts.Indent)
	} else {
		enc.SetIndent(2)
		enc.CompactSeqIndent()
	}
	if err := enc.Encode(root); err != nil {
		return "", fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("encode yaml: %w", err)
	}
	out := buf.String()
	// PyYAML ends a document whose root is a plain scalar with "...".
	if root.Kind == yaml.ScalarNode && out != "" && !strings.ContainsRune(`"'|>!`, rune(out[0])) {
		out += "...\n"
	}
	return y.restore(out), nil
}

// yamlBuilder turns a normalised value into a yaml.Node tree.
//
// The encoder treats characters outside the Basic Multilingual Plane
// (emoji, say) as unprintable and escapes them in double quotes, where
// PyYAML with allow_unicode prints them as they are. So the builder swaps
// each such character for a private-use one the data does not hold, and
// restore swaps them back in the encoded text.
type yamlBuilder struct {
	astral bool          // the data holds astral characters
	used   map[rune]bool // private-use characters the data holds
	swap   map[rune]rune // astral character -> stand-in
}

// scan notes whether the strings in v hold astral characters and which
// private-use characters they hold.
func (y *yamlBuilder) scan(v any) {
	switch x := v.(type) {
	case string:
		for _, r := range x {
			switch {
			case r > 0xffff:
				y.astral = true
			case r >= privateUseFirst && r <= privateUseLast:
				if y.used == nil {
					y.used = map[rune]bool{}
				}
				y.used[r] = true
			}
		}
	case list:
		for _, e := range x {
			y.scan(e)
		}
	case *dict:
		for i, k := range x.keys {
			y.scan(k)
			y.scan(x.vals[i])
		}
	}
}

const (
	privateUseFirst = 0xe000
	privateUseLast  = 0xf8ff
)

func (y *yamlBuilder) node(v any) *yaml.Node {
	switch x := v.(type) {
	case nil:
		return scalar("!!null", "null")
	case bool:
		return scalar("!!bool", strconv.FormatBool(x))
	case int64, uint64, *big.Int:
		return scalar("!!int", pyRepr(x))
	case float64:
		return scalar("!!float", yamlFloat(x))
	case string:
		return yamlString(y.hide(x))
	case []byte:
		n := scalar("!!binary", base64Lines(x))
		n.Style = yaml.LiteralStyle
		return n
	case list:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range x {
			n.Content = append(n.Content, y.node(e))
		}
		return n
	case *dict:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for i, k := range x.keys {
			n.Content = append(n.Content, y.node(k), y.node(x.vals[i]))
		}
		return n
	}
	return yamlString(y.hide(pyRepr(v)))
}

// hide replaces astral characters in s with their stand-ins.
func (y *yamlBuilder) hide(s string) string {
	if !y.astral {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r <= 0xffff || !unicode.IsPrint(r) {
			return r
		}
		if sub, ok := y.swap[r]; ok {
			return sub
		}
		if y.swap == nil {
			y.swap = map[rune]rune{}
		}
		// Stand-ins are handed out from the top of the private-use
		// area, away from those most likely in use.
		for sub := privateUseLast - rune(len(y.swap)); sub >= privateUseFirst; sub-- {
			if y.used[sub] || y.taken(sub) {
				continue
			}
			y.swap[r] = sub
			return sub
		}
		return r // out of stand-ins: leave it to be escaped
	}, s)
}

func (y *yamlBuilder) taken(sub rune) bool {
	for _, s := range y.swap {
		if s == sub {
			return true
		}
	}
	return false
}

// restore puts the astral characters back in place of their stand-ins.
func (y *yamlBuilder) restore(out string) string {
	if len(y.swap) == 0 {
		return out
	}
	back := make(map[rune]rune, len(y.swap))
	for r, sub := range y.swap {
		back[sub] = r
	}
	return strings.Map(func(r rune) rune {
		if orig, ok := back[r]; ok {
			return orig
		}
		return r
	}, out)
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// yamlString makes a string scalar. The encoder double-quotes a string
// that would otherwise read back as something else ("yes", "1.0", "");
// PyYAML single-quotes those unless they hold characters only double
// quotes can escape.
func yamlString(s string) *yaml.Node {
	n := scalar("!!str", s)
	switch {
	case strings.Contains(s, "\n") || !singleQuotable(s):
		return n
	case s == "y" || s == "Y" || s == "n" || s == "N":
		// The encoder quotes these as YAML 1.1 booleans when asked its
		// opinion below, but neither YAML 1.2 nor PyYAML reads them so.
		return n
	}
	if out, err := yaml.Marshal(s); err == nil && len(out) > 0 && out[0] == '"' {
		n.Style = yaml.SingleQuotedStyle
	}
	return n
}

func singleQuotable(s string) bool {
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// yamlFloat is PyYAML's float form: Python's repr, with ".0" added to a
// bare exponent form so it reads back as a float, and .inf / .nan.
func yamlFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	}
	s := pyFloat(f)
	if !strings.Contains(s, ".") && strings.Contains(s, "e") {
		s = strings.Replace(s, "e", ".0e", 1)
	}
	return s
}

// base64Lines encodes p as Python's base64.encodebytes does: lines of at
// most 76 characters, each ending in a newline.
func base64Lines(p []byte) string {
	enc := base64.StdEncoding.EncodeToString(p)
	var b strings.Builder
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteByte('\n')
		enc = enc[76:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
	return b.String()
}
