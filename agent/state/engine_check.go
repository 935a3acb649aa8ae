package state

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// unless, onlyif, creates and check_cmd, as Salt's State._run_check and
// _run_check_cmd (salt/state.py): commands run with cmd.retcode through
// the host, functions ({fun: ..., args: [...], get_return: ...}) with
// Host.Exec.

func hasAny(c state.Chunk, keys ...string) bool {
	for _, k := range keys {
		if _, ok := c[k]; ok {
			return true
		}
	}
	return false
}

// cmdOpts are the cmd.retcode arguments taken from the state (Salt's
// POSSIBLE_CMD_ARGS that Halite's cmd module has, minus cmd_opts_exclude),
// and the shell.
func (r *run) cmdOpts(low state.Chunk) map[string]any {
	exclude := map[string]bool{}
	for _, e := range reqList(low["cmd_opts_exclude"]) {
		exclude[fmt.Sprint(e)] = true
	}
	opts := map[string]any{"ignore_retcode": true, "python_shell": true}
	for _, k := range []string{"cwd", "runas", "env", "timeout"} {
		if v, ok := low[k]; ok && v != nil && !exclude[k] {
			opts[k] = v
		}
	}
	var shell any
	if v, ok := low["shell"]; ok && !exclude["shell"] {
		shell = v
	} else if r.h != nil {
		shell = r.h.Grains()["shell"]
	}
	if s, ok := shell.(string); ok && s != "" && s != "/sbin/nologin" {
		opts["shell"] = s
	}
	return opts
}

// retcode runs a command for a check; ok is false when it could not run.
func (r *run) retcode(ctx context.Context, cmd string, opts map[string]any) (int, bool) {
	if r.h == nil {
		return 0, false
	}
	v, err := r.h.Exec(ctx, "cmd.retcode", []any{cmd}, opts)
	if err != nil {
		return 0, false
	}
	n, ok := toInt(v)
	return n, ok
}

// checkFunction runs an unless/onlyif function entry; rc is non-zero when
// it failed.
func (r *run) checkFunction(ctx context.Context, entry map[string]any) (result any, rc int) {
	kw := make(map[string]any, len(entry))
	for k, v := range entry {
		kw[k] = v
	}
	fun := fmt.Sprint(kw["fun"])
	args := reqList(kw["args"])
	getReturn, _ := kw["get_return"].(string)
	delete(kw, "fun")
	delete(kw, "args")
	delete(kw, "get_return")
	if r.h == nil {
		return nil, 1
	}
	v, err := r.h.Exec(ctx, fun, args, kw)
	if err != nil {
		return nil, 1
	}
	if getReturn != "" {
		v = traverse(v, getReturn)
	}
	return v, 0
}

