package render

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/halite-fleet/halite/render/sls"
)

// maxSlotBytes bounds the text that interpolated values add to one
// rendering (a value is counted each time it is put in).
const maxSlotBytes = 16 << 20

// slots are the values a template interpolated ({{ … }}). In the rendered
// text each stands as a token, letters, digits and underscores that YAML
// reads as part of a plain scalar wherever it is, so only the template's
// own text gives the document its structure. sls.ParseYAMLValues then puts
// the values back, through slots' sls.Values methods, into the scalars
// that hold their tokens:
//
//   - a plain scalar that is exactly one token becomes the value itself
//     when it is not a string (a number, a bool, a list, a mapping: data at
//     that one node), and a string is resolved as a YAML scalar alone (int,
//     float, bool, null or string; never a collection, alias or tag);
//   - anywhere else (quoted, block scalars, beside other text, keys) the
//     token is replaced by the value's text.
//
// The token prefix holds a random nonce drawn for each rendering, so data
// put in the text by a structural filter (|json of an event) cannot name a
// token.
type slots struct {
	prefix string
	vals   []slot
	bytes  int
}

type slot struct {
	v      any    // the value: string, or a non-string plain value
	text   string // how the template engine writes it
	str    bool   // v is a string
	nested bool   // text holds tokens of earlier slots (a macro's output)
	done   bool   // nested tokens of text were replaced
}

// newSlots returns empty slots with a fresh token prefix.
func newSlots() *slots {
	return &slots{prefix: "_hlt" + strconv.FormatUint(rand.Uint64()|1<<63, 36) + "x"}
}

// Add records one interpolated value, v (a string, or plain data: bool,
// numbers, nil, []any, map[string]any), whose text form is text, and
// returns the token that stands for it.
func (s *slots) Add(v any, text string) string {
	_, isStr := v.(string)
	s.vals = append(s.vals, slot{v: v, text: text, str: isStr, nested: strings.Contains(text, s.prefix)})
	return s.prefix + strconv.Itoa(len(s.vals)-1) + "_"
}

// token returns the index of the token at the start of t and its length,
// or -1.
func (s *slots) token(t string) (int, int) {
	if !strings.HasPrefix(t, s.prefix) {
		return -1, 0
	}
	j := len(s.prefix)
	k := j
	for k < len(t) && k-j < 9 && t[k] >= '0' && t[k] <= '9' {
		k++
	}
	if k == j || k >= len(t) || t[k] != '_' {
		return -1, 0
	}
	i, err := strconv.Atoi(t[j:k])
	if err != nil || i >= len(s.vals) {
		return -1, 0
	}
	return i, k + 1
}

// textOf is slot i's text with the tokens it holds replaced. A slot only
// holds tokens of slots made before it, so this ends.
func (s *slots) textOf(i int) (string, error) {
	sl := &s.vals[i]
	if sl.nested && !sl.done {
		t, err := s.replace(sl.text, i)
		if err != nil {
			return "", err
		}
		sl.text, sl.done = t, true
	}
	return sl.text, nil
}

// Text replaces every token in t by its value's text.
func (s *slots) Text(t string) (string, error) {
	return s.replace(t, len(s.vals))
}

func (s *slots) replace(t string, below int) (string, error) {
	first := strings.Index(t, s.prefix)
	if first < 0 {
		return t, nil
	}
	var b strings.Builder
	b.Grow(len(t))
	for first >= 0 {
		b.WriteString(t[:first])
		t = t[first:]
		i, n := s.token(t)
		if i < 0 || i >= below {
			b.WriteString(s.prefix)
			t = t[len(s.prefix):]
		} else {
			v, err := s.textOf(i)
			if err != nil {
				return "", err
			}
			if s.bytes += len(v); s.bytes > maxSlotBytes {
				return "", fmt.Errorf("interpolated values add more than %d bytes", maxSlotBytes)
			}
			b.WriteString(v)
			t = t[n:]
		}
		first = strings.Index(t, s.prefix)
	}
	b.WriteString(t)
	return b.String(), nil
}

// In reports whether t holds a token.
func (s *slots) In(t string) bool {
	return strings.Contains(t, s.prefix)
}

// Plain is the value of a plain scalar t that holds tokens: the value
// itself if t is exactly one token of a non-string, a string's text read
// as a YAML scalar alone if t is one token of a string, else t with its
// tokens replaced by text.
func (s *slots) Plain(t string) (any, error) {
	if i, l := s.token(t); i >= 0 && l == len(t) {
		sl := &s.vals[i]
		if !sl.str {
			return sl.v, nil
		}
		text, err := s.textOf(i)
		if err != nil {
			return nil, err
		}
		return sls.ResolveScalar(text)
	}
	return s.Text(t)
}

// plainData turns data into the values a rendering decodes to:
// map[string]any, []any, string, bool, int, float64 or nil. It returns
// false for data nested deeper than maxDepth.
func plainData(v any, depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	switch v := v.(type) {
	case nil, string, bool, int, float64:
		return v, true
	case int8, int16, int32, int64, uint8, uint16, uint32:
		i, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
		return int(i), true
	case uint, uint64:
		u, _ := strconv.ParseUint(fmt.Sprint(v), 10, 64)
		if u > math.MaxInt64 {
			return float64(u), true
		}
		return int(u), true
	case float32:
		return float64(v), true
	case []byte:
		return string(v), true
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			p, ok := plainData(x, depth+1)
			if !ok {
				return nil, false
			}
			out[i] = p
		}
		return out, true
	case []string:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = x
		}
		return out, true
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			p, ok := plainData(x, depth+1)
			if !ok {
				return nil, false
			}
			out[k] = p
		}
		return out, true
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			p, ok := plainData(x, depth+1)
			if !ok {
				return nil, false
			}
			out[fmt.Sprint(k)] = p
		}
		return out, true
	}
	return fmt.Sprint(v), true
}
