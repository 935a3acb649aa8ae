package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/internal/yamlbound"
)

// This file reads command-line arguments as Salt 3006 does: the kwarg split
// of salt/utils/args.py parse_kwarg (KWARG_REGEX), yamlify_arg, and
// condition_input's rule that a 20-digit integer (a jid) stays a string.
// Values are loaded as salt.utils.yaml.safe_load loads them: PyYAML's
// YAML 1.1 SafeLoader (yes/no/on/off are booleans, 1e3 and 1_000 are not
// numbers the way YAML 1.2 has them) with Salt's SaltYamlSafeLoader
// changes (salt/utils/yamlloader.py): timestamps stay strings, an integer
// with leading zeros is decimal, a duplicate key is an error.

// ParseFunArgs turns the words after a function name into positional
// arguments and keyword arguments as Salt's CLI does
// (salt.utils.args.parse_input): a word "key=value" whose key is an
// identifier (letters, digits, _, . and -, not starting with a digit) is a
// keyword argument unless the value starts with another "="; each value is
// read by YAMLValue; a positional integer of 20 digits, a jid, is sent as
// its text.
func ParseFunArgs(words []string) (args []any, kwargs map[string]any) {
	args = []any{}
	for _, w := range words {
		if k, v, ok := parseKwarg(w); ok {
			if kwargs == nil {
				kwargs = map[string]any{}
			}
			kwargs[k] = YAMLValue(v)
			continue
		}
		v := YAMLValue(w)
		if s, ok := jidText(v); ok {
			v = s // condition_input: is_jid(str(arg)) for an int arg
		}
		args = append(args, v)
	}
	return args, kwargs
}

// parseKwarg matches w against Salt's KWARG_REGEX,
// ^([^\d\W][\w.-]*)=(?!=)(.*)$ in Python's re: the value holds no line
// break, but for one at the very end, which $ lets go unmatched.
func parseKwarg(w string) (key, val string, ok bool) {
	key, val, ok = strings.Cut(w, "=")
	if !ok || key == "" || strings.HasPrefix(val, "=") {
		return "", "", false
	}
	for i, r := range key {
		word := r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
		switch {
		case i == 0 && (!word || unicode.Is(unicode.Nd, r)):
			return "", "", false
		case i > 0 && !word && r != '.' && r != '-':
			return "", "", false
		}
	}
	val = strings.TrimSuffix(val, "\n")
	if strings.Contains(val, "\n") {
		return "", "", false
	}
	return key, val, true
}

// jidText returns the decimal text of an integer whose text is 20
// characters long, as salt.utils.jid.is_jid(str(arg)) sees it.
func jidText(v any) (string, bool) {
	var s string
	switch x := v.(type) {
	case int:
		s = strconv.Itoa(x)
	case uint64:
		s = strconv.FormatUint(x, 10)
	default:
		return "", false
	}
	return s, len(s) == 20
}

// YAMLValue reads s as Salt's yamlify_arg does (salt/utils/args.py):
//
//   - blank text, "---", "...", digits with underscores (1_000) and text
//     holding a tab or line break stay as they are;
//   - text holding "#" is loaded, and kept as it is when that gives a
//     string or None (a comment would have eaten part of it);
//   - "None" is None;
//   - otherwise the YAML value: None, a boolean, an integer, a float, a
//     string (quotes removed), a list only when s starts with "[", a
//     dictionary only when s starts with "{"; "|" and "!" stay themselves;
//   - what does not load, or loads to another type (binary, set), stays s.
//
// An integer beyond 64 bits, which Python would hold, stays its text.
func YAMLValue(s string) any {
	trimmed := strings.TrimSpace(s)
	switch {
	case trimmed == "" || trimmed == "---" || trimmed == "...":
		return s
	case strings.Contains(s, "_") && strings.Trim(trimmed, "0123456789_") == "":
		return s
	case strings.ContainsAny(s, "\t\r\n"):
		return s
	}
	if strings.Contains(s, "#") {
		v, err := loadYAML(s)
		if err != nil || v == nil {
			return s
		}
		if _, ok := v.(string); ok {
			return s
		}
		return v
	}
	if s == "None" {
		return nil
	}
	v, err := loadYAML(s)
	if err != nil {
		return s
	}
	switch v.(type) {
	case map[string]any:
		if !strings.HasPrefix(s, "{") {
			return s
		}
	case []any:
		if !strings.HasPrefix(s, "[") {
			return s
		}
	case string:
		if v == "" && (s == "|" || s == "!") {
			return s
		}
	case nil:
		if s == "!" || strings.HasPrefix(trimmed, "#") {
			return s
		}
	case bool, int, uint64, float64:
	default:
		return s
	}
	return v
}

// Bounds of one argument's YAML: how deeply collections nest, and how many
// nodes aliases may expand to in all (a few bytes of aliases can name
// millions of nodes).
const (
	maxArgDepth = 64
	maxArgNodes = 10000
)

