package state

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/render/sls"
	"github.com/halite-fleet/halite/state"
)

// Masterless states: an agent with file_client: local (halite-call
// --local) compiles its own file_roots (default /srv/halite, like the
// master's) into the __state__ the master would send. The default build
// reads plain YAML only; a file with Jinja in it is refused, naming it,
// unless the build has a renderer (-tags reactor: funcs_jinja.go).
//
// The agent's own compiler is deliberately small (package state's full
// compiler would cost the armv7 agent about 130 KB): localCompile does what
// plain SLS files on a device need: top.sls with glob targets, include (absolute and
// relative), several functions under one ID, names, the requisite _in
// forms, order (numbers, first, last) and definition order. It does not do
// extend, use or exclude (refused, naming the file and line) or Salt's
// verify_high messages; the master's compile does them all.

// jinjaRender renders a Jinja SLS; nil in the default build.
var jinjaRender func(h Host, file string, src []byte, vars map[string]any) (string, error)

// maxSLSBytes bounds one SLS file read on the device.
const maxSLSBytes = 4 << 20

// fileRoots reads the file_roots option: {env: [dir, ...]}.
func fileRoots(o map[string]any) map[string][]string {
	out := map[string][]string{}
	switch m := o["file_roots"].(type) {
	case map[string]any:
		for env, v := range m {
			for _, d := range reqList(v) {
				if s, ok := d.(string); ok {
					out[env] = append(out[env], s)
				}
			}
		}
	case map[string][]string:
		for env, v := range m {
			out[env] = append(out[env], v...)
		}
	}
	if len(out) == 0 {
		out["base"] = []string{"/srv/halite"}
	}
	return out
}

