package yamlemit

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// maxDepth bounds nesting, so that a cyclic map or slice is an error, not
// a stack overflow (go-yaml has no bound).
const maxDepth = 10000

var errDepth = errors.New("yaml: value nested deeper than 10000 levels")

// valueEvent is go-yaml's encoder.marshal for the kinds of Go value
// Halite writes: nil, bools, numbers, strings, time.Time and
// time.Duration, encoding.TextMarshaler, pointers, interfaces, slices,
// arrays, maps (keys sorted as go-yaml sorts them) and *yaml.Node. Structs,
// funcs, channels and complex numbers are an error (go-yaml writes
// structs by their fields and panics on the rest).
func valueEvent(in reflect.Value, depth int) (*event, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	if !in.IsValid() || in.Kind() == reflect.Pointer && in.IsNil() {
		return nullEvent(), nil
	}
	switch v := in.Interface().(type) {
	case nil:
		return nullEvent(), nil
	case *yaml.Node:
		return nodeEvent(v, depth)
	case yaml.Node:
		return nodeEvent(&v, depth)
	case time.Time:
		return &event{kind: yaml.ScalarNode, value: v.Format(time.RFC3339Nano)}, nil
	case *time.Time:
		return &event{kind: yaml.ScalarNode, value: v.Format(time.RFC3339Nano)}, nil
	case time.Duration:
		return stringEvent(v.String()), nil
	case encoding.TextMarshaler:
		text, err := v.MarshalText()
		if err != nil {
			return nil, err
		}
		return stringEvent(string(text)), nil
	}
	switch in.Kind() {
	case reflect.Interface, reflect.Pointer:
		return valueEvent(in.Elem(), depth)
	case reflect.Map:
		keys := keyList(in.MapKeys())
		sort.Sort(keys)
		ev := &event{kind: yaml.MappingNode, content: make([]*event, 0, 2*len(keys))}
		for _, k := range keys {
			ke, err := valueEvent(k, depth+1)
			if err != nil {
				return nil, err
			}
			ve, err := valueEvent(in.MapIndex(k), depth+1)
			if err != nil {
				return nil, err
			}
			ev.content = append(ev.content, ke, ve)
		}
		return ev, nil
	case reflect.Slice, reflect.Array:
		ev := &event{kind: yaml.SequenceNode, content: make([]*event, 0, in.Len())}
		for i := range in.Len() {
			ie, err := valueEvent(in.Index(i), depth+1)
			if err != nil {
				return nil, err
			}
			ev.content = append(ev.content, ie)
		}
		return ev, nil
	case reflect.String:
		return stringEvent(in.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &event{kind: yaml.ScalarNode, value: strconv.FormatInt(in.Int(), 10)}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &event{kind: yaml.ScalarNode, value: strconv.FormatUint(in.Uint(), 10)}, nil
	case reflect.Float32, reflect.Float64:
		bits := 64
		if in.Kind() == reflect.Float32 {
			bits = 32
		}
		s := strconv.FormatFloat(in.Float(), 'g', -1, bits)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return &event{kind: yaml.ScalarNode, value: s}, nil
	case reflect.Bool:
		return &event{kind: yaml.ScalarNode, value: strconv.FormatBool(in.Bool())}, nil
	}
	return nil, fmt.Errorf("yaml: cannot encode a value of type %s", in.Type())
}

// stringEvent is go-yaml's encoder.stringv: invalid UTF-8 becomes
// !!binary; a string that would read back as something else, or as a YAML
// 1.1 bool or sexagesimal number, is double-quoted; one with a line break
// is a literal block.
func stringEvent(s string) *event {
	ev := &event{kind: yaml.ScalarNode}
	canUsePlain := true
	if !utf8.ValidString(s) {
		ev.tag = binaryTag
		s = encodeBase64(s)
	} else {
		canUsePlain = resolve(s) == strTag && !isBase60Float(s) && !isOldBool(s)
	}
	ev.value = s
	switch {
	case strings.Contains(s, "\n"):
		ev.style = literalStyle
	case !canUsePlain:
		ev.style = doubleStyle
	}
	return ev
}

// keyList sorts with sort.Sort, as go-yaml does, so that keys its order
// calls equal come out in the same order too.
type keyList []reflect.Value

func (l keyList) Len() int           { return len(l) }
func (l keyList) Swap(i, j int)      { l[i], l[j] = l[j], l[i] }
func (l keyList) Less(i, j int) bool { return keyLess(l[i], l[j]) }

// keyLess is go-yaml's keyList.Less (sorter.go): numbers and bools by
// value before anything else, then by kind; strings in "natural" order,
// runs of digits compared as numbers.
func keyLess(a, b reflect.Value) bool {
	ak, bk := a.Kind(), b.Kind()
	for (ak == reflect.Interface || ak == reflect.Pointer) && !a.IsNil() {
		a = a.Elem()
		ak = a.Kind()
	}
	for (bk == reflect.Interface || bk == reflect.Pointer) && !b.IsNil() {
		b = b.Elem()
		bk = b.Kind()
	}
	af, aok := keyFloat(a)
	bf, bok := keyFloat(b)
	if aok && bok {
		if af != bf {
			return af < bf
		}
		if ak != bk {
			return ak < bk
		}
		return numLess(a, b)
	}
	if ak != reflect.String || bk != reflect.String {
		return ak < bk
	}
	ar, br := []rune(a.String()), []rune(b.String())
	digits := false
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			digits = unicode.IsDigit(ar[i])
			continue
		}
		al := unicode.IsLetter(ar[i])
		bl := unicode.IsLetter(br[i])
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			if digits {
				return al
			}
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an = 1
					bn = 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}

func keyFloat(v reflect.Value) (float64, bool) {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int()), true
	case reflect.Float32, reflect.Float64:
		return v.Float(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(v.Uint()), true
	case reflect.Bool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func numLess(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() < b.Int()
	case reflect.Float32, reflect.Float64:
		return a.Float() < b.Float()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() < b.Uint()
	case reflect.Bool:
		return !a.Bool() && b.Bool()
	}
	return false
}
