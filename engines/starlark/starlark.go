package starlark

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"go.starlark.net/lib/json"
	sltime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/saltdata"
	"github.com/halite-fleet/halite/targets"
)

// fileOptions allow while loops and top-level control flow, as engines
// are long-running loops; recursion stays forbidden.
var fileOptions = &syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true, Set: true}

// predeclaredNames are the names of the API, for compiling.
var predeclaredNames = (&runtime{}).predeclared()

// Compile compiles a Starlark engine once (a syntax or name error is
// reported here, with file and line) and returns its factory; each engine
// instance runs the program afresh with its own globals, which are not
// frozen, so they hold the engine's state.
func Compile(file string, src []byte) (engines.Factory, error) {
	_, prog, err := starlark.SourceProgramOptions(fileOptions, file, src, predeclaredNames.Has)
	if err != nil {
		return nil, fmt.Errorf("starlark engine %s: %w", file, err)
	}
	return func(o *engines.Opts) (engines.Engine, error) {
		return &engine{file: file, prog: prog, opts: o.All()}, nil
	}, nil
}

type engine struct {
	file string
	prog *starlark.Program
	opts map[string]any
}

// stopping is the error a script sees when its engine stops.
var errStopping = errors.New("engine stopping")

func (e *engine) Run(ctx context.Context, env *engines.Env) error {
	th := &starlark.Thread{Name: env.Name, Print: func(_ *starlark.Thread, msg string) { env.Log.Info(msg) }}
	// load() is refused: Thread.Load is nil.
	stop := context.AfterFunc(ctx, func() { th.Cancel(errStopping.Error()) })
	defer stop()

	rt := &runtime{ctx: ctx, env: env, opts: e.opts}
	globals, err := e.prog.Init(th, rt.predeclared())
	if err != nil {
		return rt.scriptErr(err)
	}
	fn := func(name string) *starlark.Function {
		f, _ := globals[name].(*starlark.Function)
		return f
	}
	patterns := []string{"*"}
	if v, ok := globals["EVENTS"]; ok {
		l, ok := v.(*starlark.List)
		if !ok {
			return fmt.Errorf("%s: EVENTS must be a list of tag globs, got %s", e.file, v.Type())
		}
		patterns = patterns[:0]
		for i := 0; i < l.Len(); i++ {
			s, ok := starlark.AsString(l.Index(i))
			if !ok {
				return fmt.Errorf("%s: EVENTS must be a list of tag globs, got an item %s", e.file, l.Index(i))
			}
			patterns = append(patterns, s)
		}
	}
	interval := 10 * time.Second
	if v, ok := globals["INTERVAL"]; ok {
		f, ok := starlark.AsFloat(v)
		if !ok || f <= 0 || math.IsInf(f, 0) {
			return fmt.Errorf("%s: INTERVAL must be a positive number of seconds, got %s", e.file, v)
		}
		interval = time.Duration(f * float64(time.Second))
	}
	onEvent, onTick, start := fn("on_event"), fn("on_tick"), fn("start")
	if onEvent == nil && onTick == nil && start == nil {
		return fmt.Errorf("%s defines none of on_event, on_tick or start", e.file)
	}
	if onEvent != nil || start != nil {
		rt.sub = env.Bus.Subscribe("*", 65536)
		defer rt.sub.Close()
		rt.patterns = patterns
	}
	if f := fn("init"); f != nil {
		if _, err := starlark.Call(th, f, nil, nil); err != nil {
			return rt.scriptErr(err)
		}
	}
	if onEvent == nil && onTick == nil {
		if _, err := starlark.Call(th, start, nil, nil); err != nil {
			return rt.scriptErr(err)
		}
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: start() returned", e.file)
	}
	var tick <-chan time.Time
	if onTick != nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	var evs <-chan event.Event
	if onEvent != nil {
		evs = rt.sub.C()
	}
	args := make(starlark.Tuple, 2)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if _, err := starlark.Call(th, onTick, nil, nil); err != nil {
				return rt.scriptErr(err)
			}
		case ev, ok := <-evs:
			if !ok {
				return nil
			}
			if !rt.matches(ev.Tag) {
				continue
			}
			args[0] = starlark.String(ev.Tag)
			args[1] = ToValue(ev.Data)
			if _, err := starlark.Call(th, onEvent, args, nil); err != nil {
				return rt.scriptErr(err)
			}
		}
	}
}

// runtime is one engine instance's API state.
type runtime struct {
	ctx      context.Context // the engine's life, for sleep and http
	env      *engines.Env
	opts     map[string]any
	sub      *event.Subscription
	patterns []string
}