var errUnsupported = errors.New("unsupported yaml type")

// loadYAML is salt.utils.yaml.safe_load for one argument: the value of its
// single document, or an error where PyYAML would raise.
func loadYAML(s string) (any, error) {
	root, err := decodeYAML(s)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, nil
	}
	// PyYAML reads an empty scalar with the non-specific tag "!" as "",
	// where go-yaml makes it null.
	if t := strings.TrimLeft(s, " "); root.Kind == yaml.ScalarNode && root.Style == 0 && root.Value == "" && (t == "!" || strings.HasPrefix(t, "! ")) {
		return "", nil
	}
	c := &constructor{budget: maxArgNodes}
	return c.value(root, 0)
}

// decodeYAML parses s as one YAML document and returns its root node (nil
// for an empty document). It is the one place internal/cli decodes YAML.
func decodeYAML(s string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(s))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("decode yaml: %w", err)
	}
	// PyYAML's safe_load wants a single document: anything after the first
	// ("[a]]", "'a' b") is an error.
	var rest yaml.Node
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode yaml: more than one document")
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	if err := yamlbound.Check(&doc); err != nil {
		return nil, fmt.Errorf("decode yaml: %w", err)
	}
	return doc.Content[0], nil
}

// constructor builds values from nodes as SaltYamlSafeLoader does.
type constructor struct {
	budget int // nodes left to build
}

func (c *constructor) value(n *yaml.Node, depth int) (any, error) {
	c.budget--
	if c.budget < 0 || depth > maxArgDepth {
		return nil, errors.New("yaml argument too large")
	}
	switch n.Kind {
	case yaml.AliasNode:
		return c.value(n.Alias, depth+1)
	case yaml.ScalarNode:
		return scalarValue(n)
	case yaml.SequenceNode:
		if n.Style&yaml.TaggedStyle != 0 && n.Tag != "!!seq" {
			return nil, errUnsupported // !!set, !!omap, !!pairs, local tags
		}
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := c.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		if n.Style&yaml.TaggedStyle != 0 && n.Tag != "!!map" {
			return nil, errUnsupported
		}
		return c.mapping(n, depth)
	}
	return nil, errUnsupported
}

// mapping builds a dictionary: merge keys ("<<") are flattened with the
// mapping's own keys winning, and a key given twice is an error, as in
// SaltYamlSafeLoader. Keys are written as Python's str() writes them.
func (c *constructor) mapping(n *yaml.Node, depth int) (map[string]any, error) {
	var own, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Style&^yaml.TaggedStyle == 0 && k.Value == "<<" && (k.Style == 0 || k.Tag == "!!merge") {
			m := v
			if m.Kind == yaml.AliasNode {
				m = m.Alias
			}
			var subs []*yaml.Node
			switch m.Kind {
			case yaml.MappingNode:
				subs = []*yaml.Node{m}
			case yaml.SequenceNode:
				for j := len(m.Content) - 1; j >= 0; j-- { // later ones first, as PyYAML reverses them
					s := m.Content[j]
					if s.Kind == yaml.AliasNode {
						s = s.Alias
					}
					if s.Kind != yaml.MappingNode {
						return nil, errors.New("merge of a non-mapping")
					}
					subs = append(subs, s)
				}
			default:
				return nil, errors.New("merge of a non-mapping")
			}
			for _, s := range subs {
				for j := 0; j+1 < len(s.Content); j += 2 {
					merged = append(merged, [2]*yaml.Node{s.Content[j], s.Content[j+1]})
				}
			}
			continue
		}
		own = append(own, [2]*yaml.Node{k, v})
	}
	pairs := own
	if len(merged) > 0 {
		ownKeys := map[string]bool{}
		for _, p := range own {
			ownKeys[p[0].Value] = true
		}
		pairs = nil
		for _, p := range merged {
			if !ownKeys[p[0].Value] {
				pairs = append(pairs, p)
			}
		}
		pairs = append(pairs, own...)
	}
	out := make(map[string]any, len(pairs))
	seen := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		kn := p[0]
		if kn.Kind == yaml.AliasNode {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			return nil, errors.New("unhashable mapping key")
		}
		k, err := c.value(kn, depth+1)
		if err != nil {
			return nil, err
		}
		key := pyKeyStr(k)
		if seen[pyEqKey(k)] {
			return nil, fmt.Errorf("conflicting key %q", key)
		}
		seen[pyEqKey(k)] = true
		v, err := c.value(p[1], depth+1)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

// pyKeyStr is Python's str() of a scalar key.
func pyKeyStr(k any) string {
	switch x := k.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(k)
}

