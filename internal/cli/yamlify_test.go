package cli

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestParseFunArgsSalt pins, one word at a time, what Salt 3006's CLI makes
// of each argument: salt/utils/args.py parse_input splits "key=value" with
// KWARG_REGEX and passes each value through yamlify_arg, which loads it with
// salt.utils.yaml.safe_load (salt/utils/yamlloader.py SaltYamlSafeLoader,
// PyYAML's YAML 1.1 resolvers in yaml/resolver.py); condition_input sends a
// positional 20-digit integer (salt.utils.jid.is_jid) as a string. The
// expected values were checked against that code run under PyYAML 6 with
// libyaml.
func TestParseFunArgsSalt(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		word    string
		wantArg any            // the positional argument, when wantKw is nil
		wantKw  map[string]any // the keyword argument, when the word is one
	}{
		{"yes", true, nil},
		{"no", false, nil},
		{"on", true, nil},
		{"off", false, nil},
		{"Yes", true, nil},
		{"OFF", false, nil},
		{"TRUE", true, nil},
		{"y", "y", nil},
		{"n", "n", nil},
		{"python_shell=off", nil, map[string]any{"python_shell": false}},
		{"python_shell=yes", nil, map[string]any{"python_shell": true}},
		{"key=on", nil, map[string]any{"key": true}},
		{"1_000", "1_000", nil},
		{"1e3", "1e3", nil},
		{"1.5e3", "1.5e3", nil},
		{"1.5e+3", 1500.0, nil},
		{"1.0e+999", math.Inf(1), nil},
		{"0x1F", 31, nil},
		{"0b101", 5, nil},
		{"010", 10, nil},
		{"-010", -8, nil},
		{"0o17", "0o17", nil},
		{"09", "09", nil},
		{"1:30", 90, nil},
		{"1:30.5", 90.5, nil},
		{".5", 0.5, nil},
		{"+1", 1, nil},
		{".inf", math.Inf(1), nil},
		{"-.Inf", math.Inf(-1), nil},
		{".NaN", nan, nil},
		{"3", 3, nil},
		{"-7", -7, nil},
		{"1.5", 1.5, nil},
		{"20261122121248902947", "20261122121248902947", nil},
		// Python holds this integer; msgpack (and CBOR here) cannot carry it: its text goes.
		// Python holds this integer; msgpack (and CBOR here) cannot carry it: its text goes.
		{"12345678901234567890123", "12345678901234567890123", nil},
		// A keyword argument is not conditioned as a jid; beyond 64 bits it goes as text.
		// A keyword argument is not conditioned as a jid; beyond 64 bits it goes as text.
		{"id=20261122121248902947", nil, map[string]any{"id": "20261122121248902947"}},
		{"None", nil, nil},
		{"none", "none", nil},
		{"null", nil, nil},
		{"~", nil, nil},
		{"Null", nil, nil},
		{"#tag", "#tag", nil},
		{"a #comment", "a #comment", nil},
		{"a#b", "a#b", nil},
		{"[1, 2] # c", []any{1, 2}, nil},
		{"- x #c", []any{"x"}, nil},
		{"k: v # c", map[string]any{"k": "v"}, nil},
		{"!", "!", nil},
		{"|", "|", nil},
		{">", "", nil},
		{"! ", "", nil},
		{"! 3", 3, nil},
		{"!!str 3", "3", nil},
		{"!!int \"3\"", 3, nil},
		{"!!float 1", 1.0, nil},
		{"!!bool yes", true, nil},
		{"!!binary aGk=", "!!binary aGk=", nil},
		{"!!set {a}", "!!set {a}", nil},
		{"!foo bar", "!foo bar", nil},
		{"!!python/name:os.system", "!!python/name:os.system", nil},
		{"[1, 2]", []any{1, 2}, nil},
		{"[a, [b, c]]", []any{"a", []any{"b", "c"}}, nil},
		{" [1]", " [1]", nil},
		{"{a: 1}", map[string]any{"a": 1}, nil},
		{"{a: 1, b: [x, y]}", map[string]any{"a": 1, "b": []any{"x", "y"}}, nil},
		{" {a: 1}", " {a: 1}", nil},
		{"a: 1", "a: 1", nil},
		{"- a", "- a", nil},
		{"{1: x, true: y, ~: z}", "{1: x, true: y, ~: z}", nil},
		{"{a: 1, a: 2}", "{a: 1, a: 2}", nil},
		{"{<<: {a: 1, b: 2}, b: 3}", map[string]any{"a": 1, "b": 3}, nil},
		{"[&x a, *x]", []any{"a", "a"}, nil},
		{"[a, b]]", "[a, b]]", nil},
		{"'quoted'", "quoted", nil},
		{"\"double\"", "double", nil},
		{"'it''s'", "it's", nil},
		{"2024-01-01", "2024-01-01", nil},
		{"2024-01-01 10:00:00", "2024-01-01 10:00:00", nil},
		{"---", "---", nil},
		{"...", "...", nil},
		{"--- a", "a", nil},
		{"ls -l /", "ls -l /", nil},
		{"echo hi", "echo hi", nil},
		{"a=b=c", nil, map[string]any{"a": "b=c"}},
		{"a==b", "a==b", nil},
		{"x y=z", "x y=z", nil},
		{"cwd=/tmp", nil, map[string]any{"cwd": "/tmp"}},
		{"2key=v", "2key=v", nil},
		{"_k=v", nil, map[string]any{"_k": "v"}},
		{"k.x=1", nil, map[string]any{"k.x": 1}},
		{"k-y=2", nil, map[string]any{"k-y": 2}},
		{"clé=v", nil, map[string]any{"clé": "v"}},
		{"=v", "=v", nil},
		{"k=", nil, map[string]any{"k": ""}},
		{"k=a\tb", nil, map[string]any{"k": "a\tb"}},
		{"a: b: c", "a: b: c", nil},
		{"=", "=", nil},
		{"<<", "<<", nil},
		{"[1, ]", []any{1}, nil},
		{"{a}", map[string]any{"a": nil}, nil},
		{"`cmd`", "`cmd`", nil},
		{"@at", "@at", nil},
		{"%pct", "%pct", nil},
		{"*ref", "*ref", nil},
		{"&anc x", "x", nil},
		{"-", "-", nil},
		{"- ", "- ", nil},
		{"?", "?", nil},
		{"? x", "? x", nil},
		{":", ":", nil},
		{"a:b", "a:b", nil},
		{"http://x:80/", "http://x:80/", nil},
		{"[1, 2]]", "[1, 2]]", nil},
		{"{[1]: x}", "{[1]: x}", nil},
		// True == 1 in a Python dict: Salt's loader finds a conflicting key.
		{"{1: x, ~: z}", map[string]any{"1": "x", "None": "z"}, nil},
		// Aliases that expand beyond the bound stay text (PyYAML would build them).
		{"[&a [a,a,a,a,a,a,a,a,a,a], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]]",
			"[&a [a,a,a,a,a,a,a,a,a,a], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]]", nil},
		{"&a [*a]", "&a [*a]", nil},
	}
	for _, tt := range tests {
		args, kwargs := ParseFunArgs([]string{tt.word})
		if tt.wantKw != nil {
			if len(args) != 0 {
				t.Errorf("ParseFunArgs(%q): got args %v, want none", tt.word, args)
			}
			if d := cmp.Diff(tt.wantKw, kwargs, cmpopts.EquateNaNs()); d != "" {
				t.Errorf("ParseFunArgs(%q) kwargs (-want +got):\n%s", tt.word, d)
			}
			continue
		}
		if kwargs != nil {
			t.Errorf("ParseFunArgs(%q): got kwargs %v, want none", tt.word, kwargs)
		}
		if d := cmp.Diff([]any{tt.wantArg}, args, cmpopts.EquateNaNs()); d != "" {
			t.Errorf("ParseFunArgs(%q) args (-want +got):\n%s", tt.word, d)
		}
	}
}

// FuzzYAMLValue feeds arbitrary words to YAMLValue and ParseFunArgs: aliases,
// merges, tags and bad numbers must give a value or the word back, never a
// panic or a hang.
func FuzzYAMLValue(f *testing.F) {
	for _, s := range []string{"yes", "{a: 1}", "[&a [*a]]", "{<<: [*x]}", "!!int 0x_", "1:2:3", "0b", "'", "{a: 1, <<: {a: 2}}", "[" + "[" + "[" + "]]]", "#", "! 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = YAMLValue(s)
		ParseFunArgs([]string{s, "k=" + s})
	})
}