// traverse is salt.utils.data.traverse_dict_and_list with ":".
func traverse(v any, path string) any {
	for _, k := range strings.Split(path, ":") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, ok := toInt(k)
			if !ok || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// runCheck is Salt's _run_check: it sets x's result to true (the state is
// not run) or false (it is), with the comments and skip_watch.
func (r *run) runCheck(ctx context.Context, low state.Chunk, x ret) {
	opts := r.cmdOpts(low)
	result, skip := false, false
	var comments []string
	if v, ok := low["onlyif"]; ok {
		res, cmt, sk := r.onlyif(ctx, reqList(v), opts)
		result = res
		comments = append(comments, cmt)
		skip = sk
	}
	if v, ok := low["unless"]; ok {
		res, cmt, sk := r.unless(ctx, reqList(v), opts)
		result = res || result
		comments = append(comments, cmt)
		skip = sk || skip
	}
	if v, ok := low["creates"]; ok {
		res, cmt := creates(v)
		result = res || result
		comments = append(comments, cmt)
		skip = res || skip
	}
	x["result"] = result
	x["comment"] = strings.Join(comments, "\n")
	if skip {
		x["skip_watch"] = true
	}
	for _, k := range []string{"__sls__", "__id__", "name"} {
		x[k] = low[k]
	}
}

// onlyif is Salt's _run_check_onlyif: result true means "do not run".
func (r *run) onlyif(ctx context.Context, entries []any, opts map[string]any) (result bool, comment string, skip bool) {
	check := func(rc int) bool {
		if rc != 0 && !result {
			result, comment, skip = true, "onlyif condition is false", true
			return false
		} else if rc == 0 {
			result, comment = false, "onlyif condition is true"
		}
		return true
	}
	for _, e := range entries {
		switch v := e.(type) {
		case string:
			rc, ok := r.retcode(ctx, v, opts)
			if !ok {
				rc = 100
			}
			if !check(rc) {
				return
			}
		case map[string]any:
			if _, ok := v["fun"]; !ok {
				return result, fmt.Sprintf("no `fun` argument in onlyif: %v", v), skip
			}
			res, rc := r.checkFunction(ctx, v)
			if rc != 0 {
				if !check(rc) {
					return
				}
			} else if !state.Truthy(res) {
				return true, "onlyif condition is false", true
			} else {
				result, comment = false, "onlyif condition is true"
			}
		default:
			return false, "onlyif execution failed, bad type passed", skip
		}
	}
	return
}

// unless is Salt's _run_check_unless: result true means "do not run".
func (r *run) unless(ctx context.Context, entries []any, opts map[string]any) (result bool, comment string, skip bool) {
	check := func(rc int) bool {
		if rc == 0 {
			result, comment, skip = true, "unless condition is true", true
			return false
		}
		result, comment, skip = false, "unless condition is false", false
		return true
	}
	for _, e := range entries {
		switch v := e.(type) {
		case string:
			rc, ok := r.retcode(ctx, v, opts)
			if !ok {
				rc = 0 // Salt: the command failed, so skip the state
			}
			if check(rc) {
				return
			}
		case map[string]any:
			if _, ok := v["fun"]; !ok {
				return result, fmt.Sprintf("no `fun` argument in unless: %v", v), skip
			}
			res, rc := r.checkFunction(ctx, v)
			if rc != 0 {
				if check(rc) {
					return
				}
			} else if state.Truthy(res) {
				result, comment, skip = true, "unless condition is true", true
			} else {
				return false, "unless condition is false", skip
			}
		default:
			result, comment = false, "unless condition is false, bad type passed"
		}
	}
	return
}

// creates is Salt's _run_check_creates.
func creates(v any) (bool, string) {
	switch x := v.(type) {
	case string:
		if _, err := os.Stat(x); err == nil {
			return true, x + " exists"
		}
	case []any:
		all := true
		for _, p := range x {
			s, ok := p.(string)
			if !ok {
				all = false
				break
			}
			if _, err := os.Stat(s); err != nil {
				all = false
				break
			}
		}
		if all {
			return true, "All files in creates exist"
		}
	}
	return false, "Creates files not found"
}

// runCheckCmd is Salt's _run_check_cmd: the commands decide the result.
func (r *run) runCheckCmd(ctx context.Context, cmds any, low state.Chunk, x ret) {
	opts := map[string]any{"ignore_retcode": true, "python_shell": true}
	if r.h != nil {
		if s, ok := r.h.Grains()["shell"].(string); ok && s != "" {
			opts["shell"] = s
		}
	}
	x["result"] = false
	for _, k := range []string{"__sls__", "__id__", "name"} {
		x[k] = low[k]
	}
	for _, e := range reqList(cmds) {
		rc, ok := r.retcode(ctx, fmt.Sprint(e), opts)
		if !ok {
			rc = 1
		}
		if rc == 0 && x["result"] == false {
			x["result"], x["comment"] = true, "check_cmd determined the state succeeded"
		} else if rc != 0 {
			x["result"], x["comment"] = false, "check_cmd determined the state failed"
			return
		}
	}
}

// toInt reads an integral number.
func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case uint64:
		return int(x), true
	case float64:
		return int(x), x == float64(int(x))
	case string:
		n := 0
		if x == "" {
			return 0, false
		}
		for _, c := range x {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
			if n > 1<<30 {
				return 0, false
			}
		}
		return n, true
	}
	return 0, false
}

// fnmatch is Python's fnmatch.fnmatch (package state's).
func fnmatch(name, pat string) bool { return state.Fnmatch(name, pat) }

// one matches one byte against the pattern's first element (a byte, ?,
// or a [set]); n is the element's length.
func one(c byte, p string) (n int, ok bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '[':
		j := 1
		if j < len(p) && p[j] == '!' {
			j++
		}
		if j < len(p) && p[j] == ']' {
			j++
		}
		end := strings.IndexByte(p[j:], ']')
		if end < 0 {
			return 1, c == '[' // an unclosed [ is itself
		}
		end += j
		set := p[1:end]
		neg := strings.HasPrefix(set, "!")
		if neg {
			set = set[1:]
		}
		in := false
		for i := 0; i < len(set); i++ {
			if i+2 < len(set) && set[i+1] == '-' {
				if set[i] <= c && c <= set[i+2] {
					in = true
				}
				i += 2
				continue
			}
			if set[i] == c {
				in = true
			}
		}
		return end + 1, in != neg
	}
	return 1, c == p[0]
}
