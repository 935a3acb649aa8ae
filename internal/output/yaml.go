package output

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/internal/saltdata"
	"github.com/halite-fleet/halite/internal/yamlemit"
)

// renderYAML renders like Salt's yaml_out (PyYAML's safe_dump with libyaml's
// emitter, CSafeDumper, in block
// style): two-space indents, sequences level with their key, keys sorted,
// strings quoted only when needed and then in single quotes (multi-line
// ones too), floats as PyYAML writes them (1.0, 1.0e+20, .inf), bytes as
// !!binary.
func renderYAML(v any, opts Options) (string, error) {
	root, indent := yamlRoot(v, opts)
	out, err := yamlemit.Encode(root, yamlemit.Options{Indent: indent, CompactSeq: true})
	if err != nil {
		return "", fmt.Errorf("encode yaml: %w", err)
	}
	return string(out), nil
}

// yamlRoot is v's node tree, in flow style for a negative --out-indent,
// and the indent to write it with: PyYAML's emitter takes an indent only
// between 2 and 9, and writes a sequence inside a mapping level with its
// key whatever the indent.
func yamlRoot(v any, opts Options) (*yaml.Node, int) {
	root := yamlNode(v)
	if opts.IndentSet && opts.Indent < 0 {
		root.Style |= yaml.FlowStyle
	}
	indent := 2
	if opts.IndentSet && opts.Indent > 1 && opts.Indent < 10 {
		indent = opts.Indent
	}
	return root, indent
}

// yamlNode turns a normalised value into a yaml.Node tree.
func yamlNode(v any) *yaml.Node {
	switch x := v.(type) {
	case nil:
		return scalar("!!null", "null")
	case bool:
		return scalar("!!bool", strconv.FormatBool(x))
	case int64, uint64, *big.Int:
		return scalar("!!int", saltdata.Repr(x))
	case float64:
		return scalar("!!float", yamlFloat(x))
	case string:
		return yamlString(x)
	case []byte:
		n := scalar("!!binary", base64Lines(x))
		n.Style = yaml.LiteralStyle
		return n
	case list:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range x {
			n.Content = append(n.Content, yamlNode(e))
		}
		return n
	case *dict:
		x = x.sorted() // safe_dump sorts keys
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for i, k := range x.keys {
			n.Content = append(n.Content, yamlNode(k), yamlNode(x.vals[i]))
		}
		return n
	}
	return yamlString(saltdata.Repr(v))
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
	case !singleQuotable(s):
		return n
	case strings.Contains(s, "\n"):
		// PyYAML (libyaml's emitter, as go-yaml's) single-quotes a
		// multi-line string, a blank line standing for each line break.
		n.Style = yaml.SingleQuotedStyle
		return n
	case s == "y" || s == "Y" || s == "n" || s == "N":
		// The encoder quotes these as YAML 1.1 booleans when asked its
		// opinion below, but neither YAML 1.2 nor PyYAML reads them so.
		return n
	}
	if out, err := yamlemit.Marshal(s); err == nil && len(out) > 0 && out[0] == '"' {
		n.Style = yaml.SingleQuotedStyle
	}
	return n
}

func singleQuotable(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\n' && !unicode.IsPrint(r) {
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
	s := string(saltdata.AppendFloat(nil, f))
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
