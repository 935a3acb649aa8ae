package output

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

// goldenCases are the data every outputter is checked against, each shaped
// like a return Salt users know.
var goldenCases = []struct {
	name string
	data any
}{
	{"ping", map[string]any{"cam1": true, "cam2": true}},
	{"grains", map[string]any{
		"cam1": map[string]any{
			"os":          "Linux",
			"osrelease":   "5.10.110",
			"cpuarch":     "armv7l",
			"num_cpus":    int64(2),
			"mem_total":   uint64(512),
			"ipv4":        []any{"10.0.0.5", "127.0.0.1"},
			"biosversion": nil,
			"virtual":     false,
			"locale_info": map[string]any{
				"defaultencoding": "UTF-8",
				"timezone":        "UTC",
			},
			"gpus":   []any{map[string]any{"model": "VPU", "vendor": "hisilicon"}},
			"matrix": []any{[]any{int64(1), int64(2)}, []any{"a"}, []any{}},
			"empty":  map[string]any{},
			"roles":  []string{"camera", "outdoor"},
			"labels": map[string]string{"site": "lyon-3", "zone": "north"},
		},
	}},
	{"run_all", map[string]any{
		"cam1": map[string]any{
			"pid":     int64(4242),
			"retcode": int64(0),
			"stderr":  "",
			"stdout":  "Filesystem  Size  Used\n/dev/root   7.1G  1.2G\n\ntmpfs  64M  0\n",
		},
		"cam2": map[string]any{
			"pid":     int64(77),
			"retcode": int64(1),
			"stderr":  "ls: cannot access '/nope': No such file or directory",
			"stdout":  "",
		},
	}},
	{"list", []any{"a", int64(1), true, nil, 2.5, []any{"x", "y"}, map[string]any{"k": "v"}}},
	{"none", nil},
	{"string", "just a line\nand another"},
	{"unicode", map[string]any{
		"cam-é": "héllo 世界 🎥",
		"quote": "it's",
		"both":  `it's "quoted"`,
		"ctrl":  "tab\there\x01\x1b[31m",
		"nbsp":  "a\u00a0b",
		"🎥 key": "private \uf8ff\uf8fe beside 🎥 and 😀",
	}},
	{"empty", map[string]any{"d": map[string]any{}, "l": []any{}, "s": ""}},
	{"empty_dict", map[string]any{}},
	{"empty_list", []any{}},
	{"numbers", map[string]any{
		"int":      int64(42),
		"neg":      int64(-7),
		"uint":     uint64(math.MaxUint64),
		"big":      new(big.Int).Lsh(big.NewInt(1), 70),
		"one":      1.0,
		"half":     0.5,
		"huge":     1e20,
		"tiny":     1e-5,
		"third":    1.0 / 3,
		"negzero":  math.Copysign(0, -1),
		"e16":      1e16,
		"e15":      1e15,
		"inf":      math.Inf(1),
		"nan":      math.NaN(),
		"intkeyed": map[any]any{int64(10): "ten", int64(2): "two", int64(-1): "minus one"},
	}},
	{"bytes", map[string]any{"blob": []byte{0, 1, 'a', 0xff}, "text": []byte("utf8 text")}},
	{"scalars_needing_quotes", map[string]any{
		"yes": "yes", "num": "1.0", "colon": "a: b", "dash": "- x", "null": "null",
		"space": " lead", "hash": "#tag", "star": "*ref",
	}},
	// Strings past libyaml's 80-column best_width: pprint splits them
	// into adjacent literals (Lib/pprint.py _pprint_str; checked against
	// Python 3.11's pprint.pformat, as salt/output/pprint_out.py calls
	// it). libyaml folds them at a space (emitter.c
	// yaml_emitter_write_plain_scalar); go.yaml.in/yaml/v3 cannot (its
	// width is fixed unlimited), and v4, which can, would add a second YAML
	// library (+0.6 MiB) to halite-call, which runs on devices: yaml keeps
	// long strings on one line, a known difference (README).
	{"long_strings", map[string]any{
		"plain":     "a plain string with many words in it that runs well past the eighty column limit of the emitter, so it folds twice over when written",
		"nospace":   "aVeryLongSingleWordWithoutAnySpaceInItThatCannotBeBrokenAnywhereByTheEmitterAtAllEvenPastEightyColumns",
		"quoted":    "key: value pairs inside a long string force single quotes, and the quoted scalar folds at spaces as well",
		"double":    "a tab\there makes the string double-quoted, and a long double-quoted string is folded with backslash escapes at the ends",
		"twospaces": "two  spaces  between  every  word  of  this  string  keep  it  from  breaking  where  the  column  passes  eighty",
		"multiline": "a first line that is long enough to pass the eighty column limit of libyaml's emitter by itself\nand a second line",
		"trailing":  "a string ending in a space, long enough that its last space would fall past the eighty column limit of x ",
		"a key that is itself long enough to pass the eighty column limit but is never folded by the emitter": "short",
		"list": []any{
			"a list item that is a plain string with many words in it, and runs past eighty columns",
			"aVeryLongSingleWordWithoutAnySpaceInItThatCannotBeBrokenAnywhereByTheEmitterAtAllEvenPastEightyColumns",
			[]any{"a nested list item that is a plain string with many words in it, and runs past eighty columns"},
			map[string]any{"deep": map[string]any{"deeper": "a value nested three maps deep inside a list item, with words enough to fold over the width"}},
		},
	}},
	{"long", []any{
		"the first fairly long string in this list, long enough to wrap",
		map[string]any{"nested": "dictionary values that are long enough to wrap too", "n": int64(1)},
	}},
}

