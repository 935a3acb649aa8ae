package sls

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/internal/yamlbound"
	"github.com/halite-fleet/halite/internal/yamlemit"
)

// Entry is one top-level ID of a rendered SLS file, in file order.
type Entry struct {
	ID    string
	Line  int // 1-based line of the ID in the rendered text
	Value any // decoded as map[string]any, []any, string, bool, int, float64 or nil
	// Keys are Value's keys in file order when Value is a mapping (the
	// state declarations under an ID: Salt runs them in this order).
	Keys []string
}

// Error is a failed rendering: the file, the line (0 if unknown) and why.
type Error struct {
	File  string
	Line  int
	Stage string // "jinja" or "yaml"
	Err   error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("render %s line %d (%s): %v", e.File, e.Line, e.Stage, e.Err)
	}
	return fmt.Sprintf("render %s (%s): %v", e.File, e.Stage, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ParseYAML reads rendered SLS text into its top-level entries, in order.
// Empty text (or only comments) gives no entries and no error, as Salt
// ignores an empty rendering. Plain scalars are read as PyYAML reads them
// (YAML 1.1): yes/no/on/off are booleans. Aliases may add at most
// yamlbound's limits to the document.
func ParseYAML(name, text string) ([]Entry, error) {
	return ParseYAMLValues(name, text, nil)
}

// Values puts back the values a template interpolated, which stand in the
// rendered text as tokens inside scalars (package render makes them, so
// that a value cannot change the document's structure).
type Values interface {
	// In reports whether s, a scalar's text, holds a token.
	In(s string) bool
	// Text is s with each token replaced by its value's text.
	Text(s string) (string, error)
	// Plain is the value of a plain (unquoted) scalar s that holds tokens.
	Plain(s string) (any, error)
}

// ParseYAMLValues is ParseYAML for text rendered with interpolated values
// as tokens: scalars that hold tokens get vals' values (keys and quoted or
// block scalars as text, plain scalars through vals.Plain).
func ParseYAMLValues(name, text string, vals Values) ([]Entry, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, &Error{File: name, Line: yamlErrLine(err), Stage: "yaml", Err: err}
	}
	var be *yamlbound.Error
	if err := yamlbound.Check(&doc); errors.As(err, &be) {
		return nil, &Error{File: name, Line: be.Line, Stage: "yaml", Err: errors.New(be.Msg)}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line, Stage: "yaml", Err: fmt.Errorf("expected a mapping of IDs at the top, got %s", kindName(root))}
	}
	d := decoder{vals: vals}
	out := make([]Entry, 0, len(root.Content)/2)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		id, err := d.key(k, 0)
		if err != nil {
			return nil, &Error{File: name, Line: k.Line, Stage: "yaml", Err: err}
		}
		val, err := d.node(v, 0)
		if err != nil {
			return nil, &Error{File: name, Line: v.Line, Stage: "yaml", Err: err}
		}
		out = append(out, Entry{ID: id, Line: k.Line, Value: val, Keys: d.keys(v)})
	}
	return out, nil
}

// keys are a mapping node's keys in order, as node decodes them (nil for
// anything else); keys a "<<" merge brings come after, sorted.
func (d decoder) keys(n *yaml.Node) []string {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([]string, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := n.Content[i]
		if kn.Kind == yaml.ScalarNode && kn.Value == "<<" && kn.Style == 0 {
			continue
		}
		k, err := d.key(kn, 1)
		if err != nil {
			return nil
		}
		out = append(out, k)
	}
	return out
}

// MaxDepth is how deeply rendered data may nest.
const MaxDepth = 64

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "something else"
}

// decoder turns nodes into plain values, putting interpolated values
// back.
type decoder struct {
	vals Values // nil: none
}

func (d decoder) holds(n *yaml.Node) bool {
	return d.vals != nil && n.Kind == yaml.ScalarNode && d.vals.In(n.Value)
}