// pyEqKey names k's equality class among Python's dictionary keys, where
// True == 1 and 2.0 == 2: Salt's loader refuses {1: a, true: b} as a
// conflicting key.
func pyEqKey(k any) string {
	switch x := k.(type) {
	case bool:
		if x {
			return "n1"
		}
		return "n0"
	case int:
		return "n" + strconv.Itoa(x)
	case uint64:
		return "n" + strconv.FormatUint(x, 10)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return "n" + strconv.FormatInt(int64(x), 10)
		}
		return "f" + strconv.FormatFloat(x, 'g', -1, 64)
	case nil:
		return "none"
	}
	return "s" + fmt.Sprint(k)
}

// PyYAML's implicit resolvers for plain scalars (yaml/resolver.py).
var (
	reBool  = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	reNull  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	reInt   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	reFloat = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	// reTimestamp matters only in that Salt keeps a timestamp as its text.
	reMerge = regexp.MustCompile(`^(?:<<)$`)
	reValue = regexp.MustCompile(`^(?:=)$`)
)

// scalarValue resolves and constructs a scalar as SaltYamlSafeLoader does.
func scalarValue(n *yaml.Node) (any, error) {
	v := n.Value
	tag := "!!str"
	switch {
	case n.Style&yaml.TaggedStyle != 0:
		tag = n.Tag
	case n.Style != 0: // quoted or block: a string
	case reBool.MatchString(v):
		tag = "!!bool"
	case reInt.MatchString(v):
		tag = "!!int"
	case reFloat.MatchString(v):
		tag = "!!float"
	case reNull.MatchString(v):
		tag = "!!null"
	case reMerge.MatchString(v), reValue.MatchString(v):
		return nil, errUnsupported // SafeConstructor has no constructor for them
	}
	switch tag {
	case "!!str", "!!timestamp":
		return v, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		switch strings.ToLower(v) {
		case "yes", "true", "on":
			return true, nil
		case "no", "false", "off":
			return false, nil
		}
		return nil, fmt.Errorf("not a boolean: %q", v)
	case "!!int":
		return yamlInt(v)
	case "!!float":
		return yamlFloat(v)
	}
	return nil, errUnsupported
}

// yamlInt is PyYAML's construct_yaml_int after Salt's construct_scalar,
// which strips the leading zeros of an unsigned integer so that 010 is
// ten, not octal eight.
func yamlInt(v string) (any, error) {
	if v != "0" && strings.HasPrefix(v, "0") && !strings.HasPrefix(v, "0b") && !strings.HasPrefix(v, "0x") {
		if v = strings.TrimLeft(v, "0"); v == "" {
			v = "0"
		}
	}
	v = strings.ReplaceAll(v, "_", "")
	if v == "" {
		return nil, errors.New("empty integer")
	}
	neg := v[0] == '-'
	if v[0] == '-' || v[0] == '+' {
		v = v[1:]
	}
	n := new(big.Int)
	var ok bool
	switch {
	case v == "0":
		ok = true
	case strings.HasPrefix(v, "0b"):
		_, ok = n.SetString(v[2:], 2)
	case strings.HasPrefix(v, "0x"):
		_, ok = n.SetString(v[2:], 16)
	case strings.HasPrefix(v, "0"):
		_, ok = n.SetString(v, 8)
	case strings.Contains(v, ":"):
		ok = true
		for _, part := range strings.Split(v, ":") {
			d, err := strconv.ParseInt(part, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("not an integer: %q", v)
			}
			n.Mul(n, big.NewInt(60))
			n.Add(n, big.NewInt(d))
		}
	default:
		_, ok = n.SetString(v, 10)
	}
	if !ok {
		return nil, fmt.Errorf("not an integer: %q", v)
	}
	if neg {
		n.Neg(n)
	}
	switch {
	case n.IsInt64() && n.Int64() >= math.MinInt && n.Int64() <= math.MaxInt:
		return int(n.Int64()), nil
	case n.IsUint64():
		return n.Uint64(), nil
	}
	return n.String(), nil // beyond 64 bits: its text
}

// yamlFloat is PyYAML's construct_yaml_float.
func yamlFloat(v string) (any, error) {
	v = strings.ToLower(strings.ReplaceAll(v, "_", ""))
	if v == "" {
		return nil, errors.New("empty float")
	}
	sign := 1.0
	if v[0] == '-' {
		sign = -1
	}
	if v[0] == '-' || v[0] == '+' {
		v = v[1:]
	}
	switch {
	case v == ".inf":
		return sign * math.Inf(1), nil
	case v == ".nan":
		return math.NaN(), nil
	case strings.Contains(v, ":"):
		f := 0.0
		for _, part := range strings.Split(v, ":") {
			d, err := strconv.ParseFloat(part, 64)
			if err != nil {
				return nil, fmt.Errorf("not a float: %q", v)
			}
			f = f*60 + d
		}
		return sign * f, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Errorf("not a float: %q", v)
	}
	return sign * f, nil
}
