package config

import (
	"fmt"
	"sort"
	"strings"
)

// Status says what Halite does with an option.
type Status uint8

const (
	// Implemented options are read into their typed field and used; a
	// value of the wrong type is an *Error naming file and line.
	Implemented Status = iota
	// Ignored options are Salt's, accepted so that a Salt file loads, but
	// Halite does not use them: each is reported as a Warning naming file
	// and line. Those with a setter are still checked for their type.
	Ignored
	// Refused options are Salt's with a meaning Halite cannot honour: a
	// value other than Salt's default is an *Error; the default loads with
	// a warning like an Ignored option.
	Refused
	// Elsewhere options are implemented on another branch of Halite (the
	// doc names it); until it is merged they load like Ignored ones.
	Elsewhere
)

func (s Status) String() string {
	switch s {
	case Implemented:
		return "implemented"
	case Ignored:
		return "ignored (warning)"
	case Refused:
		return "refused unless default"
	case Elsewhere:
		return "implemented elsewhere"
	}
	return "unknown"
}

// option is one line of a daemon's option table.
type option[T any] struct {
	name   string
	kind   string // the type as the documentation names it
	status Status
	set    func(*T, value) error // nil: not read (an Ignored option)
	get    func(*T) any          // the field, for the documented default
	def    string                // the documented default, when get does not tell it
	doc    string
}

// with returns o with the documented default def.
func (o option[T]) with(def string) option[T] { o.def = def; return o }

// as returns o with status s.
func (o option[T]) as(s Status) option[T] { o.status = s; return o }

// The constructors below make one implemented option from its name, its
// field and its meaning; the field's value in the daemon's defaults is the
// documented default.

func optStr[T any](name string, f func(*T) *string, doc string) option[T] {
	return option[T]{name: name, kind: "string", set: func(t *T, v value) error { return v.str(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optBool[T any](name string, f func(*T) *bool, doc string) option[T] {
	return option[T]{name: name, kind: "boolean", set: func(t *T, v value) error { return v.bool(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

// optCount is a non-negative integer (a number of things, seconds, hours).
func optCount[T any](name string, f func(*T) *int, doc string) option[T] {
	return option[T]{name: name, kind: "integer ≥ 0", set: func(t *T, v value) error { return v.count(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

// optRange is an integer from lo to hi.
func optRange[T any](name string, lo, hi int, f func(*T) *int, doc string) option[T] {
	return option[T]{name: name, kind: fmt.Sprintf("integer %d to %d", lo, hi), set: func(t *T, v value) error { return between(v, f(t), lo, hi) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optInt[T any](name string, f func(*T) *int, doc string) option[T] {
	return option[T]{name: name, kind: "integer", set: func(t *T, v value) error { return v.int(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optPort[T any](name string, f func(*T) *int, doc string) option[T] {
	return option[T]{name: name, kind: "port", set: func(t *T, v value) error { return v.port(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optLevel[T any](name string, f func(*T) *string, doc string) option[T] {
	return option[T]{name: name, kind: "log level", set: func(t *T, v value) error { return v.logLevel(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optOneOf[T any](name string, f func(*T) *string, allowed []string, doc string) option[T] {
	return option[T]{name: name, kind: strings.Join(allowed, " | "), set: func(t *T, v value) error { return v.oneOf(f(t), allowed...) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

// optList is a string or a list of strings; with comma a string is split
// at commas.
func optList[T any](name string, comma bool, f func(*T) *[]string, doc string) option[T] {
	kind := "string or list of strings"
	if comma {
		kind = "comma-separated string or list of strings"
	}
	return option[T]{name: name, kind: kind, set: func(t *T, v value) error { return v.strList(f(t), comma) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optRoots[T any](name string, f func(*T) *map[string][]string, doc string) option[T] {
	return option[T]{name: name, kind: "mapping of environment to directories", set: func(t *T, v value) error { return v.roots(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optMap[T any](name string, f func(*T) *map[string]any, doc string) option[T] {
	return option[T]{name: name, kind: "mapping", set: func(t *T, v value) error { return v.anyMap(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

func optAnyList[T any](name string, f func(*T) *[]any, doc string) option[T] {
	return option[T]{name: name, kind: "list", set: func(t *T, v value) error { return v.anyList(f(t)) }, get: func(t *T) any { return *f(t) }, doc: doc}
}

// optFunc is an implemented option with its own setter.
func optFunc[T any](name, kind string, set func(*T, value) error, get func(*T) any, doc string) option[T] {
	return option[T]{name: name, kind: kind, set: set, get: get, doc: doc}
}

// ignored makes Ignored options of Salt's from space-separated names.
func ignored[T any](names, doc string) []option[T] {
	var out []option[T]
	for _, n := range strings.Fields(names) {
		out = append(out, option[T]{name: n, status: Ignored, doc: doc})
	}
	return out
}

// elsewhere makes options implemented on branch (not yet merged here).
func elsewhere[T any](branch, names string) []option[T] {
	var out []option[T]
	for _, n := range strings.Fields(names) {
		out = append(out, option[T]{name: n, status: Elsewhere, doc: "implemented on branch " + branch})
	}
	return out
}

// refusedTrue is a boolean Salt option Halite cannot honour: true is an
// error saying why.
func refusedTrue[T any](name, why string) option[T] {
	return option[T]{name: name, kind: "boolean", status: Refused, def: "False", doc: why,
		set: func(_ *T, v value) error {
			var b bool
			if err := v.bool(&b); err != nil {
				return err
			}
			if b {
				return fmt.Errorf("not supported: %s", why)
			}
			return nil
		}}
}

// table indexes a daemon's options by name. The first line of a name wins
// over Ignored ones after it (Salt's lists are long and overlap); any other
// name given twice is a programming error.
func table[T any](opts ...[]option[T]) map[string]*option[T] {
	m := make(map[string]*option[T])
	for _, l := range opts {
		for i := range l {
			o := &l[i]
			if _, dup := m[o.name]; dup {
				if o.status == Ignored {
					continue
				}
				panic("config: option " + o.name + " is in the table twice")
			}
			m[o.name] = o
		}
	}
	return m
}

// OptionDoc describes one option, for docs/CONFIG.md (tools/configdoc).
type OptionDoc struct {
	Name    string
	Type    string
	Default string
	Status  Status
	Meaning string
}

// docs lists the options of tbl in name order, defaults taken from def.
func docs[T any](tbl map[string]*option[T], def *T) []OptionDoc {
	out := make([]OptionDoc, 0, len(tbl))
	for _, o := range tbl {
		d := OptionDoc{Name: o.name, Type: o.kind, Default: o.def, Status: o.status, Meaning: o.doc}
		if d.Default == "" && o.get != nil {
			d.Default = showDefault(o.get(def))
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// showDefault writes a default as it would be written in a file.
func showDefault(v any) string {
	switch v := v.(type) {
	case string:
		if v == "" {
			return "(none)"
		}
		return v
	case bool:
		if v {
			return "True"
		}
		return "False"
	case []string:
		if len(v) == 0 {
			return "(none)"
		}
		return "[" + strings.Join(v, ", ") + "]"
	case map[string][]string:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+": ["+strings.Join(v[k], ", ")+"]")
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case map[string]any, []any, nil:
		if fmt.Sprint(v) == "map[]" || fmt.Sprint(v) == "[]" || v == nil {
			return "(none)"
		}
	}
	return fmt.Sprint(v)
}
