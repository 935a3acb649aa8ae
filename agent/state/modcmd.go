package state

// The cmd state module, after Salt 3006's salt/states/cmd.py: cmd.run,
// cmd.wait (and its alias cmd.watch), cmd.script, cmd.wait_script and the
// module's mod_watch. Commands run through the agent's own cmd.run_all
// execution function (Host.Exec), as Salt's state calls
// __salt__["cmd.run_all"]; unless/onlyif/creates are the engine's (Salt
// 3006 handles them in salt/state.py _run_check, not in cmd.py).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/halite-fleet/halite/state"
)

func init() {
	Register("cmd.run", Mod{Run: cmdRun, Doc: `Run a command (with the shell) if certain circumstances are met.

    name             the command line
    cwd              working directory (must exist)
    shell            the shell (default /bin/sh)
    env              a dict, or a list of one-key dicts, added to the environment
    stateful         the command prints changed=yes comment=... (or JSON)
    timeout          seconds; ignore_timeout: treat a timeout as success
    success_retcodes exit codes that count as success
    output_loglevel, hide_output are accepted; runas, root, use_vt are not supported.`})
	Register("cmd.wait", Mod{Run: cmdWait, Doc: "Run the given command only if a watched state changed (cmd's mod_watch)."})
	Register("cmd.watch", Mod{Run: cmdWait, Doc: "Alias of cmd.wait."})
	Register("cmd.script", Mod{Run: cmdScript, Doc: `Download a script (salt://, sent with the job) and run it.

    name    the script, or a label when source is given
    source  salt://path of the script (default: name)
    args    arguments, a string passed to the shell
    cwd, shell, env, stateful, timeout, success_retcodes as cmd.run.`})
	Register("cmd.wait_script", Mod{Run: cmdWait, Doc: "Run cmd.script only if a watched state changed."})
	RegisterWatch("cmd", cmdModWatch)
}

// cmdUnsupported are cmd.run's arguments Halite's agent does not do.
var cmdUnsupported = []string{"runas", "root", "use_vt", "password", "group", "prepend_path", "bg", "umask"}

// cmdStateful reads Salt's stateful argument: True, or [{"test_name": cmd}].
func cmdStateful(k sysKw) (stateful bool, testName string) {
	if l, ok := k["stateful"].([]any); ok {
		if len(l) > 0 {
			if m, ok := l[0].(map[string]any); ok {
				if s, ok := m["test_name"].(string); ok {
					return true, s
				}
			}
		}
		return false, ""
	}
	return k["stateful"] == true, ""
}

// cmdRun is Salt's cmd.run state.
func cmdRun(ctx context.Context, c *Call) state.Ret {
	k := sysKw(c.Chunk)
	return cmdRunLine(ctx, c, k, c.Name, "Command \"%s\" would have been executed", "Command \"%s\" run")
}

// cmdRunLine runs line as cmd.run does; the comments differ between
// cmd.run (double quotes) and cmd.script (single quotes).
func cmdRunLine(ctx context.Context, c *Call, k sysKw, line, wouldRun, didRun string) state.Ret {
	name := c.Name
	ret := state.Ret{Name: name, Result: state.False}
	stateful, testName := cmdStateful(k)
	if c.Test && testName != "" {
		name, line = testName, testName
	}
	for _, p := range cmdUnsupported {
		if k.has(p) && k[p] != false {
			ret.Comment = fmt.Sprintf("%s is not supported by halite-agent", p)
			return ret
		}
	}
	if env := k["env"]; env != nil {
		switch env.(type) {
		case []any, map[string]any:
		default:
			ret.Comment = "Invalidly-formatted 'env' parameter. See documentation."
			return ret
		}
	}
	if c.Test && testName == "" {
		ret.Result = state.None
		ret.Comment = fmt.Sprintf(wouldRun, name)
		if stateful {
			return cmdReinterpret(ret, nil)
		}
		return ret
	}
	cwd, _, err := k.str("cwd")
	if err != nil {
		ret.Comment = err.Error()
		return ret
	}
	if cwd != "" {
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			ret.Comment = fmt.Sprintf("Desired working directory \"%s\" is not available", cwd)
			return ret
		}
	}
	kw := map[string]any{"ignore_retcode": true}
	for _, p := range []string{"cwd", "shell", "env", "timeout", "stdin", "output_loglevel", "rstrip"} {
		if k.has(p) {
			kw[p] = k[p]
		}
	}
	out, err := c.Host.Exec(ctx, "cmd.run_all", []any{line}, kw)
	if err != nil {
		ret.Comment = err.Error()
		return ret
	}
	all, ok := out.(map[string]any)
	if !ok {
		ret.Comment = fmt.Sprintf("cmd.run_all returned %s, not a dict", sysTypeName(out))
		return ret
	}
	rc, _, _ := sysKw(all).integer("retcode")
	if codes, ok, _ := k.list("success_retcodes", false); ok && rc != 0 {
		for _, s := range codes {
			if s == fmt.Sprint(rc) {
				rc = 0
				all["retcode"] = 0
			}
		}
	}
	ret.Changes = all
	ret.Result = state.True
	if rc != 0 {
		ret.Result = state.False
	}
	ret.Comment = fmt.Sprintf(didRun, name)
	if k.boolean("ignore_timeout", false) && rc == 1 {
		if s, _ := all["stdout"].(string); strings.Contains(s, "Timed out after") {
			all["retcode"] = 0
			ret.Result = state.True
		}
	}
	if stateful {
		ret = cmdReinterpret(ret, all)
	}
	if c.Test && rc == 0 && len(ret.Changes) > 0 {
		ret.Result = state.None
	}
	return ret
}