// key is a mapping key as a string; tokens in it become their text.
func (d decoder) key(n *yaml.Node, depth int) (string, error) {
	if d.holds(n) {
		return d.vals.Text(n.Value)
	}
	k, err := d.node(n, depth)
	if err != nil {
		return "", err
	}
	if s, ok := k.(string); ok {
		return s, nil
	}
	return fmt.Sprint(k), nil
}

func (d decoder) node(n *yaml.Node, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return d.node(n.Alias, depth+1)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return d.node(n.Content[0], depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := d.node(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn := n.Content[i]
			k, err := d.key(kn, depth+1)
			if err != nil {
				return nil, err
			}
			v, err := d.node(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			// Only the template's own "<<" merges, not a key that an
			// interpolated value spelled.
			if kn.Kind == yaml.ScalarNode && kn.Value == "<<" && kn.Style == 0 {
				if m, ok := v.(map[string]any); ok {
					for mk, mv := range m {
						if _, ok := out[mk]; !ok {
							out[mk] = mv
						}
					}
					continue
				}
			}
			out[k] = v
		}
		return out, nil
	case yaml.ScalarNode:
		if d.holds(n) {
			if n.Style == 0 {
				return d.vals.Plain(n.Value)
			}
			return d.vals.Text(n.Value)
		}
		return scalar(n)
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

func scalar(n *yaml.Node) (any, error) {
	if n.Style == 0 && n.Tag == "!!str" {
		switch n.Value {
		case "yes", "Yes", "YES", "on", "On", "ON":
			return true, nil
		case "no", "No", "NO", "off", "Off", "OFF":
			return false, nil
		}
	}
	switch n.Tag {
	case "!!null":
		return nil, nil
	case "!!bool":
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			return n.Value, nil
		}
		return b, nil
	case "!!int":
		var v int
		if err := n.Decode(&v); err == nil {
			return v, nil
		}
		var f float64
		if err := n.Decode(&f); err == nil {
			return f, nil
		}
		return n.Value, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return n.Value, nil
		}
		return f, nil
	}
	return n.Value, nil
}

// ResolveScalar reads t as a plain YAML scalar on its own: what its text
// alone says (an int, a float, a bool, null), else the string t. It never
// reads structure: "[a]", "a: b", "*x" and "!!tag x" stay strings.
func ResolveScalar(t string) (any, error) {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: t}
	tag := n.ShortTag()
	switch tag {
	case "!!int", "!!float", "!!bool", "!!null":
	default:
		tag = "!!str"
	}
	n.Tag = tag
	return scalar(n)
}

func yamlErrLine(err error) int {
	s := err.Error()
	i := strings.Index(s, "line ")
	if i < 0 {
		return 0
	}
	j := i + 5
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(s[i+5 : j])
	return n
}

// MarshalFlowYAML renders v as one line of flow-style YAML, as Salt's yaml
// filter (yaml.safe_dump with default_flow_style=True) does. It writes
// what go-yaml wrote (the node (*yaml.Node).Encode makes of v, in flow
// style), with internal/yamlemit, which the device agent links instead of
// go-yaml's encoder.
func MarshalFlowYAML(v any) (string, error) {
	n, err := yamlemit.FromValue(v)
	if err != nil {
		return "", err
	}
	setFlow(n)
	out, err := yamlemit.Encode(n, yamlemit.Options{})
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

func needsEscape(r rune) bool {
	return r < 0x20 || r >= 0x7f && r <= 0x9f || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff
}

// setFlow puts collections in flow style and strings that hold line
// breaks or characters YAML does not print in double quotes, where they
// are escaped: the output stays on one line wherever a template puts it.
func setFlow(n *yaml.Node) {
	switch {
	case n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode:
		n.Style = yaml.FlowStyle
	case n.Kind == yaml.ScalarNode && strings.ContainsFunc(n.Value, needsEscape):
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		setFlow(c)
	}
}
