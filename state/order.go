package state

import (
	"cmp"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
)

// Order sorts low chunks as Salt's State.order_chunks does, in place, and
// returns them. Each chunk's "order" becomes a number: an int order stays
// (cap is 100 past the largest, at least 1), none gets cap, "first" 0,
// "last" cap+1000000, any other non-number cap, a negative one
// cap+1000000+order (so -1 runs just before "last"); "name_order" (names
// expansion) is added as name_order/10000 and removed. Ties keep their
// order after sorting by state+name+fun as text (a stable sort, like
// Python's). Run it once: a second run sees the numbers the first one set.
func Order(chunks []Chunk) []Chunk { return order(chunks, nil) }

// order is Order, copying the chunks marked shared before it changes one
// (the copy takes its place in chunks).
func order(chunks []Chunk, shared []bool) []Chunk {
	own := func(i int) Chunk {
		if shared != nil && shared[i] {
			chunks[i] = maps.Clone(chunks[i])
			shared[i] = false
		}
		return chunks[i]
	}
	capv := 1
	for _, c := range chunks {
		o, ok := intOrder(c["order"])
		if !ok {
			continue
		}
		if o > capv-1 && o > 0 {
			capv = o + 100
		}
	}
	keys := make([]float64, len(chunks))
	for i, c := range chunks {
		v, has := c["order"]
		if !has {
			own(i)["order"] = capv
			keys[i] = float64(capv)
			continue
		}
		o, isNum := number(v)
		if !isNum {
			switch v {
			case "last":
				o = float64(capv + 1000000)
			case "first":
				o = 0
			default:
				o = float64(capv)
			}
		}
		if no, ok := c["name_order"]; ok {
			n, _ := number(no)
			o += n / 10000.0
			delete(own(i), "name_order")
		}
		if o < 0 {
			o = float64(capv+1000000) + o
		}
		keys[i] = o
		if o == math.Trunc(o) && math.Abs(o) < 1<<53 {
			// Set only when it changes: a map of 8 keys grows to set
			// one it has.
			if iv := int(o); v != iv {
				own(i)["order"] = iv
			}
		} else {
			own(i)["order"] = o
		}
	}
	type sortKey struct {
		order float64
		text  [3]string // state, name, fun: compared as one text
		c     Chunk
	}
	sorted := make([]sortKey, len(chunks))
	for i, c := range chunks {
		sorted[i] = sortKey{keys[i], [3]string{pyStr(c["state"]), pyStr(c["name"]), pyStr(c["fun"])}, c}
	}
	slices.SortStableFunc(sorted, func(a, b sortKey) int {
		if a.order != b.order {
			return cmp.Compare(a.order, b.order)
		}
		return compareJoined(a.text, b.text)
	})
	for i, k := range sorted {
		chunks[i] = k.c
	}
	return chunks
}

// compareJoined compares a[0]+a[1]+a[2] with b[0]+b[1]+b[2] as strings
// are compared, without joining them.
func compareJoined(a, b [3]string) int {
	i, j := 0, 0 // the part of a, of b
	x, y := a[0], b[0]
	for {
		for x == "" && i < 2 {
			i++
			x = a[i]
		}
		for y == "" && j < 2 {
			j++
			y = b[j]
		}
		if x == "" || y == "" {
			return cmp.Compare(len(x), len(y))
		}
		n := min(len(x), len(y))
		if c := strings.Compare(x[:n], y[:n]); c != 0 {
			return c
		}
		x, y = x[n:], y[n:]
	}
}

// intOrder is an order Python's isinstance(order, int) accepts (bools too).
func intOrder(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case uint64:
		if x > math.MaxInt32 {
			return math.MaxInt32, true
		}
		return int(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func number(v any) (float64, bool) {
	if i, ok := intOrder(v); ok {
		return float64(i), true
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) {
			return 0, false
		}
		return x, true
	case float32:
		return float64(x), true
	}
	return 0, false
}

// Single is the chunk Salt's state.single makes of "mod.fun", a name and
// its keyword arguments (salt/modules/state.py single): kwargs with
// "state", "fun", "__id__" and "name" set, no order and no SLS. fun
// without a dot is Salt's "Invalid function passed".
func Single(fun, name string, kwargs map[string]any) (Chunk, error) {
	mod, f, ok := strings.Cut(fun, ".")
	if !ok {
		return nil, errors.New("Invalid function passed")
	}
	if i := strings.IndexByte(f, '.'); i >= 0 {
		f = f[:i]
	}
	c := Chunk{}
	for k, v := range kwargs {
		c[k] = v
	}
	c["state"], c["fun"], c["__id__"], c["name"] = mod, f, name, name
	return c, nil
}
