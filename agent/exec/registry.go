package exec

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// module is one execution module: its functions share the name's prefix.
type module struct {
	name  string
	funcs []function
}

// function is one execution function and its Python-like argument spec.
type function struct {
	name    string  // without the module, e.g. "echo"
	doc     string  // shown by sys.doc and in bad-argument messages
	params  []param // positional-or-keyword parameters, in order
	varargs bool    // accepts extra positional arguments (*args)
	varkw   bool    // accepts any keyword argument (**kwargs)
	run     func(ctx context.Context, c *call) (any, error)
}

// param is a named parameter; one without a default is required.
type param struct {
	name     string
	def      any
	required bool
}

// registry maps "module.function" to its definition. It is filled by the
// modules' init functions and read-only afterwards.
var registry = map[string]*function{}

// register adds a module's functions; a duplicate name is a programming error.
func register(m module) {
	for i := range m.funcs {
		f := &m.funcs[i]
		full := m.name + "." + f.name
		if _, dup := registry[full]; dup {
			panic("exec: function " + full + " registered twice")
		}
		registry[full] = f
	}
}

// call is one invocation of a function: the bound arguments plus what the
// function may report besides its return value.
type call struct {
	e       *Executor
	fun     string
	job     *job
	named   map[string]any // every parameter, defaults filled in
	rest    []any          // extra positional arguments (*args)
	kw      map[string]any // extra keyword arguments (**kwargs)
	retcode int            // Salt's __context__["retcode"]
}

// Errors a function returns; Run renders each as Salt does.
type (
	// invocationError is Salt's SaltInvocationError: the call itself is wrong.
	invocationError struct{ msg string }
	// commandError is Salt's CommandExecutionError: the work failed.
	commandError struct{ msg string }
	// argError is Python's TypeError when binding arguments.
	argError struct{ msg string }
)

func (e *invocationError) Error() string { return e.msg }
func (e *commandError) Error() string    { return e.msg }
func (e *argError) Error() string        { return e.msg }

func invalidf(format string, a ...any) error { return &invocationError{fmt.Sprintf(format, a...)} }
func commandf(format string, a ...any) error { return &commandError{fmt.Sprintf(format, a...)} }

// bind matches a request's arguments to f's parameters as Python would,
// with Salt's handling of invalid keyword arguments.
func bind(full string, f *function, args []any, kwargs map[string]any) (*call, error) {
	c := &call{fun: full, named: make(map[string]any, len(f.params))}
	kw := make(map[string]any, len(kwargs))
	var pos []any
	for _, a := range args {
		// Salt packs kwargs into the arg list as {"__kwarg__": True, ...}.
		if m, ok := a.(map[string]any); ok && m["__kwarg__"] == true {
			for k, v := range m {
				kw[k] = v
			}
			continue
		}
		pos = append(pos, a)
	}
	for k, v := range kwargs {
		kw[k] = v
	}
	for k := range kw {
		if strings.HasPrefix(k, "__") {
			delete(kw, k)
		}
	}

	if len(pos) > len(f.params) && !f.varargs {
		return nil, &argError{tooMany(full, f.params, len(pos))}
	}
	for i, a := range pos {
		if i < len(f.params) {
			c.named[f.params[i].name] = a
		} else {
			c.rest = append(c.rest, a)
		}
	}

	var invalid []string
	for _, k := range sortedKeys(kw) {
		if hasParam(f.params, k) {
			if _, set := c.named[k]; set {
				return nil, &argError{fmt.Sprintf("%s() got multiple values for argument '%s'", full, k)}
			}
			c.named[k] = kw[k]
			continue
		}
		if f.varkw {
			if c.kw == nil {
				c.kw = make(map[string]any)
			}
			c.kw[k] = kw[k]
			continue
		}
		invalid = append(invalid, fmt.Sprintf("%s=%v", k, kw[k]))
	}
	if len(invalid) > 0 {
		return nil, invalidf("The following keyword arguments are not valid: %s", strings.Join(invalid, ", "))
	}

	var missing []string
	for _, p := range f.params {
		if _, set := c.named[p.name]; set {
			continue
		}
		if p.required {
			missing = append(missing, "'"+p.name+"'")
			continue
		}
		c.named[p.name] = p.def
	}
	if len(missing) > 0 {
		return nil, &argError{fmt.Sprintf("%s() missing %d required positional argument%s: %s",
			full, len(missing), plural(len(missing)), pyJoin(missing))}
	}
	if c.rest == nil && f.varargs {
		c.rest = []any{}
	}
	if c.kw == nil && f.varkw {
		c.kw = map[string]any{}
	}
	return c, nil
}

// tooMany is Python's message for too many positional arguments.
func tooMany(full string, params []param, given int) string {
	req := 0
	for _, p := range params {
		if p.required {
			req++
		}
	}
	was := "were"
	if given == 1 {
		was = "was"
	}
	if req == len(params) {
		return fmt.Sprintf("%s() takes %d positional argument%s but %d %s given",
			full, len(params), plural(len(params)), given, was)
	}
	return fmt.Sprintf("%s() takes from %d to %d positional arguments but %d %s given",
		full, req, len(params), given, was)
}

func hasParam(ps []param, name string) bool {
	for _, p := range ps {
		if p.name == name {
			return true
		}
	}
	return false
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// pyJoin joins names as Python's TypeError does: 'a', 'b' and 'c'.
func pyJoin(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// arg returns a bound parameter's value (nil when unset and defaulting to nil).
func (c *call) arg(name string) any { return c.named[name] }

// str returns a parameter as a string; scalars are formatted as Salt's str()
// would, nil is "" with ok false.
func (c *call) str(name string) (s string, ok bool, err error) {
	v := c.named[name]
	if v == nil {
		return "", false, nil
	}
	s, ok = toString(v)
	if !ok {
		return "", false, invalidf("%s must be a string, not %s", name, typeName(v))
	}
	return s, true, nil
}

// seconds returns a parameter given in seconds (int, float or numeric
// string) as a duration; nil or a non-positive value is 0.
func (c *call) seconds(name string) (time.Duration, error) {
	v := c.named[name]
	if v == nil {
		return 0, nil
	}
	f, ok := toFloat(v)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, invalidf("%s must be a number of seconds, not %v", name, v)
	}
	if f <= 0 {
		return 0, nil
	}
	if f > float64(math.MaxInt64/int64(time.Second)) {
		f = float64(math.MaxInt64 / int64(time.Second))
	}
	return time.Duration(f * float64(time.Second)), nil
}

// toString formats scalars the way Salt's str() does for its arguments.
func toString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case bool:
		if x {
			return "True", true
		}
		return "False", true
	case int:
		return strconv.Itoa(x), true
	case int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), true
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

// toFloat converts numbers and numeric strings.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

// toInt converts integral numbers and integer strings.
func toInt(v any) (int, bool) {
	if s, ok := v.(string); ok {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return n, err == nil
	}
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return 0, false
	}
	return int(f), true
}

// isTrue is Salt's salt.utils.data.is_true.
func isTrue(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true") || x == "1"
	}
	if f, ok := toFloat(v); ok {
		return f > 0
	}
	return true
}

// typeName names a value's type as Salt's users know it.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case string:
		return "str"
	case bool:
		return "bool"
	case map[string]any, map[any]any:
		return "dict"
	case []any:
		return "list"
	case float32, float64:
		return "float"
	}
	if _, ok := toInt(v); ok {
		return "int"
	}
	return fmt.Sprintf("%T", v)
}
