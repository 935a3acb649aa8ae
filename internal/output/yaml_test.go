package output

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestYAMLMatchesGoYAML: --out yaml writes, at every indent and in flow
// style, what go-yaml's encoder wrote for the same nodes (yamlString's
// quoting question, once put to yaml.Marshal, is internal/yamlemit's
// differential test).
func TestYAMLMatchesGoYAML(t *testing.T) {
	var data []any
	for _, tc := range goldenCases {
		data = append(data, tc.data)
	}
	data = append(data, map[string]any{
		"strings": []any{"", "yes", "y", "null", "1.0", "a: b", "- a", "'q'", "a\nb", "a\n", "\na", " a", "a\tb",
			"\x00", "\u0085", "\u2028", "\ufeffx", "😀", "é", "#x", "a #b", strings.Repeat("k", 130)},
		"bytes":                         []byte(strings.Repeat("\x00\xff", 80)),
		"nested":                        map[string]any{"l": []any{[]any{1, 2}, map[string]any{"a": []any{}}, map[string]any{}}},
		strings.Repeat("long key ", 20): 1,
	})
	for _, d := range data {
		v, err := normalize(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []Options{{}, {IndentSet: true, Indent: -1}, {IndentSet: true, Indent: 1},
			{IndentSet: true, Indent: 2}, {IndentSet: true, Indent: 3}, {IndentSet: true, Indent: 4},
			{IndentSet: true, Indent: 7}, {IndentSet: true, Indent: 9}, {IndentSet: true, Indent: 10}} {
			got, err := renderYAML(v, o)
			if err != nil {
				t.Fatal(err)
			}
			root, indent := yamlRoot(v, o)
			var buf bytes.Buffer
			enc := yaml.NewEncoder(&buf)
			enc.SetIndent(indent)
			enc.CompactSeqIndent()
			if err := enc.Encode(root); err != nil {
				t.Fatal(err)
			}
			enc.Close()
			if got != buf.String() {
				t.Errorf("renderYAML(%#v, %+v) =\n%s\ngo-yaml's encoder wrote:\n%s", d, o, got, buf.String())
			}
		}
	}
}
