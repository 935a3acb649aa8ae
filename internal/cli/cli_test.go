package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseFunArgs checks several words together (salt/utils/args.py
// parse_input); TestParseFunArgsSalt has the cases one by one.
func TestParseFunArgs(t *testing.T) {
	tests := []struct {
		words      []string
		wantArgs   []any
		wantKwargs map[string]any
	}{
		{nil, []any{}, nil},
		{[]string{"ls -l /"}, []any{"ls -l /"}, nil},
		{[]string{"3", "true", "1.5", "x"}, []any{3, true, 1.5, "x"}, nil},
		{[]string{"echo hi", "cwd=/tmp", "timeout=5"}, []any{"echo hi"}, map[string]any{"cwd": "/tmp", "timeout": 5}},
		{[]string{"a=b=c"}, []any{}, map[string]any{"a": "b=c"}},
		{[]string{"x y=z"}, []any{"x y=z"}, nil},
		{[]string{"[1, 2]", "{a: 1}"}, []any{[]any{1, 2}, map[string]any{"a": 1}}, nil},
		{[]string{"None", "null", ""}, []any{nil, nil, ""}, nil},
		{[]string{"'quoted'"}, []any{"quoted"}, nil}, // yamlify_arg returns the loaded str
		{[]string{"{1: x}"}, []any{map[string]any{"1": "x"}}, nil},
		{[]string{"- a"}, []any{"- a"}, nil},
		{[]string{"20261122121248902947", "1e3"}, []any{"20261122121248902947", "1e3"}, nil}, // PyYAML's float needs a dot
	}
	for _, tt := range tests {
		args, kwargs := ParseFunArgs(tt.words)
		if d := cmp.Diff(tt.wantArgs, args); d != "" {
			t.Errorf("ParseFunArgs(%q) args (-want +got):\n%s", tt.words, d)
		}
		if d := cmp.Diff(tt.wantKwargs, kwargs); d != "" {
			t.Errorf("ParseFunArgs(%q) kwargs (-want +got):\n%s", tt.words, d)
		}
	}
}

// TestYAMLValueAliasBomb: a command-line argument holding a nested alias
// bomb stays the string it is, at once.
func TestYAMLValueAliasBomb(t *testing.T) {
	arg := "{a: &a [x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], " +
		"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d], f: [*e,*e,*e,*e,*e,*e,*e,*e,*e]}"
	if got := YAMLValue(arg); got != arg {
		t.Errorf("got %T, want the argument as a string", got)
	}
	if got, ok := YAMLValue("{a: &a [1, 2], b: *a}").(map[string]any); !ok || len(got["b"].([]any)) != 2 {
		t.Errorf("got %v, want a mapping with b: [1, 2]", got)
	}
}