func (rt *runtime) scriptErr(err error) error {
	if rt.ctx.Err() != nil {
		return nil
	}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		return fmt.Errorf("%s", ee.Backtrace())
	}
	return err
}

func (rt *runtime) matches(tag string) bool {
	for _, p := range rt.patterns {
		if p == "*" || p == tag || targets.MatchGlob(p, tag) {
			return true
		}
	}
	return false
}

func (rt *runtime) predeclared() starlark.StringDict {
	b := func(name string, f func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)) *starlark.Builtin {
		return starlark.NewBuiltin(name, f)
	}
	return starlark.StringDict{
		"opts": ToValue(rt.opts),
		"event": starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"fire": b("event.fire", rt.fire(false)),
			"send": b("event.send", rt.fire(true)),
			"get":  b("event.get", rt.get),
		}),
		"log": starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"debug":   b("log.debug", rt.log(zap.DebugLevel)),
			"info":    b("log.info", rt.log(zap.InfoLevel)),
			"warning": b("log.warning", rt.log(zap.WarnLevel)),
			"error":   b("log.error", rt.log(zap.ErrorLevel)),
		}),
		"grains": starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"get":   b("grains.get", rt.grainsGet),
			"items": b("grains.items", rt.grainsItems),
		}),
		"config": starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"get": b("config.get", rt.configGet),
		}),
		"http": starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"get":  b("http.get", rt.httpDo("GET")),
			"post": b("http.post", rt.httpDo("POST")),
		}),
		"sleep": b("sleep", rt.sleep),
		"call":  b("call", rt.call),
		"json":  json.Module,
		"time":  sltime.Module,
	}
}

func (rt *runtime) fire(master bool) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var tag string
		var data starlark.Value = starlark.None
		if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "tag", &tag, "data?", &data); err != nil {
			return nil, err
		}
		if tag == "" {
			return nil, fmt.Errorf("%s: empty tag", fn.Name())
		}
		m := map[string]any{}
		if data != starlark.None {
			v, err := FromValue(data)
			if err != nil {
				return nil, fmt.Errorf("%s: data: %w", fn.Name(), err)
			}
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: data must be a dict, got %s", fn.Name(), data.Type())
			}
			m = mm
		}
		if master {
			if err := rt.env.FireMaster(tag, m); err != nil {
				return nil, fmt.Errorf("%s: %w", fn.Name(), err)
			}
		} else {
			rt.env.Fire(tag, m)
		}
		return starlark.None, nil
	}
}

func (rt *runtime) get(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var timeout starlark.Value = starlark.None
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "timeout?", &timeout); err != nil {
		return nil, err
	}
	if rt.sub == nil {
		return nil, fmt.Errorf("event.get: only start() engines listen this way; use on_event")
	}
	var after <-chan time.Time
	if timeout != starlark.None {
		f, ok := starlark.AsFloat(timeout)
		if !ok || f < 0 {
			return nil, fmt.Errorf("event.get: timeout must be a number of seconds")
		}
		t := time.NewTimer(time.Duration(f * float64(time.Second)))
		defer t.Stop()
		after = t.C
	}
	for {
		select {
		case <-rt.ctx.Done():
			return nil, errStopping
		case <-after:
			return starlark.None, nil
		case ev, ok := <-rt.sub.C():
			if !ok {
				return nil, errStopping
			}
			if !rt.matches(ev.Tag) {
				continue
			}
			d := starlark.NewDict(2)
			d.SetKey(starlark.String("tag"), starlark.String(ev.Tag))
			d.SetKey(starlark.String("data"), ToValue(ev.Data))
			return d, nil
		}
	}
}

func (rt *runtime) log(level zapcore.Level) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		parts := make([]string, len(args))
		for i, a := range args {
			if s, ok := starlark.AsString(a); ok {
				parts[i] = s
			} else {
				parts[i] = a.String()
			}
		}
		if ce := rt.env.Log.Check(level, strings.Join(parts, " ")); ce != nil {
			ce.Write()
		}
		return starlark.None, nil
	}
}

func (rt *runtime) grainsGet(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var key string
	var def starlark.Value = starlark.None
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "key", &key, "default?", &def); err != nil {
		return nil, err
	}
	if rt.env.Grains == nil {
		return def, nil
	}
	v, ok := saltdata.Traverse(rt.env.Grains(), key, ":")
	if !ok {
		return def, nil
	}
	return ToValue(v), nil
}

func (rt *runtime) grainsItems(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	if rt.env.Grains == nil {
		return starlark.NewDict(0), nil
	}
	return ToValue(rt.env.Grains()), nil
}

