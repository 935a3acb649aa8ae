package state

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/state"
)

// module.run (salt/states/module.py): run execution functions as a state.
// The new syntax lists the functions with their arguments:
//
//	restart:
//	  module.run:
//	    - service.restart:
//	      - name: nginx
//
// the old one names one function with name (or the ID) and gives its
// arguments as the state's (m_name for its own name argument):
//
//	restart:
//	  module.run:
//	    - name: service.restart
//	    - m_name: nginx
//
// A chunk is a mapping, so the new syntax runs its functions in name order
// (Salt runs them in the SLS's order).

func moduleRun(ctx context.Context, c *Call) state.Ret {
	kw := Kwargs(c.Chunk)
	keys := make([]string, 0, len(kw))
	for k := range kw {
		if k == "name" || k == "__reqs__" || k == "sfun" {
			continue
		}
		keys = append(keys, k)
	}
	legacy := len(keys) == 0 && len(kw) > 0
	for _, k := range keys {
		if !strings.Contains(k, ".") {
			legacy = true
		}
	}
	if legacy {
		return moduleLegacy(ctx, c, kw)
	}
	sort.Strings(keys)
	return moduleNew(ctx, c, kw, keys)
}

func moduleNew(ctx context.Context, c *Call, kw map[string]any, keys []string) state.Ret {
	names := make([]any, 0, len(keys))
	var funcs []string
	for _, k := range keys {
		names = append(names, k)
		if strings.Contains(k, ".") {
			funcs = append(funcs, k)
		}
	}
	r := state.Ret{Name: fmt.Sprint(names), Result: state.None}
	if len(funcs) == 0 {
		r.Result, r.Comment = state.False, "No function provided."
		return r
	}
	var missing, tests []string
	for _, f := range funcs {
		f, _, _ = strings.Cut(f, ":")
		if !exec.Known(f) {
			missing = append(missing, f)
		} else if c.Test {
			tests = append(tests, f)
		}
	}
	if len(missing) > 0 || len(tests) > 0 {
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, fmt.Sprintf("Unavailable function%s: %s.", plural(len(missing)), strings.Join(missing, ", ")))
		}
		if len(tests) > 0 {
			parts = append(parts, fmt.Sprintf("Function%s %s to be executed.", plural(len(tests)), strings.Join(tests, ", ")))
		}
		r.Comment = strings.Join(parts, " ")
		if len(missing) > 0 {
			r.Result = state.False
		}
		return r
	}
	changes := map[string]any{}
	var failures, success []string
	for _, f := range funcs {
		name, _, _ := strings.Cut(f, ":")
		args, kwargs := funcArgs(kw[f])
		if c.Host == nil {
			failures = append(failures, fmt.Sprintf("'%s' failed: no agent to run it", f))
			continue
		}
		ret, err := c.Host.Exec(ctx, name, args, kwargs)
		if err != nil {
			failures = append(failures, fmt.Sprintf("'%s' failed: %v", f, err))
			continue
		}
		if !moduleResult(ret, map[string]any{}) {
			if m, ok := ret.(map[string]any); ok {
				cmt, ok := m["comment"]
				if !ok {
					cmt = "(error message N/A)"
				}
				failures = append(failures, fmt.Sprintf("'%s' failed: %v", f, cmt))
			}
			if ret == false {
				failures = append(failures, fmt.Sprintf("'%s': False", f))
			}
			continue
		}
		if m, ok := ret.(map[string]any); ok {
			cmt, ok := m["comment"]
			if !ok {
				cmt = "Success"
			}
			success = append(success, fmt.Sprintf("%s: %v", f, cmt))
		} else {
			success = append(success, fmt.Sprintf("%s: %s", f, pyStr(ret)))
		}
		changes[f] = ret
	}
	r.Changes = changes
	r.Comment = strings.Join(append(failures, success...), ", ")
	r.Result = state.True
	if len(failures) > 0 {
		r.Result = state.False
	}
	return r
}

func plural(n int) string {
	if n > 1 {
		return "s"
	}
	return ""
}

