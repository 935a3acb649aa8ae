package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/protocol"
)

// value is one option's YAML value, handed to the option's setter. The
// setters' errors name what was expected; the loader adds file, line and
// option name.
type value struct {
	n    *yaml.Node
	file string // the file it is in, for options that record where (schedule)
}

// pyBools are the words PyYAML (YAML 1.1), and so Salt, reads as booleans.
var pyBools = map[string]bool{
	"yes": true, "Yes": true, "YES": true, "no": false, "No": false, "NO": false,
	"on": true, "On": true, "ON": true, "off": false, "Off": false, "OFF": false,
	"true": true, "True": true, "TRUE": true, "false": false, "False": false, "FALSE": false,
}

// resolve follows aliases and unwraps documents.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch {
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		default:
			return n
		}
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names what a node holds, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an unsupported YAML node"
}

func (v value) node() *yaml.Node { return resolve(v.n) }

// id sets dst to an agent id that passes protocol.ValidID.
func (v value) id(dst *string) error {
	var s string
	if err := v.str(&s); err != nil {
		return err
	}
	if err := protocol.ValidID(s); err != nil {
		var pe *protocol.ProtoError
		if errors.As(err, &pe) {
			return errors.New(pe.Msg)
		}
		return err
	}
	*dst = s
	return nil
}

func (v value) str(dst *string) error {
	n := v.node()
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a string, got %s", describe(n))
	}
	*dst = n.Value
	return nil
}

// oneOf sets dst to the string value if it is one of allowed.
func (v value) oneOf(dst *string, allowed ...string) error {
	var s string
	if err := v.str(&s); err != nil {
		return err
	}
	for _, a := range allowed {
		if s == a {
			*dst = s
			return nil
		}
	}
	return fmt.Errorf("expected one of %s, got %q", strings.Join(allowed, ", "), s)
}

func (v value) logLevel(dst *string) error {
	var s string
	if err := v.str(&s); err != nil {
		return err
	}
	if !ValidLogLevel(s) {
		return fmt.Errorf("expected a log level (%s), got %q", strings.Join(logLevelNames, ", "), s)
	}
	*dst = strings.ToLower(s)
	return nil
}

func (v value) integer() (int, error) {
	n := v.node()
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int":
			var i int
			if err := n.Decode(&i); err == nil {
				return i, nil
			}
		case "!!str":
			if i, err := strconv.Atoi(strings.TrimSpace(n.Value)); err == nil {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("expected an integer, got %s", describe(n))
}

func (v value) int(dst *int) error {
	i, err := v.integer()
	if err != nil {
		return err
	}
	*dst = i
	return nil
}

// count is an integer that may not be negative (a number of things, or of
// seconds or hours).
func (v value) count(dst *int) error {
	i, err := v.integer()
	if err != nil {
		return err
	}
	if i < 0 {
		return fmt.Errorf("expected a non-negative integer, got %d", i)
	}
	*dst = i
	return nil
}

func (v value) port(dst *int) error {
	i, err := v.integer()
	if err != nil {
		return err
	}
	if i < 1 || i > 65535 {
		return fmt.Errorf("expected a port number from 1 to 65535, got %d", i)
	}
	*dst = i
	return nil
}

func (v value) bool(dst *bool) error {
	n := v.node()
	if n.Kind == yaml.ScalarNode {
		if b, ok := pyBools[n.Value]; ok {
			*dst = b
			return nil
		}
	}
	return fmt.Errorf("expected a boolean (true/false, yes/no, on/off), got %s", describe(n))
}

// strList accepts a string or a list of strings. With splitComma a single
// string is split at commas ("a,b"), as Salt does for "return".
func (v value) strList(dst *[]string, splitComma bool) error {
	n := v.node()
	switch n.Kind {
	case yaml.ScalarNode:
		if !splitComma {
			*dst = []string{n.Value}
			return nil
		}
		var out []string
		for _, p := range strings.Split(n.Value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		*dst = out
		return nil
	case yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			c = resolve(c)
			if c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
				return fmt.Errorf("expected a string or a list of strings, got a list holding %s", describe(c))
			}
			out = append(out, c.Value)
		}
		*dst = out
		return nil
	}
	return fmt.Errorf("expected a string or a list of strings, got %s", describe(n))
}

// roots reads file_roots-style options: saltenv -> list of directories.
func (v value) roots(dst *map[string][]string) error {
	n := v.node()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of environments to lists of directories, got %s", describe(n))
	}
	out := make(map[string][]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		env := resolve(n.Content[i]).Value
		var dirs []string
		if err := (value{n: n.Content[i+1]}).strList(&dirs, false); err != nil {
			return fmt.Errorf("%s: %w", env, err)
		}
		out[env] = dirs
	}
	*dst = out
	return nil
}

