package state

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// omap is a Python dict as Salt's state compiler uses it: keys keep the
// order they were first set in; a key deleted and set again goes last.
type omap struct {
	keys []string
	m    map[string]any
	// facts are set on an ID's body that a Memo keeps (which nothing
	// changes: a clone has none).
	facts *bodyFacts
}

func newOmap() *omap { return &omap{m: map[string]any{}} }

func (o *omap) get(k string) (any, bool) {
	v, ok := o.m[k]
	return v, ok
}

func (o *omap) has(k string) bool { _, ok := o.m[k]; return ok }

func (o *omap) set(k string, v any) {
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

func (o *omap) del(k string) (any, bool) {
	v, ok := o.m[k]
	if !ok {
		return nil, false
	}
	delete(o.m, k)
	for i, kk := range o.keys {
		if kk == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
	return v, true
}

// clone is a shallow copy of o: its keys and values, in a map of its own.
func (o *omap) clone() *omap {
	return &omap{keys: slices.Clip(o.keys), m: maps.Clone(o.m)}
}

// list is the keys, copied, so the map can change while one ranges.
func (o *omap) list() []string { return append([]string(nil), o.keys...) }

// fromMap makes an omap of m with its keys in order (keys not in order
// come after, sorted). The values are m's, shared: the compiler copies a
// list or map before it changes one (the Loader's entries may be cached).
func fromMap(m map[string]any, order []string) *omap {
	o := &omap{keys: make([]string, 0, len(m)), m: make(map[string]any, len(m))}
	for _, k := range order {
		if v, ok := m[k]; ok && !o.has(k) {
			o.set(k, v)
		}
	}
	if len(o.keys) == len(m) {
		return o
	}
	for _, k := range sortedKeys(m) {
		if !o.has(k) {
			o.set(k, m[k])
		}
	}
	return o
}

// appendCopy is append(l, v...) into a new array: l may be shared.
func appendCopy(l []any, v ...any) []any {
	out := make([]any, 0, len(l)+len(v))
	return append(append(out, l...), v...)
}

// plain is o as map[string]any (nested omaps too), for the wire.
func (o *omap) plain() map[string]any {
	out := make(map[string]any, len(o.keys))
	for _, k := range o.keys {
		out[k] = plainValue(o.m[k])
	}
	return out
}

func plainValue(v any) any {
	switch x := v.(type) {
	case *omap:
		return x.plain()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plainValue(e)
		}
		return out
	}
	return v
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case *omap:
		o := newOmap()
		for _, k := range x.keys {
			o.set(k, deepCopy(x.m[k]))
		}
		return o
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// first is Python's next(iter(d)): the first key of a one-key argument
// (the smallest, when a hostile map has several).
func first(m map[string]any) string {
	if len(m) == 1 {
		for k := range m {
			return k
		}
	}
	ks := sortedKeys(m)
	if len(ks) == 0 {
		return ""
	}
	return ks[0]
}

// pyStr is Python's str(v), for messages that format a value.
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

// pyRepr is Python's repr(v).
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return "'" + strings.ReplaceAll(x, "'", `\'`) + "'"
	case int:
		return strconv.Itoa(x)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return map[bool]string{true: "inf", false: "nan"}[math.IsInf(x, 0)]
		}
		if x == math.Trunc(x) && math.Abs(x) < 1e16 {
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		parts := make([]string, 0, len(x))
		for _, k := range sortedKeys(x) {
			parts = append(parts, pyRepr(k)+": "+pyRepr(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *omap:
		parts := make([]string, 0, len(x.keys))
		for _, k := range x.keys {
			parts = append(parts, pyRepr(k)+": "+pyRepr(x.m[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// pyTypeName is type(v).__name__.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string:
		return "str"
	case int:
		return "int"
	case float64:
		return "float"
	case []any:
		return "list"
	case map[string]any, *omap:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// equal is Python's ==, for the plain values SLS data holds.
func equal(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case *omap:
		y, ok := b.(*omap)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for _, k := range x.keys {
			w, ok := y.m[k]
			if !ok || !equal(x.m[k], w) {
				return false
			}
		}
		return true
	case int:
		switch y := b.(type) {
		case int:
			return x == y
		case float64:
			return float64(x) == y
		}
		return false
	case float64:
		switch y := b.(type) {
		case int:
			return x == float64(y)
		case float64:
			return x == y
		}
		return false
	}
	switch b.(type) {
	case []any, map[string]any, *omap:
		return false
	}
	return a == b
}

// hashable reports whether Python could use v as a dict key.
func hashable(v any) bool {
	switch v.(type) {
	case []any, map[string]any, *omap:
		return false
	}
	return true
}
