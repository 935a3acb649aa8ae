package pillar

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Cases from Salt's tests/unit/utils/test_dictupdate.py (test_update,
// test_merge_overwrite_*, test_merge_aggregate_traditional).
func TestMerge(t *testing.T) {
	d1 := func() map[string]any {
		return map[string]any{"A": "B", "C": map[string]any{"D": "E", "F": map[string]any{"G": "H", "I": "J"}}}
	}
	with := func(f func(m map[string]any)) map[string]any { m := d1(); f(m); return m }
	c := func(m map[string]any, k string) map[string]any { return m[k].(map[string]any) }
	for _, tc := range []struct {
		name       string
		a, b       map[string]any
		strategy   string
		mergeLists bool
		want       map[string]any
	}{
		{"level 1 change", d1(), map[string]any{"A": "Z"}, "smart", false, with(func(m map[string]any) { m["A"] = "Z" })},
		{"list replaced", with(func(m map[string]any) { m["A"] = []any{1, 2} }), map[string]any{"A": []any{2, 3}}, "recurse", false, with(func(m map[string]any) { m["A"] = []any{2, 3} })},
		{"list merged", with(func(m map[string]any) { m["A"] = []any{1, 2} }), map[string]any{"A": []any{3, 4}}, "recurse", true, with(func(m map[string]any) { m["A"] = []any{1, 2, 3, 4} })},
		{"list merged without duplicates in order", with(func(m map[string]any) { m["A"] = []any{1, 2} }), map[string]any{"A": []any{4, 3, 2, 1}}, "smart", true, with(func(m map[string]any) { m["A"] = []any{1, 2, 4, 3} })},
		{"level 2 change", d1(), map[string]any{"C": map[string]any{"D": "Z"}}, "smart", false, with(func(m map[string]any) { c(m, "C")["D"] = "Z" })},
		{"level 3 list merge", with(func(m map[string]any) { c(c(m, "C"), "F")["G"] = []any{"a", "b"} }), map[string]any{"C": map[string]any{"F": map[string]any{"G": []any{"d", "c", "b", "a"}}}}, "smart", true, with(func(m map[string]any) { c(c(m, "C"), "F")["G"] = []any{"a", "b", "d", "c"} })},
		{"replace a sub-dictionary", d1(), map[string]any{"C": "Z"}, "smart", false, with(func(m map[string]any) { m["C"] = "Z" })},
		{"add a nested dictionary", d1(), map[string]any{"Z": map[string]any{"Y": map[string]any{"X": "W"}}}, "smart", false, with(func(m map[string]any) { m["Z"] = map[string]any{"Y": map[string]any{"X": "W"}} })},
		{"overwrite traditional", d1(), map[string]any{"A": "b"}, "overwrite", false, with(func(m map[string]any) { m["A"] = "b" })},
		{"overwrite missing source key", d1(), map[string]any{"D": "new"}, "overwrite", false, with(func(m map[string]any) { m["D"] = "new" })},
		// merge_overwrite replaces a top-level key's whole value.
		{"overwrite replaces top-level mappings", d1(), map[string]any{"C": map[string]any{"D": "Z"}}, "overwrite", false, with(func(m map[string]any) { m["C"] = map[string]any{"D": "Z"} })},
		{"aggregate traditional", d1(), map[string]any{"A": "b"}, "aggregate", false, with(func(m map[string]any) { m["A"] = "b" })},
		{"none recurses, no list merge", with(func(m map[string]any) { m["A"] = []any{1} }), map[string]any{"A": []any{2}, "C": map[string]any{"D": "Z"}}, "none", true, with(func(m map[string]any) { m["A"] = []any{2}; c(m, "C")["D"] = "Z" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := cmp.Diff(tc.a, map[string]any{})
			got := Merge(tc.a, tc.b, tc.strategy, tc.mergeLists)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Merge (-want +got):\n%s", d)
			}
			if after := cmp.Diff(tc.a, map[string]any{}); after != before {
				t.Errorf("Merge changed its first argument")
			}
		})
	}
}
