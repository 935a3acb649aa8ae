package output

import (
	"bytes"
	"testing"
)

// TestInSaltOrder pins the key order Salt prints for the functions whose
// order is known: cmd.run_all fills pid, retcode, stdout, stderr
// (salt/modules/cmdmod.py _run), grains.item its arguments in order
// (salt/modules/grains.py item). json, txt and raw print a dict in its
// order (salt/output/json_out.py passes no sort_keys, txt.py and raw.py
// iterate the dict); nested, yaml and pprint sort (nested.py sorted(ret),
// PyYAML's sort_keys, pprint's sort_dicts).
func TestInSaltOrder(t *testing.T) {
	runAll := map[string]any{"stdout": "hi", "stderr": "", "retcode": int64(0), "pid": int64(7)}
	items := map[string]any{"osrelease": "5.10", "os": "Linux", "cpuarch": "armv7l"}
	tests := []struct {
		fun  string
		args []any
		ret  any
		out  string
		want string
	}{
		{"cmd.run_all", nil, runAll, "json", "{\n    \"m\": {\n        \"pid\": 7,\n        \"retcode\": 0,\n        \"stdout\": \"hi\",\n        \"stderr\": \"\"\n    }\n}\n"},
		{"cmd.run_all", nil, runAll, "raw", "{'m': {'pid': 7, 'retcode': 0, 'stdout': 'hi', 'stderr': ''}}\n"},
		{"cmd.run_all", nil, runAll, "txt", "m: {'pid': 7, 'retcode': 0, 'stdout': 'hi', 'stderr': ''}\n"},
		{"cmd.run_all", nil, runAll, "pprint", "{'m': {'pid': 7, 'retcode': 0, 'stderr': '', 'stdout': 'hi'}}\n"},
		{"cmd.run_all", nil, runAll, "yaml", "m:\n  pid: 7\n  retcode: 0\n  stderr: ''\n  stdout: hi\n"},
		{"cmd.run_all", nil, runAll, "nested", "m:\n    ----------\n    pid:\n        7\n    retcode:\n        0\n    stderr:\n    stdout:\n        hi\n"},
		{"grains.item", []any{"osrelease", "os", "cpuarch"}, items, "json", "{\n    \"m\": {\n        \"osrelease\": \"5.10\",\n        \"os\": \"Linux\",\n        \"cpuarch\": \"armv7l\"\n    }\n}\n"},
		{"grains.item", []any{"os"}, items, "raw", "{'m': {'os': 'Linux', 'cpuarch': 'armv7l', 'osrelease': '5.10'}}\n"}, // others after, sorted
		{"grains.items", nil, items, "raw", "{'m': {'cpuarch': 'armv7l', 'os': 'Linux', 'osrelease': '5.10'}}\n"},        // no known order: sorted
		{"test.ping", nil, true, "raw", "{'m': True}\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := Format(&buf, tt.out, map[string]any{"m": InSaltOrder(tt.fun, tt.args, tt.ret)}, Options{}); err != nil {
			t.Fatalf("%s %s: %v", tt.fun, tt.out, err)
		}
		if got := buf.String(); got != tt.want {
			t.Errorf("%s --out %s: got %q, want %q", tt.fun, tt.out, got, tt.want)
		}
	}
}

// TestOutputter pins Salt's fallback for an unknown outputter
// (salt/output/__init__.py get_printout): nested, with an error logged,
// except for "grains"; no --out at all is nested; "text" is txt.
func TestOutputter(t *testing.T) {
	tests := []struct {
		name, want, wantErr string
	}{
		{"json", "json", ""},
		{"text", "txt", ""},
		{"", "nested", ""},
		{"bogus", "nested", "[ERROR   ] Invalid outputter bogus specified, fall back to nested\n"},
		{"highstate", "highstate", ""},
		{"grains", "nested", ""},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		if got := Outputter(tt.name, &stderr); got != tt.want {
			t.Errorf("Outputter(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if got := stderr.String(); got != tt.wantErr {
			t.Errorf("Outputter(%q) wrote %q, want %q", tt.name, got, tt.wantErr)
		}
	}
}

// TestCLIOptions pins which outputters read output_indent
// (salt/output/json_out.py, yaml_out.py, pprint_out.py) and that an absent
// --out-indent differs from --out-indent 0.
func TestCLIOptions(t *testing.T) {
	zero, neg := 0, -1
	tests := []struct {
		format string
		indent *int
		want   Options
	}{
		{"json", nil, Options{}},
		{"json", &zero, Options{IndentSet: true, Indent: 0}},
		{"yaml", &neg, Options{IndentSet: true, Indent: -1}},
		{"pprint", &zero, Options{IndentSet: true}},
		{"nested", &zero, Options{}},
		{"txt", &neg, Options{}},
	}
	for _, tt := range tests {
		if got := CLIOptions(tt.format, tt.indent, false); got != tt.want {
			t.Errorf("CLIOptions(%q, %v) = %+v, want %+v", tt.format, tt.indent, got, tt.want)
		}
	}
}

// TestNewlineValuesOnly pins salt/output/newline_values_only.py: values a
// line each, list items a line each, minion ids dropped; data that is not
// a dict falls back to nested (try_printout catches the AttributeError).
func TestNewlineValuesOnly(t *testing.T) {
	tests := []struct {
		data any
		want string
	}{
		{map[string]any{"myminion": []any{"127.0.0.1", "10.0.0.1"}, "second-minion": []any{"127.0.0.1", "10.0.0.2"}}, "127.0.0.1\n10.0.0.1\n127.0.0.1\n10.0.0.2\n"},
		{map[string]any{"myminion": int64(8), "second-minion": int64(10)}, "8\n10\n"},
		{map[string]any{"m": map[string]any{"a": true}}, "{'a': True}\n"},
		{[]any{"x", "y"}, "- x\n- y\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := Format(&buf, "newline_values_only", tt.data, Options{}); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != tt.want {
			t.Errorf("newline_values_only %v: got %q, want %q", tt.data, got, tt.want)
		}
	}
}