// funcArgs splits a function's argument list (new syntax): one-key
// mappings are keyword arguments, anything else positional.
func funcArgs(v any) ([]any, map[string]any) {
	args := []any{}
	kwargs := map[string]any{}
	switch x := v.(type) {
	case nil:
	case []any:
		for _, a := range x {
			if m, ok := a.(map[string]any); ok {
				for k, v := range m {
					kwargs[k] = v
				}
				continue
			}
			args = append(args, a)
		}
	case map[string]any:
		for k, v := range x {
			kwargs[k] = v
		}
	default:
		args = append(args, x)
	}
	return args, kwargs
}

// moduleLegacy is Salt's _legacy_run.
func moduleLegacy(ctx context.Context, c *Call, kw map[string]any) state.Ret {
	name := c.Name
	r := state.Ret{Name: name, Result: state.None}
	if !exec.Known(name) {
		r.Result, r.Comment = state.False, fmt.Sprintf("Module function %s is not available", name)
		return r
	}
	if c.Test {
		r.Comment = fmt.Sprintf("Module function %s is set to execute", name)
		return r
	}
	args := []any{}
	kwargs := map[string]any{}
	for k, v := range kw {
		switch k {
		case "name", "returner", "sfun", "__reqs__":
			continue
		case "m_name", "m_fun", "m_state", "m_saltenv", "m_names":
			kwargs[k[2:]] = v
		case "args":
			l, ok := v.([]any)
			if !ok {
				r.Result, r.Comment = state.False, "'args' must be a list."
				return r
			}
			args = append(args, l...)
		case "kwargs":
			m, ok := v.(map[string]any)
			if !ok {
				r.Result, r.Comment = state.False, "'kwargs' must be a dict."
				return r
			}
			for k2, v2 := range m {
				kwargs[k2] = v2
			}
		default:
			kwargs[k] = v
		}
	}
	if c.Host == nil {
		r.Result, r.Comment = state.False, fmt.Sprintf("Module function %s threw an exception. Exception: no agent to run it", name)
		return r
	}
	ret, err := c.Host.Exec(ctx, name, args, kwargs)
	if err != nil {
		r.Result, r.Comment = state.False, fmt.Sprintf("Module function %s threw an exception. Exception: %v", name, err)
		return r
	}
	r.Changes = map[string]any{"ret": ret}
	r.Comment = fmt.Sprintf("Module function %s executed", name)
	r.Result = state.False
	if moduleResult(ret, r.Changes) {
		r.Result = state.True
	}
	return r
}

// moduleResult is Salt's _get_result.
func moduleResult(ret any, changes map[string]any) bool {
	if m, ok := ret.(map[string]any); ok {
		if rc, ok := toInt(m["retcode"]); ok && rc != 0 {
			return false
		}
	}
	if b, ok := ret.(bool); ok {
		return b
	}
	cr, ok := changes["ret"].(map[string]any)
	if !ok {
		return true
	}
	if b, ok := cr["result"].(bool); ok {
		return b
	}
	if rc, ok := toInt(cr["retcode"]); ok && rc != 0 {
		return false
	}
	return dictResult(cr, 0)
}

// dictResult is Salt's _get_dict_result: a nested "result": False fails.
func dictResult(m map[string]any, depth int) bool {
	if depth > 32 {
		return true
	}
	for k, v := range m {
		if k == "result" && v == false {
			return false
		}
		if sub, ok := v.(map[string]any); ok && !dictResult(sub, depth+1) {
			return false
		}
	}
	return true
}

func init() {
	doc := `Run execution functions: the new syntax lists "mod.fun: [args]" entries; the
old one names the function with name (m_name for its own name argument).`
	Register("module.run", Mod{Run: moduleRun, Doc: doc})
	Register("module.wait", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		return state.Ret{Name: c.Name, Result: state.True}
	}, Doc: "Run a module function only from a watch (module.run as mod_watch)."})
	RegisterWatch("module", moduleRun)
}
