package state

import (
	"errors"
	"math"
	"sort"
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
func Order(chunks []Chunk) []Chunk {
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
			c["order"] = capv
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
			delete(c, "name_order")
		}
		if o < 0 {
			o = float64(capv+1000000) + o
		}
		keys[i] = o
		if o == math.Trunc(o) && math.Abs(o) < 1<<53 {
			c["order"] = int(o)
		} else {
			c["order"] = o
		}
	}
	idx := make([]int, len(chunks))
	text := make([]string, len(chunks))
	for i, c := range chunks {
		idx[i] = i
		text[i] = pyStr(c["state"]) + pyStr(c["name"]) + pyStr(c["fun"])
	}
	sort.SliceStable(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if keys[i] != keys[j] {
			return keys[i] < keys[j]
		}
		return text[i] < text[j]
	})
	out := make([]Chunk, len(chunks))
	for k, i := range idx {
		out[k] = chunks[i]
	}
	copy(chunks, out)
	return chunks
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