// cmdReinterpret is Salt's _reinterpreted_state: the command's last line
// of output (name=value pairs) or its whole output (a JSON object) says
// whether it changed anything and what to comment.
func cmdReinterpret(ret state.Ret, all map[string]any) state.Ret {
	ret.Changes = map[string]any{}
	ret.Comment = ""
	out, _ := all["stdout"].(string)
	if out == "" {
		if e, _ := all["stderr"].(string); e != "" {
			ret.Comment = e
		}
		return ret
	}
	data := map[string]any{}
	isJSON := false
	idx := -1
	if err := json.Unmarshal([]byte(out), &data); err == nil {
		isJSON = true
	} else {
		var anyv any
		if json.Unmarshal([]byte(out), &anyv) == nil {
			ret.Result = state.False
			ret.Comment = "script JSON output must be a JSON object (e.g., {})!"
			return ret
		}
		data = map[string]any{}
		last := out
		idx = strings.LastIndexByte(strings.TrimRight(out, " \t\r\n"), '\n')
		if idx != -1 {
			last = out[idx+1:]
		}
		for _, item := range cmdShlex(last) {
			kv := strings.Split(item, "=")
			if len(kv) != 2 {
				ret.Result = state.False
				ret.Comment = "Failed parsing script output! Stdout must be JSON or a line of name=value pairs."
				for k, v := range all {
					ret.Changes[k] = v
				}
				return ret
			}
			data[kv[0]] = kv[1]
		}
	}
	changed := false
	switch v := data["changed"]; strings.ToLower(fmt.Sprint(v)) {
	case "true", "yes", "1":
		changed = true
	case "false", "no", "0", "<nil>":
	default:
		ret.Result = state.False
		ret.Comment = fmt.Sprintf("Failed parsing boolean value: %v", v)
		return ret
	}
	if cm, ok := data["comment"]; ok {
		ret.Comment = fmt.Sprint(cm)
		delete(data, "comment")
	}
	if changed {
		for k, v := range all {
			if _, ok := data[k]; !ok {
				data[k] = v
			}
		}
		if isJSON {
			data["stdout"] = ""
		} else if s, _ := data["stdout"].(string); idx >= 0 && idx <= len(s) {
			data["stdout"] = s[:idx]
		} else {
			data["stdout"] = ""
		}
		ret.Changes = data
	}
	return ret
}

// cmdWait is cmd.wait: nothing, unless called through mod_watch.
func cmdWait(ctx context.Context, c *Call) state.Ret {
	return state.Ret{Name: c.Name, Result: state.True}
}