// modsOf reads the SLS names: the first argument or mods=, a
// comma-separated string or a list.
func modsOf(args []any, kw map[string]any) []string {
	v := kw["mods"]
	if len(args) > 0 {
		v = args[0]
	}
	var out []string
	for _, m := range reqList(v) {
		for _, s := range strings.Split(fmt.Sprint(m), ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// compileLocal compiles the local file_roots for mode ("sls" or
// "highstate"/"apply"/"test" with or without mods) into __state__.
func compileLocal(h Host, o map[string]any, args []any, kw map[string]any, mode string) (map[string]any, error) {
	roots := fileRoots(o)
	env := "base"
	if s, ok := kw["saltenv"].(string); ok && s != "" {
		env = s
	}
	mods := modsOf(args, kw)
	st := map[string]any{"saltenv": env}
	c := &localCompiler{h: h, roots: roots, seen: map[string]bool{}}
	if len(mods) == 0 && mode != "sls" {
		top, errs := c.top(env)
		topOut := map[string]any{}
		for e, l := range top {
			topOut[e] = toAnyList(l)
		}
		st["top"] = topOut
		if len(errs) > 0 {
			st["errors"] = toAnyList(errs)
			return st, nil
		}
		for _, e := range sortedKeys(top) {
			for _, m := range top[e] {
				c.load(e, m)
			}
		}
	} else {
		st["mods"] = toAnyList(mods)
		for _, m := range mods {
			c.load(env, m)
		}
	}
	if len(c.errs) > 0 {
		st["errors"] = toAnyList(c.errs)
		return st, nil
	}
	st["high"] = c.high
	st["low"] = c.lowState()
	return st, nil
}

func toAnyList(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// localCompiler is the minimal compiler's state.
type localCompiler struct {
	h     Host
	roots map[string][]string
	seen  map[string]bool
	errs  []string
	high  map[string]any
	ids   []string // definition order of the IDs
	sls   map[string]string
	env   map[string]string
}

// find returns the SLS file of name in env: name/as/path.sls or
// name/as/path/init.sls under the first root that has it.
func (c *localCompiler) find(env, name string) (string, error) {
	rel := strings.ReplaceAll(name, ".", "/")
	if strings.Contains(name, "..") || strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("Specified SLS %s in saltenv %s is not available on the salt master or through a configured fileserver", name, env)
	}
	for _, root := range c.roots[env] {
		for _, p := range []string{rel + ".sls", filepath.Join(rel, "init.sls")} {
			f := filepath.Join(root, p)
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				return f, nil
			}
		}
	}
	return "", fmt.Errorf("No matching sls found for '%s' in env '%s'", name, env)
}

// read reads and renders one file into its entries.
func (c *localCompiler) read(file, env, name string) ([]sls.Entry, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxSLSBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxSLSBytes)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	text := string(src)
	if i := jinjaAt(text); i >= 0 {
		if jinjaRender == nil {
			line := 1 + strings.Count(text[:i], "\n")
			snip := text[i:]
			if len(snip) > 2 {
				snip = snip[:2]
			}
			return nil, fmt.Errorf("%s:%d: Jinja needs the -tags reactor build of halite-call; this SLS uses %s ... (plain YAML works in every build)", file, line, snip)
		}
		var grains map[string]any
		if c.h != nil {
			grains = c.h.Grains()
		}
		text, err = jinjaRender(c.h, file, src, map[string]any{"grains": grains, "pillar": map[string]any{}, "saltenv": env, "sls": name, "env": env})
		if err != nil {
			return nil, err
		}
	}
	return sls.ParseYAML(file, text)
}

// jinjaAt is where the first Jinja marker is, or -1: a file with none of
// {%, {{, {# is plain YAML.
func jinjaAt(s string) int {
	at := -1
	for _, m := range []string{"{%", "{{", "{#"} {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// top reads top.sls of env (and of every env it names) and matches its
// targets against the device: glob and list targets.
func (c *localCompiler) top(env string) (map[string][]string, []string) {
	out := map[string][]string{}
	file := ""
	for _, root := range c.roots[env] {
		f := filepath.Join(root, "top.sls")
		if _, err := os.Stat(f); err == nil {
			file = f
			break
		}
	}
	if file == "" {
		return out, nil
	}
	entries, err := c.read(file, env, "top")
	if err != nil {
		return nil, []string{err.Error()}
	}
	id := ""
	if c.h != nil {
		id = c.h.ID()
	}
	for _, e := range entries {
		targets, ok := e.Value.(map[string]any)
		if !ok {
			return nil, []string{fmt.Sprintf("%s:%d: top file environment %s is not a mapping of targets", file, e.Line, e.ID)}
		}
		for _, tgt := range sortedKeys(targets) {
			typ := "glob"
			var list []string
			for _, item := range reqList(targets[tgt]) {
				switch x := item.(type) {
				case string:
					list = append(list, x)
				case map[string]any:
					if m, ok := x["match"].(string); ok {
						typ = m
					}
				}
			}
			matched := false
			switch typ {
			case "glob":
				matched = fnmatch(id, tgt)
			case "list":
				for _, s := range strings.Split(tgt, ",") {
					if strings.TrimSpace(s) == id {
						matched = true
					}
				}
			default:
				return nil, []string{fmt.Sprintf("%s: match type %s needs package state's top file matcher (minimal masterless compiler)", file, typ)}
			}
			if matched {
				out[e.ID] = append(out[e.ID], list...)
			}
		}
	}
	return out, nil
}

// load reads one SLS and its includes into the high data.
func (c *localCompiler) load(env, name string) {
	key := env + ":" + name
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	file, err := c.find(env, name)
	if err != nil {
		c.errs = append(c.errs, err.Error())
		return
	}
	entries, err := c.read(file, env, name)
	if err != nil {
		// Salt's render_state message; the error names file and line.
		c.errs = append(c.errs, fmt.Sprintf("Rendering SLS '%s:%s' failed: %v", env, name, err))
		return
	}
	if c.high == nil {
		c.high, c.sls, c.env = map[string]any{}, map[string]string{}, map[string]string{}
	}
	for _, e := range entries {
		switch e.ID {
		case "include":
			for _, inc := range reqList(e.Value) {
				s, ok := inc.(string)
				if !ok {
					continue
				}
				if strings.HasPrefix(s, ".") {
					base := name
					if !strings.HasSuffix(file, string(filepath.Separator)+"init.sls") {
						if i := strings.LastIndexByte(base, '.'); i >= 0 {
							base = base[:i]
						} else {
							base = ""
						}
					}
					s = strings.TrimPrefix(base+s, ".")
				}
				c.load(env, s)
			}
			continue
		case "extend", "exclude":
			c.errs = append(c.errs, fmt.Sprintf("%s:%d: %s is not supported by the agent's own (masterless) compiler; without --local, the master compiles it", file, e.Line, e.ID))
			continue
		}
		body, ok := e.Value.(map[string]any)
		if !ok {
			if s, isStr := e.Value.(string); isStr && strings.Contains(s, ".") {
				// "id: pkg.installed" short form
				body = map[string]any{s: []any{}}
			} else {
				c.errs = append(c.errs, fmt.Sprintf("ID %s in SLS %s is not a dictionary", e.ID, name))
				continue
			}
		}
		if _, dup := c.high[e.ID]; dup {
			c.errs = append(c.errs, fmt.Sprintf("Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting ID is '%s' and is found in SLS '%s:%s' and SLS '%s:%s'", e.ID, c.env[e.ID], c.sls[e.ID], env, name))
			continue
		}
		c.high[e.ID] = body
		c.ids = append(c.ids, e.ID)
		c.sls[e.ID], c.env[e.ID] = name, env
	}
}

// lowState turns the high data into ordered chunks (compile_high_data,
// requisite_in and order_chunks, minimally).
func (c *localCompiler) lowState() []any {
	var chunks []state.Chunk
	for n, id := range c.ids {
		body := c.high[id].(map[string]any)
		for _, key := range sortedKeys(body) {
			mod, fun, _ := strings.Cut(key, ".")
			if strings.HasPrefix(mod, "__") {
				continue
			}
			args := map[string]any{}
			for _, a := range reqList(body[key]) {
				switch x := a.(type) {
				case string:
					fun = x
				case map[string]any:
					for k, v := range x {
						args[k] = v
					}
				}
			}
			base := state.Chunk{"state": mod, "fun": fun, "__id__": id, "__sls__": c.sls[id], "__env__": c.env[id], "name": id, "order": 10000 + n}
			for k, v := range args {
				if k != "names" {
					base[k] = v
				}
			}
			names := reqList(args["names"])
			if len(names) == 0 {
				chunks = append(chunks, base)
				continue
			}
			for _, nm := range names {
				ch := make(state.Chunk, len(base))
				for k, v := range base {
					ch[k] = v
				}
				if m, ok := nm.(map[string]any); ok {
					for k, v := range m {
						ch["name"] = k
						for _, a := range reqList(v) {
							if am, ok := a.(map[string]any); ok {
								for k2, v2 := range am {
									ch[k2] = v2
								}
							}
						}
					}
				} else {
					ch["name"] = fmt.Sprint(nm)
				}
				chunks = append(chunks, ch)
			}
		}
	}
	// The _in forms: "A require_in B" is "B require A".
	for _, ch := range chunks {
		for _, kind := range []string{"require", "watch", "onchanges", "onfail", "prereq"} {
			for _, req := range reqList(ch[kind+"_in"]) {
				key, val, ok := reqKV(req)
				if !ok {
					continue
				}
				for _, t := range chunks {
					if reqMatches(key, val, t) {
						t[kind] = append(append([]any(nil), reqList(t[kind])...), map[string]any{ch.State(): ch.ID()})
					}
				}
			}
		}
	}
	// order: numbers first, then the rest in definition order, "last"
	// at the end (Salt's order_chunks with state_auto_order).
	rank := func(ch state.Chunk) int {
		switch v := ch["order"].(type) {
		case string:
			if v == "first" {
				return -1 << 30
			}
			if v == "last" {
				return 1 << 30
			}
		default:
			if n, ok := toInt(v); ok {
				return n
			}
		}
		return 1 << 29
	}
	sort.SliceStable(chunks, func(i, j int) bool { return rank(chunks[i]) < rank(chunks[j]) })
	out := make([]any, len(chunks))
	for i, ch := range chunks {
		out[i] = map[string]any(ch)
	}
	return out
}
