package output

import (
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// maxDepth bounds how deeply nested a value may be. CBOR decoding has its
// own, lower limit; this one only keeps a cyclic Go value from exhausting the
// stack.
const maxDepth = 1000

var errTooDeep = errors.New("value nested too deeply")

// The renderers work on a normalised tree whose nodes are only: nil, bool,
// int64, uint64 (above MaxInt64 only), *big.Int, float64, string, []byte,
// list and *dict. normalize turns whatever the caller passed into that tree.

// list is a normalised sequence.
type list []any

// dict is a normalised mapping: its keys are sorted, unless it came from an
// Ordered, whose order it keeps (ordered is then true).
type dict struct {
	keys    []any
	vals    []any
	ordered bool
}

// SeqLen and SeqAt make a list a saltdata.Seq, DictLen and DictAt a dict a
// saltdata.Dict, for saltdata.Repr.
func (l list) SeqLen() int              { return len(l) }
func (l list) SeqAt(i int) any          { return l[i] }
func (d *dict) DictLen() int            { return len(d.keys) }
func (d *dict) DictAt(i int) (k, v any) { return d.keys[i], d.vals[i] }

// sorted returns d with its keys sorted, for the outputters that sort as
// Salt's do (nested, yaml, pprint).
func (d *dict) sorted() *dict {
	if !d.ordered {
		return d
	}
	idx := make([]int, len(d.keys))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return compareKeys(d.keys[idx[i]], d.keys[idx[j]]) < 0 })
	s := &dict{keys: make([]any, len(idx)), vals: make([]any, len(idx))}
	for i, j := range idx {
		s.keys[i], s.vals[i] = d.keys[j], d.vals[j]
	}
	return s
}

// Ordered is a mapping whose keys keep the order a Salt function gives
// them: Keys in that order, then any other keys of Values sorted. The
// json, txt, raw and newline_values_only outputters print it in that
// order, as Salt prints a Python dict; nested, yaml and pprint sort keys
// as Salt's do. Plain Go maps, which have no order, print sorted
// everywhere.
type Ordered struct {
	Keys   []string
	Values map[string]any
}

func normalize(v any) (any, error) {
	return normalizeDepth(v, 0)
}

func normalizeDepth(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	// Fast paths for what CBOR decoding produces.
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return x, nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
		return x, nil
	case int:
		return int64(x), nil
	case []byte:
		return x, nil
	case big.Int:
		return normBig(&x), nil
	case *big.Int:
		if x == nil {
			return nil, nil
		}
		return normBig(x), nil
	case time.Time:
		// Salt's msgpack carries no datetimes; show what str() of a
		// datetime would, close enough: ISO 8601.
		return x.Format(time.RFC3339Nano), nil
	case []any:
		out := make(list, len(x))
		for i, e := range x {
			n, err := normalizeDepth(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case Ordered:
		return normalizeOrdered(x, depth)
	case *Ordered:
		if x == nil {
			return nil, nil
		}
		return normalizeOrdered(*x, depth)
	case map[string]any:
		d := &dict{keys: make([]any, 0, len(x)), vals: make([]any, 0, len(x))}
		for _, k := range sortedStringKeys(x) {
			n, err := normalizeDepth(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.keys = append(d.keys, k)
			d.vals = append(d.vals, n)
		}
		return d, nil
	}
	return normalizeReflect(reflect.ValueOf(v), depth)
}

func normalizeOrdered(o Ordered, depth int) (any, error) {
	d := &dict{ordered: true}
	seen := make(map[string]bool, len(o.Keys))
	add := func(k string) error {
		if seen[k] {
			return nil
		}
		v, ok := o.Values[k]
		if !ok {
			return nil
		}
		seen[k] = true
		n, err := normalizeDepth(v, depth+1)
		if err != nil {
			return err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, n)
		return nil
	}
	for _, k := range o.Keys {
		if err := add(k); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedStringKeys(o.Values) {
		if err := add(k); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func sortedStringKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func normBig(x *big.Int) any {
	if x.IsInt64() {
		return x.Int64()
	}
	if x.IsUint64() {
		return x.Uint64()
	}
	return new(big.Int).Set(x)
}

func normalizeReflect(rv reflect.Value, depth int) (any, error) {
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, nil
		}
		// Types with their own text form are shown by it, not taken apart.
		if s, ok := textOf(rv); ok {
			return s, nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil, nil
	}
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u <= math.MaxInt64 {
			return int64(u), nil
		}
		return u, nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return list{}, nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return b, nil
		}
		out := make(list, rv.Len())
		for i := range out {
			n, err := normalizeDepth(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		d := &dict{keys: make([]any, 0, rv.Len()), vals: make([]any, 0, rv.Len())}
		type kv struct{ k, v any }
		pairs := make([]kv, 0, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			k, err := normalizeDepth(it.Key().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			v, err := normalizeDepth(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			pairs = append(pairs, kv{k, v})
		}
		// sort.Slice, not slices.SortFunc: a generic sort over kv would add
		// its own copy of the sort code to the agent, which carries this
		// package for its caller (about 12 KiB on armv7).
		sort.Slice(pairs, func(i, j int) bool { return compareKeys(pairs[i].k, pairs[j].k) < 0 })
		for _, p := range pairs {
			d.keys = append(d.keys, p.k)
			d.vals = append(d.vals, p.v)
		}
		return d, nil
	}
	if rv.CanInterface() {
		if s, ok := textOf(rv); ok {
			return s, nil
		}
		return fmt.Sprint(rv.Interface()), nil
	}
	return rv.String(), nil
}

// textOf returns the text form of a value that has one of its own.
func textOf(rv reflect.Value) (string, bool) {
	if !rv.CanInterface() {
		return "", false
	}
	switch x := rv.Interface().(type) {
	case error:
		return x.Error(), true
	case encoding.TextMarshaler:
		b, err := x.MarshalText()
		if err != nil {
			return "", false
		}
		return string(b), true
	case fmt.Stringer:
		return x.String(), true
	}
	return "", false
}

// keyRank orders keys of different kinds, which Python would refuse to sort:
// None, then booleans, numbers, strings, bytes and anything else.
func keyRank(k any) int {
	switch k.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int64, uint64, *big.Int, float64:
		return 2
	case string:
		return 3
	case []byte:
		return 4
	}
	return 5
}

// compareKeys orders normalised map keys as Python's sorted() would for keys
// of one kind: numbers by value, strings by code point (which byte order
// of UTF-8 preserves).
func compareKeys(a, b any) int {
	if c := cmp.Compare(keyRank(a), keyRank(b)); c != 0 {
		return c
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case string:
		return cmp.Compare(x, b.(string))
	case []byte:
		return cmp.Compare(string(x), string(b.([]byte)))
	case int64, uint64, *big.Int, float64:
		return compareNumbers(a, b)
	}
	return cmp.Compare(saltdata.Repr(a), saltdata.Repr(b))
}

func compareNumbers(a, b any) int {
	fa, fb := toBigFloat(a), toBigFloat(b)
	if fa == nil || fb == nil { // NaN sorts first, as no order is right
		switch {
		case fa == nil && fb == nil:
			return 0
		case fa == nil:
			return -1
		}
		return 1
	}
	return fa.Cmp(fb)
}

func toBigFloat(n any) *big.Float {
	switch x := n.(type) {
	case int64:
		return new(big.Float).SetInt64(x)
	case uint64:
		return new(big.Float).SetUint64(x)
	case *big.Int:
		return new(big.Float).SetInt(x)
	case float64:
		if math.IsNaN(x) {
			return nil
		}
		return big.NewFloat(x)
	}
	return nil
}