// cmdScript is Salt's cmd.script state over cmd.script's execution
// function: the script comes with the job in the chunk's __files__.
func cmdScript(ctx context.Context, c *Call) state.Ret {
	k := sysKw(c.Chunk)
	name := c.Name
	source, _, err := k.str("source")
	if err != nil {
		return sysFail(name, "%v", err)
	}
	args, hasArgs, err := k.str("args")
	if err != nil {
		return sysFail(name, "%v", err)
	}
	if source == "" {
		source = name
		// Salt: "If script args present split from name and define args".
		if f := strings.SplitN(name, " ", 2); len(f) == 2 {
			source = f[0]
			if !hasArgs {
				args = f[1]
			}
		}
	}
	if c.Test {
		return cmdRunLine(ctx, c, k, "", "Command '%s' would have been executed", "")
	}
	cacheError := func(comment string) state.Ret {
		return state.Ret{Name: name, Result: state.False, Comment: comment,
			Changes: map[string]any{"pid": 0, "retcode": 1, "stdout": "", "stderr": "", "cache_error": true}}
	}
	ch := c.Chunk
	if strings.HasPrefix(source, "salt://") {
		// A script too large for the job comes by manifest (fetch.go).
		urls := []string{source}
		if i := strings.IndexByte(source, '?'); i > 0 {
			urls = append(urls, source[:i])
		}
		tooLarge := tooLargeFiles(ch)
		for _, u := range urls {
			if tooLarge[u] {
				return cacheError(tooLargeComment(u))
			}
		}
		fetched, msg := fetchSources(ctx, c, ch, urls)
		if msg != "" {
			return cacheError(msg)
		}
		ch = fetched
	}
	data, found, err := cmdSource(ch, source)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	if !found {
		return cacheError(fmt.Sprintf("Unable to cache script %s from saltenv '%s'", source, cmdEnv(c.Chunk)))
	}
	cwd, _, _ := k.str("cwd")
	dir := cwd
	if dir == "" {
		dir = os.TempDir()
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return sysFail(name, "Desired working directory \"%s\" is not available", dir)
	}
	f, err := os.CreateTemp(dir, "__salt.tmp.*"+filepath.Ext(source))
	if err != nil {
		return sysFail(name, "write script: %v", err)
	}
	path := f.Name()
	defer os.Remove(path)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o500)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sysFail(name, "write script %s: %v", path, err)
	}
	line := cmdQuote(path)
	if args != "" {
		line += " " + args
	}
	return cmdRunLine(ctx, c, k, line, "Command '%s' would have been executed", "Command '%s' run")
}

// cmdSource returns a script's content: from the chunk's __files__ for a
// salt:// URL, from the device for an absolute path.
func cmdSource(ch state.Chunk, source string) ([]byte, bool, error) {
	if strings.HasPrefix(source, "salt://") {
		files, _ := ch["__files__"].(map[string]any)
		ent, ok := files[source].(map[string]any)
		if !ok {
			// salt://x?saltenv=y is keyed as the SLS wrote it; try without the query.
			if i := strings.IndexByte(source, '?'); i > 0 {
				ent, ok = files[source[:i]].(map[string]any)
			}
		}
		if !ok {
			return nil, false, nil
		}
		switch d := ent["data"].(type) {
		case []byte:
			return d, true, nil
		case string:
			return []byte(d), true, nil
		}
		return nil, false, fmt.Errorf("__files__ entry for %s has no data", source)
	}
	if !filepath.IsAbs(source) {
		return nil, false, fmt.Errorf("Unable to cache script %s: only salt:// sources and absolute paths are supported", source)
	}
	b, err := os.ReadFile(source)
	if err != nil {
		return nil, false, nil
	}
	return b, true, nil
}

func cmdEnv(ch state.Chunk) string {
	if e := ch.Env(); e != "" {
		return e
	}
	return "base"
}

// cmdQuote is Python's shlex.quote.
func cmdQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./-_", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// cmdModWatch is cmd's mod_watch: run the command of a cmd.wait / cmd.run
// (or the script of cmd.wait_script / cmd.script) whose watched state
// changed.
func cmdModWatch(ctx context.Context, c *Call) state.Ret {
	switch sfun := watchFun(c); sfun {
	case "wait", "run", "watch":
		return cmdRun(ctx, c)
	case "wait_script", "script":
		return cmdScript(ctx, c)
	default:
		return sysFail(c.Name, "cmd.%s does not work with the watch requisite, please use cmd.wait or cmd.wait_script", sfun)
	}
}

// cmdShlex splits a line as Python's shlex.split: whitespace separates
// words, single quotes keep everything, double quotes and backslashes
// escape.
func cmdShlex(s string) []string {
	var out []string
	var b strings.Builder
	in := false
	var q rune
	for i := 0; i < len(s); i++ {
		ch := rune(s[i])
		switch {
		case q == '\'':
			if ch == '\'' {
				q = 0
			} else {
				b.WriteRune(ch)
			}
		case q == '"':
			if ch == '"' {
				q = 0
			} else if ch == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			} else {
				b.WriteRune(ch)
			}
		case ch == '\'' || ch == '"':
			q, in = ch, true
		case ch == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			in = true
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteRune(ch)
			in = true
		}
	}
	if in {
		out = append(out, b.String())
	}
	return out
}
