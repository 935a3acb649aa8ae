package saltdata

import (
	"strconv"
	"strings"
)

// DefaultDelimiter separates nested keys, as in Salt's "ip_interfaces:eth0"
// (DEFAULT_TARGET_DELIM).
const DefaultDelimiter = ":"

// Key is one part of a nested key, with its reading as an integer worked out
// once, so that a path compiled ahead (targets) is walked without parsing.
type Key struct {
	S     string
	Int   int  // S as an integer, when IsInt
	IsInt bool // S reads as a decimal integer (Python's int(), YAML's int)
}

// ParseKey returns s as a Key.
func ParseKey(s string) Key {
	k := Key{S: s}
	if n, err := strconv.Atoi(s); err == nil {
		k.Int, k.IsInt = n, true
	}
	return k
}

// ParseKeys splits path on delim (DefaultDelimiter when "") into Keys.
func ParseKeys(path, delim string) []Key {
	if delim == "" {
		delim = DefaultDelimiter
	}
	parts := strings.Split(path, delim)
	ks := make([]Key, len(parts))
	for i, p := range parts {
		ks[i] = ParseKey(p)
	}
	return ks
}

// Traverse is Salt's traverse_dict_and_list (salt/utils/data.py): it follows
// path, split on delim (DefaultDelimiter when ""), down data, and reports
// whether every part was found. See Step for one part.
func Traverse(data any, path, delim string) (any, bool) {
	if delim == "" {
		delim = DefaultDelimiter
	}
	ptr := data
	for {
		part, rest, more := strings.Cut(path, delim)
		next, ok := Step(ptr, ParseKey(part))
		if !ok {
			return nil, false
		}
		ptr = next
		if !more {
			return ptr, true
		}
		path = rest
	}
}

// Step descends one level as traverse_dict_and_list does:
//
//   - a map is indexed by the key; failing that, by the key's integer form
//     when it has one (Salt yamlify_args the key and retries, "catches
//     integer/float dict keys");
//   - a list is indexed, for an integer key, first through the maps it holds
//     that have that integer as a key, then by position (negative counts from
//     the end); for any other key, through the first map it holds that has
//     the key;
//   - anything else (a string, a number) has no parts.
//
// Maps are map[string]any, map[any]any and map[string]string (a Python dict
// is a dict); lists are []any and []string.
func Step(ptr any, k Key) (any, bool) {
	switch p := ptr.(type) {
	case []any:
		if !k.IsInt {
			for _, e := range p {
				if v, ok := Get(e, k); ok {
					return v, true
				}
			}
			return nil, false
		}
		for _, e := range p {
			if m, ok := e.(map[any]any); ok {
				if v, ok := intKey(m, k.Int); ok {
					return v, true
				}
			}
		}
		return index(p, k.Int)
	case []string:
		if !k.IsInt {
			return nil, false
		}
		v, ok := index(p, k.Int)
		return v, ok
	}
	return Get(ptr, k)
}

// Get looks k up in a map as a Python dict lookup with Salt's integer
// retry: the key itself, then, for a map[any]any, its integer form. It
// reports false for anything that is not a map.
func Get(m any, k Key) (any, bool) {
	switch x := m.(type) {
	case map[string]any:
		v, ok := x[k.S]
		return v, ok
	case map[string]string:
		v, ok := x[k.S]
		return v, ok
	case map[any]any:
		if v, ok := x[k.S]; ok {
			return v, true
		}
		if k.IsInt {
			return intKey(x, k.Int)
		}
	}
	return nil, false
}

// intKey finds the integer key n in m under the types decoders give it: int
// (YAML), int64 and uint64 (CBOR).
func intKey(m map[any]any, n int) (any, bool) {
	if v, ok := m[n]; ok {
		return v, true
	}
	if v, ok := m[int64(n)]; ok {
		return v, true
	}
	if n >= 0 {
		if v, ok := m[uint64(n)]; ok {
			return v, true
		}
	}
	return nil, false
}

func index[T any](list []T, n int) (any, bool) {
	if n < 0 {
		n += len(list)
	}
	if n < 0 || n >= len(list) {
		return nil, false
	}
	return list[n], true
}

// IsMap reports whether v is one of the map types Step descends into.
func IsMap(v any) bool {
	switch v.(type) {
	case map[string]any, map[any]any, map[string]string:
		return true
	}
	return false
}