// outputterNames are the outputters with golden files; quiet has its own test.
var outputterNames = []string{"nested", "json", "yaml", "txt", "raw", "pprint", "newline_values_only"}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		for _, out := range outputterNames {
			t.Run(tc.name+"/"+out, func(t *testing.T) {
				var buf bytes.Buffer
				if err := Format(&buf, out, tc.data, Options{}); err != nil {
					t.Fatalf("Format: %v", err)
				}
				checkGolden(t, filepath.Join("testdata", tc.name+"."+out+".golden"), buf.Bytes())
			})
		}
	}
}

func TestGoldenOptions(t *testing.T) {
	tests := []struct {
		data   string
		golden string
		out    string
		opts   Options
	}{
		{"grains", "grains.nested-color", "nested", Options{Color: true}},
		{"grains", "grains.nested-indent2", "nested", Options{Indent: 2}},
		{"grains", "grains.json-indent2", "json", Options{IndentSet: true, Indent: 2}},
		{"grains", "grains.json-oneline", "json", Options{IndentSet: true, Indent: -1}},
		{"grains", "grains.yaml-indent4", "yaml", Options{IndentSet: true, Indent: 4}},
		{"grains", "grains.yaml-flow", "yaml", Options{IndentSet: true, Indent: -1}},
		{"grains", "grains.json-indent0", "json", Options{IndentSet: true, Indent: 0}},
		{"grains", "grains.yaml-indent0", "yaml", Options{IndentSet: true, Indent: 0}},
		{"grains", "grains.pprint-indent0", "pprint", Options{IndentSet: true, Indent: 0}},
		{"grains", "grains.pprint-indent4", "pprint", Options{IndentSet: true, Indent: 4}},
		{"grains", "grains.pprint-negative", "pprint", Options{IndentSet: true, Indent: -1}},
		// The list in long_strings.yaml-indent4 is laid out as go-yaml
		// does, not as PyYAML does (see renderYAML); its mapping is
		// PyYAML's.
		{"long_strings", "long_strings.yaml-indent4", "yaml", Options{IndentSet: true, Indent: 4}},
		{"long_strings", "long_strings.yaml-flow", "yaml", Options{IndentSet: true, Indent: -1}},
		{"long_strings", "long_strings.pprint-indent4", "pprint", Options{IndentSet: true, Indent: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Format(&buf, tt.out, caseData(t, tt.data), tt.opts); err != nil {
				t.Fatalf("Format: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", tt.golden+".golden"), buf.Bytes())
		})
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: output differs from golden (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

func TestQuiet(t *testing.T) {
	for _, tc := range goldenCases {
		var buf bytes.Buffer
		if err := Format(&buf, "quiet", tc.data, Options{Color: true}); err != nil {
			t.Fatalf("%s: Format: %v", tc.name, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: got %q, want no output", tc.name, buf.String())
		}
	}
}

// TestJSONReadsBack checks that json output parses to the data it came
// from, for data JSON can hold.
func TestJSONReadsBack(t *testing.T) {
	for _, name := range []string{"ping", "grains", "run_all", "list", "none", "unicode", "empty", "scalars_needing_quotes", "long", "long_strings"} {
		data := caseData(t, name)
		for _, indent := range []int{0, 2, -1} {
			var buf bytes.Buffer
			if err := Format(&buf, "json", data, Options{IndentSet: indent != 0, Indent: indent}); err != nil {
				t.Fatalf("%s: Format: %v", name, err)
			}
			var got any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%s indent %d: output is not JSON: %v\n%s", name, indent, err, buf.String())
			}
			if diff := cmp.Diff(viaStdJSON(t, data), got); diff != "" {
				t.Errorf("%s indent %d: read back differs (-want +got):\n%s", name, indent, diff)
			}
			if indent < 0 && strings.Count(buf.String(), "\n") != 1 {
				t.Errorf("%s: got %d lines with Indent -1, want 1", name, strings.Count(buf.String(), "\n"))
			}
		}
	}
}

// TestYAMLReadsBack checks that yaml output parses to the data it came
// from, in every indent style.
func TestYAMLReadsBack(t *testing.T) {
	for _, name := range []string{"ping", "grains", "run_all", "list", "unicode", "empty", "scalars_needing_quotes", "long", "long_strings"} {
		data := caseData(t, name)
		for _, indent := range []int{0, 4, -1} {
			var buf bytes.Buffer
			if err := Format(&buf, "yaml", data, Options{IndentSet: indent != 0, Indent: indent}); err != nil {
				t.Fatalf("%s: Format: %v", name, err)
			}
			var got any
			if err := yaml.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%s indent %d: output is not YAML: %v\n%s", name, indent, err, buf.String())
			}
			// The trailing newline of a string is lost by Format's
			// final trim only at the very end of the output.
			if diff := cmp.Diff(viaStdJSON(t, data), viaStdJSON(t, got)); diff != "" {
				t.Errorf("%s indent %d: read back differs (-want +got):\n%s\n%s", name, indent, diff, buf.String())
			}
		}
	}
}

func caseData(t *testing.T, name string) any {
	t.Helper()
	for _, tc := range goldenCases {
		if tc.name == name {
			return tc.data
		}
	}
	t.Fatalf("no case %q", name)
	return nil
}

// viaStdJSON round-trips v through encoding/json, giving a form that
// compares equal whatever the Go types were (ints and floats become
// float64, maps map[string]any).
func viaStdJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

func TestValidAndNames(t *testing.T) {
	wantNames := []string{"highstate", "json", "nested", "newline_values_only", "pprint", "quiet", "raw", "txt", "yaml"}
	if diff := cmp.Diff(wantNames, Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
	tests := []struct {
		name string
		want bool
	}{
		{"nested", true}, {"json", true}, {"yaml", true}, {"txt", true}, {"text", true},
		{"raw", true}, {"quiet", true}, {"highstate", true}, {"", false}, {"JSON", false},
	}
	for _, tt := range tests {
		if got := Valid(tt.name); got != tt.want {
			t.Errorf("Valid(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFormatErrors(t *testing.T) {
	var buf bytes.Buffer
	err := Format(&buf, "pony", map[string]any{"a": 1}, Options{})
	if err == nil || !strings.Contains(err.Error(), "unknown outputter") {
		t.Errorf("unknown outputter: got error %v, want one saying unknown outputter", err)
	}
	if buf.Len() != 0 {
		t.Errorf("unknown outputter: got output %q, want none", buf.String())
	}

	// A value that contains itself is refused rather than overflowing.
	cyclic := []any{nil}
	cyclic[0] = cyclic
	if err := Format(&buf, "json", cyclic, Options{}); err == nil {
		t.Error("cyclic value: got nil error, want one")
	}

	if err := Format(failWriter{}, "nested", "x", Options{}); err == nil {
		t.Error("failing writer: got nil error, want one")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestTextAlias(t *testing.T) {
	var a, b bytes.Buffer
	data := caseData(t, "run_all")
	if err := Format(&a, "text", data, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Format(&b, "txt", data, Options{}); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("text: got %q, want the txt output %q", a.String(), b.String())
	}
}

// TestReflectTypes checks that maps and slices of other Go types render
// like their CBOR-decoded equivalents.
func TestReflectTypes(t *testing.T) {
	type host string
	n := 3
	tests := []struct {
		name      string
		got, want any
	}{
		{"[]string", []string{"a", "b"}, []any{"a", "b"}},
		{"map[string]string", map[string]string{"b": "2", "a": "1"}, map[string]any{"a": "1", "b": "2"}},
		{"map[any]any", map[any]any{"x": int64(1)}, map[string]any{"x": int64(1)}},
		{"named types", map[host][]int{"cam": {1, 2}}, map[string]any{"cam": []any{int64(1), int64(2)}}},
		{"pointer", &n, int64(3)},
		{"nil pointer", (*int)(nil), nil},
		{"nil slice", []string(nil), []any{}},
		{"array", [2]float32{0.5, 1}, []any{0.5, 1.0}},
		{"uint8 is int", uint8(7), int64(7)},
		{"big.Int value", *big.NewInt(5), int64(5)},
	}
	for _, tt := range tests {
		for _, out := range outputterNames {
			var got, want bytes.Buffer
			if err := Format(&got, out, tt.got, Options{}); err != nil {
				t.Fatalf("%s %s: %v", tt.name, out, err)
			}
			if err := Format(&want, out, tt.want, Options{}); err != nil {
				t.Fatalf("%s %s: %v", tt.name, out, err)
			}
			if got.String() != want.String() {
				t.Errorf("%s %s: got %q, want %q", tt.name, out, got.String(), want.String())
			}
		}
	}
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	Progress(&buf, 0, 12)
	Progress(&buf, 5, 12)
	ClearProgress(&buf)
	want := "\r[0/12] returned\r[5/12] returned\r\x1b[K"
	if got := buf.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