func (v value) anyMap(dst *map[string]any) error {
	n := v.node()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping, got %s", describe(n))
	}
	a, err := toAny(n)
	if err != nil {
		return err
	}
	*dst = a.(map[string]any)
	return nil
}

func (v value) anyList(dst *[]any) error {
	n := v.node()
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("expected a list, got %s", describe(n))
	}
	a, err := toAny(n)
	if err != nil {
		return err
	}
	*dst = a.([]any)
	return nil
}

func (v value) any(dst *any) error {
	a, err := toAny(v.n)
	if err != nil {
		return err
	}
	*dst = a
	return nil
}

// toAny converts a YAML node to plain Go values the way Salt's PyYAML loader
// would: mappings become map[string]any, lists []any, and plain yes/no/on/off
// booleans. Aliases and merge keys ("<<") are followed.
func toAny(n *yaml.Node) (any, error) {
	n = resolve(n)
	if n == nil {
		return nil, nil
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Style == 0 && n.ShortTag() != "!!null" {
			if b, ok := pyBools[n.Value]; ok {
				return b, nil
			}
		}
		var x any
		if err := n.Decode(&x); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return x, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			a, err := toAny(c)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		var explicit [][2]*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				if err := mergeInto(out, n.Content[i+1]); err != nil {
					return nil, err
				}
				continue
			}
			explicit = append(explicit, [2]*yaml.Node{k, n.Content[i+1]})
		}
		for _, kv := range explicit {
			if kv[0].Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping keys must be scalars, got %s", kv[0].Line, describe(kv[0]))
			}
			a, err := toAny(kv[1])
			if err != nil {
				return nil, err
			}
			out[kv[0].Value] = a
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// mergeInto applies a "<<" merge: a mapping or a list of mappings, earlier
// ones winning, explicit keys (applied afterwards) winning over all.
func mergeInto(out map[string]any, n *yaml.Node) error {
	n = resolve(n)
	var srcs []*yaml.Node
	switch n.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{n}
	case yaml.SequenceNode:
		srcs = n.Content
	default:
		return fmt.Errorf("line %d: merge key needs a mapping or a list of mappings, got %s", n.Line, describe(n))
	}
	for _, s := range srcs {
		a, err := toAny(s)
		if err != nil {
			return err
		}
		m, ok := a.(map[string]any)
		if !ok {
			return fmt.Errorf("line %d: merge key needs a mapping or a list of mappings", n.Line)
		}
		for k, v := range m {
			if _, seen := out[k]; !seen {
				out[k] = v
			}
		}
	}
	return nil
}

// Bool reads a boolean as Salt would from a decoded value: a bool, one of
// PyYAML's words (yes/no, on/off, true/false in their cases), "1"/"0", ""
// (false), or a number (non-zero is true). ok is false for anything else.
func Bool(v any) (b, ok bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		if b, ok := pyBools[v]; ok {
			return b, true
		}
		switch strings.ToLower(v) {
		case "true", "yes", "on", "1":
			return true, true
		case "false", "no", "off", "0", "":
			return false, true
		}
	case int:
		return v != 0, true
	case int64:
		return v != 0, true
	case uint64:
		return v != 0, true
	}
	return false, false
}

// nodegroups reads the nodegroups option: a mapping of names to
// expressions, or Salt's list form, a list of one-key mappings, which Salt
// repacks into one mapping (salt/config/__init__.py apply_master_config:
// is_dictlist, repack_dictlist; a later name wins).
func (v value) nodegroups(dst *map[string]any) error {
	n := v.node()
	if n.Kind != yaml.SequenceNode {
		return v.anyMap(dst)
	}
	out := make(map[string]any, len(n.Content))
	for _, c := range n.Content {
		c = resolve(c)
		if c.Kind != yaml.MappingNode || len(c.Content) != 2 {
			return &atLine{c.Line, fmt.Sprintf("expected a mapping of names to expressions or a list of one-name mappings, got a list holding %s", describeEntry(c))}
		}
		var one map[string]any
		if err := (value{n: c}).anyMap(&one); err != nil {
			return err
		}
		for k, e := range one {
			out[k] = e
		}
	}
	*dst = out
	return nil
}

// describeEntry is describe, saying how many keys a mapping has.
func describeEntry(n *yaml.Node) string {
	if n.Kind == yaml.MappingNode {
		return fmt.Sprintf("a mapping of %d names", len(n.Content)/2)
	}
	return describe(n)
}

// between sets dst to an integer from lo to hi.
func between(v value, dst *int, lo, hi int) error {
	i, err := v.integer()
	if err != nil {
		return err
	}
	if i < lo || i > hi {
		return fmt.Errorf("expected an integer from %d to %d, got %d", lo, hi, i)
	}
	*dst = i
	return nil
}
