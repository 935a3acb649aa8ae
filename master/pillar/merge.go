package pillar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// Merge strategies (pillar_source_merging_strategy), Salt's
// salt/utils/dictupdate.py merge.
const (
	StrategySmart     = "smart"     // recurse (aggregate only for the yamlex renderer, which Halite has not)
	StrategyRecurse   = "recurse"   // mappings merged key by key, b over a
	StrategyOverwrite = "overwrite" // b's top-level keys replace a's whole
	StrategyNone      = "none"      // recurse, and only one environment's top file is read
	StrategyAggregate = "aggregate" // yamlex's aggregate at level 1: without !aggregate tags, b's top-level keys replace a's
)

// Strategies are the values pillar_source_merging_strategy takes.
var Strategies = []string{StrategySmart, StrategyRecurse, StrategyOverwrite, StrategyNone, StrategyAggregate}

// Merge merges b over a as Salt's dictupdate.merge does with strategy,
// mergeLists being pillar_merge_lists. It changes neither a nor b: the
// result shares their unchanged values (read only).
func Merge(a, b map[string]any, strategy string, mergeLists bool) map[string]any {
	switch strategy {
	case StrategyOverwrite:
		// merge_overwrite: b's keys replace a's, then a recursive merge
		// (which then has nothing below the top level to merge).
		out := make(map[string]any, len(a)+len(b))
		for k, v := range a {
			out[k] = v
		}
		for k, v := range b {
			out[k] = v
		}
		return out
	case StrategyAggregate:
		out := make(map[string]any, len(a)+len(b))
		for k, v := range a {
			out[k] = v
		}
		for k, v := range b {
			out[k] = v
		}
		return out
	case StrategyNone:
		return update(a, b, false)
	}
	return update(a, b, mergeLists)
}

// update is dictupdate.update on a copy of dest: upd's keys over dest's,
// mappings merged recursively, lists joined without duplicates when
// mergeLists (dest's items first).
func update(dest, upd map[string]any, mergeLists bool) map[string]any {
	return updateDepth(dest, upd, mergeLists, 0)
}

func updateDepth(dest, upd map[string]any, mergeLists bool, depth int) map[string]any {
	out := make(map[string]any, len(dest)+len(upd))
	for k, v := range dest {
		out[k] = v
	}
	for k, v := range upd {
		d, had := out[k]
		if !had || depth >= maxDepth {
			out[k] = v
			continue
		}
		dm, ok1 := d.(map[string]any)
		vm, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = updateDepth(dm, vm, mergeLists, depth+1)
			continue
		}
		dl, ok1 := d.([]any)
		vl, ok2 := v.([]any)
		if ok1 && ok2 && mergeLists {
			merged := append(make([]any, 0, len(dl)+len(vl)), dl...)
			for _, x := range vl {
				if !containsValue(merged, x) {
					merged = append(merged, x)
				}
			}
			out[k] = merged
			continue
		}
		out[k] = v
	}
	return out
}

// maxDepth bounds the nesting Merge walks.
const maxDepth = 64

func containsValue(l []any, x any) bool {
	for _, y := range l {
		if equal(x, y) {
			return true
		}
	}
	return false
}

// equal is Python's == on decoded data (1 == 1.0).
func equal(a, b any) bool {
	if fa, ok := num(a); ok {
		if fb, ok := num(b); ok {
			return fa == fb
		}
	}
	return reflect.DeepEqual(a, b)
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case uint64:
		return int(x), true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	case string:
		var n int
		if _, err := fmt.Sscan(x, &n); err == nil {
			return n, true
		}
	}
	return 0, false
}

// normalize turns decoded data into pillar data: json.Numbers become
// int or float64 as Python's json.loads makes them.
func normalize(m map[string]any) map[string]any {
	out, _ := normalizeValue(m, 0).(map[string]any)
	return out
}

func normalizeValue(v any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeValue(e, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e, depth+1)
		}
		return out
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i)
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	}
	return v
}

// decodeJSON reads a JSON document as Python's json.loads does: 1 is an
// int, 1.0 a float.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("extra data after the JSON document")
	}
	return normalizeValue(v, 0), nil
}