func (rt *runtime) configGet(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var key string
	var def starlark.Value = starlark.None
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "key", &key, "default?", &def); err != nil {
		return nil, err
	}
	if v, ok := rt.opts[key]; ok {
		return ToValue(v), nil
	}
	if v, ok := saltdata.Traverse(rt.env.Config, key, ":"); ok {
		return ToValue(v), nil
	}
	return def, nil
}

func (rt *runtime) sleep(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var secs starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "seconds", &secs); err != nil {
		return nil, err
	}
	f, ok := starlark.AsFloat(secs)
	if !ok || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("sleep: seconds must be a non-negative number")
	}
	t := time.NewTimer(time.Duration(f * float64(time.Second)))
	defer t.Stop()
	select {
	case <-rt.ctx.Done():
		return nil, errStopping
	case <-t.C:
		return starlark.None, nil
	}
}

func (rt *runtime) call(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("call: the function name is required, e.g. call(\"test.ping\")")
	}
	fun, ok := starlark.AsString(args[0])
	if !ok {
		return nil, fmt.Errorf("call: the function name must be a string")
	}
	if rt.env.Call == nil {
		return nil, fmt.Errorf("call: execution functions are not available on the %s", rt.env.Role)
	}
	var pos []any
	for _, a := range args[1:] {
		v, err := FromValue(a)
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", fun, err)
		}
		pos = append(pos, v)
	}
	kw := map[string]any{}
	for _, kv := range kwargs {
		v, err := FromValue(kv[1])
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", fun, err)
		}
		kw[string(kv[0].(starlark.String))] = v
	}
	ret, err := rt.env.Call(rt.ctx, fun, pos, kw)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", fun, err)
	}
	return ToValue(ret), nil
}

// ToValue converts decoded event data (CBOR or YAML) into Starlark values.
func ToValue(v any) starlark.Value {
	switch x := v.(type) {
	case nil:
		return starlark.None
	case bool:
		return starlark.Bool(x)
	case string:
		return starlark.String(x)
	case []byte:
		return starlark.Bytes(x)
	case int:
		return starlark.MakeInt(x)
	case int8:
		return starlark.MakeInt(int(x))
	case int16:
		return starlark.MakeInt(int(x))
	case int32:
		return starlark.MakeInt(int(x))
	case int64:
		return starlark.MakeInt64(x)
	case uint:
		return starlark.MakeUint(x)
	case uint8:
		return starlark.MakeInt(int(x))
	case uint16:
		return starlark.MakeInt(int(x))
	case uint32:
		return starlark.MakeUint64(uint64(x))
	case uint64:
		return starlark.MakeUint64(x)
	case float32:
		return starlark.Float(x)
	case float64:
		return starlark.Float(x)
	case map[string]any:
		d := starlark.NewDict(len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d.SetKey(starlark.String(k), ToValue(x[k]))
		}
		return d
	case map[any]any:
		d := starlark.NewDict(len(x))
		for k, v := range x {
			d.SetKey(starlark.String(fmt.Sprint(k)), ToValue(v))
		}
		return d
	case []any:
		l := make([]starlark.Value, len(x))
		for i, v := range x {
			l[i] = ToValue(v)
		}
		return starlark.NewList(l)
	case []string:
		l := make([]starlark.Value, len(x))
		for i, v := range x {
			l[i] = starlark.String(v)
		}
		return starlark.NewList(l)
	case time.Time:
		return starlark.String(x.Format(time.RFC3339Nano))
	}
	return starlark.String(fmt.Sprint(v))
}

// FromValue converts a Starlark value into event data.
func FromValue(v starlark.Value) (any, error) {
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.String:
		return string(x), nil
	case starlark.Bytes:
		return []byte(x), nil
	case starlark.Int:
		if i, ok := x.Int64(); ok {
			return i, nil
		}
		if u, ok := x.Uint64(); ok {
			return u, nil
		}
		return nil, fmt.Errorf("integer %s is too large", x)
	case starlark.Float:
		return float64(x), nil
	case *starlark.Dict:
		out := make(map[string]any, x.Len())
		for _, it := range x.Items() {
			k, ok := starlark.AsString(it[0])
			if !ok {
				k = it[0].String()
			}
			v, err := FromValue(it[1])
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case *starlark.List:
		out := make([]any, x.Len())
		for i := range out {
			v, err := FromValue(x.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case starlark.Tuple:
		out := make([]any, len(x))
		for i, e := range x {
			v, err := FromValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *starlarkstruct.Struct:
		d := starlark.StringDict{}
		x.ToStringDict(d)
		out := make(map[string]any, len(d))
		for k, e := range d {
			v, err := FromValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot send a %s", v.Type())
}
