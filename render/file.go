package render

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"

	"github.com/halite-fleet/halite/render/sls"
)

// SaltFunc is a "salt" function with Salt's calling convention: the
// positional and keyword arguments of the call, as plain values (strings,
// numbers, bools, nil, []any, map[string]any).
type SaltFunc func(args []any, kwargs map[string]any) (any, error)

// FileLoader reads the templates a file includes or imports ({% include %},
// {% import %}, {% from ... import %}). Resolve turns the name a template
// gives, in the file called from, into the name Read reads; a resolved name
// resolves to itself.
type FileLoader interface {
	Resolve(from, name string) (string, error)
	Read(name string) ([]byte, error)
}

// Context is what one rendering of a state, top or other SLS file sees.
type Context struct {
	// Vars are the template's variables: for a state file Salt's grains,
	// pillar, opts, saltenv, sls, and SLSVars' tpldir, slspath, ...
	Vars map[string]any
	// Salt returns the function a template calls as salt['mod.fun'] or
	// salt.mod.fun; ok false: the template gets an error naming the
	// function and reason. nil: the Renderer's Options.Funcs.
	Salt func(name string) (f SaltFunc, reason string, ok bool)
	// Files reads included and imported templates; nil: relative to the
	// file's directory on disk.
	Files FileLoader
}

// Render renders src, the file called name, with c, and reads the result
// into its top-level entries; text is the rendering with the values put
// in. It is SLS for any kind of file: the injection guarantees are the
// same (doc.go), and parsed templates are cached the same way.
func (r *Renderer) Render(name string, src []byte, c Context) (text string, entries []sls.Entry, err error) {
	raw, slots, err := r.execute(name, src, c)
	if err != nil {
		return "", nil, err
	}
	if entries, err = sls.ParseYAMLValues(name, raw, slots); err != nil {
		return raw, nil, err
	}
	if text, err = slots.Text(raw); err != nil {
		return raw, nil, &Error{File: name, Stage: "yaml", Err: err}
	}
	return text, entries, nil
}

// RenderText renders src as Render does and returns the text only, for
// files that are not YAML (a file.managed source with template: jinja).
func (r *Renderer) RenderText(name string, src []byte, c Context) (string, error) {
	raw, slots, err := r.execute(name, src, c)
	if err != nil {
		return "", err
	}
	text, err := slots.Text(raw)
	if err != nil {
		return "", &Error{File: name, Stage: "jinja", Err: err}
	}
	return text, nil
}

// execute is jinja with a Context: per-call salt functions and loader.
func (r *Renderer) execute(name string, src []byte, c Context) (string, *slots, error) {
	if c.Salt == nil && c.Files == nil {
		return r.jinja(name, src, c.Vars)
	}
	tpl, err := r.template(name, src)
	if err != nil {
		return "", nil, err
	}
	slots := newSlots()
	data := make(map[string]any, len(c.Vars)+2)
	for k, v := range c.Vars {
		data[k] = v
	}
	data["salt"] = r.salt
	if c.Salt != nil {
		data["salt"] = &saltLookup{find: c.Salt}
	}
	data[slotsKey] = slots
	var loader loaders.Loader = fileLoader{fl: c.Files, from: name}
	if c.Files == nil {
		// As r.template's own: relative to the file's directory.
		loader = nil
	}
	var out bytes.Buffer
	if err := r.run(tpl, &out, data, loader); err != nil {
		return "", nil, &Error{File: name, Line: jinjaErrLine(err), Stage: "jinja", Err: cleanErr(err)}
	}
	return out.String(), slots, nil
}

// run executes tpl as exec.Template.Execute does, with includes and
// imports read through loader when it is not nil.
func (r *Renderer) run(tpl *exec.Template, w io.Writer, data map[string]any, loader loaders.Loader) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("template engine crashed: %v", p)
		}
	}()
	if loader == nil {
		return tpl.Execute(w, exec.NewContext(data))
	}
	rd := exec.NewRenderer(&exec.Environment{
		Tests:             r.env.Tests,
		Filters:           r.env.Filters,
		ControlStructures: r.env.ControlStructures,
		Context:           r.env.Context.Inherit().Update(exec.NewContext(data)),
		Methods:           r.env.Methods,
	}, w, r.cfg, slotLoader{inner: loader, cfg: r.cfg}, tpl)
	return rd.Execute()
}

// fileLoader is a FileLoader as gonja's loaders.Loader, relative to from.
type fileLoader struct {
	fl   FileLoader
	from string
}

func (l fileLoader) Resolve(name string) (string, error) { return l.fl.Resolve(l.from, name) }

func (l fileLoader) Read(name string) (io.Reader, error) {
	res, err := l.fl.Resolve(l.from, name)
	if err != nil {
		return nil, err
	}
	b, err := l.fl.Read(res)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

func (l fileLoader) Inherit(from string) (loaders.Loader, error) {
	res, err := l.fl.Resolve(l.from, from)
	if err != nil {
		return nil, err
	}
	return fileLoader{fl: l.fl, from: res}, nil
}

// saltLookup is the "salt" object of a rendering with per-call functions:
// salt['mod.fun'] and salt.mod.fun. A function it does not offer is still
// found, as one that fails with the reason, so that the template's error
// names it and its line instead of calling nothing.
type saltLookup struct {
	find func(name string) (SaltFunc, string, bool)
}

// saltModule is salt.mod, for salt.mod.fun.
type saltModule struct {
	l   *saltLookup
	mod string
}

func (s *saltLookup) fn(name string) *exec.Value {
	f, reason, ok := s.find(name)
	if !ok {
		if reason == "" {
			reason = "no such function"
		}
		return exec.AsValue(func(*exec.VarArgs) (any, error) {
			return nil, fmt.Errorf("salt['%s'] %s", name, reason)
		})
	}
	return exec.AsValue(func(va *exec.VarArgs) (any, error) {
		args := make([]any, len(va.Args))
		for i, a := range va.Args {
			args[i] = plain(a.Interface(), 0)
		}
		var kw map[string]any
		if len(va.KwArgs) > 0 {
			kw = make(map[string]any, len(va.KwArgs))
			for k, a := range va.KwArgs {
				kw[k] = plain(a.Interface(), 0)
			}
		}
		v, err := f(args, kw)
		if err != nil {
			return nil, fmt.Errorf("salt['%s']: %w", name, err)
		}
		return v, nil
	})
}

func (s *saltLookup) GetItem(key any) (*exec.Value, bool) {
	name, ok := key.(string)
	if !ok {
		return exec.AsValue(fmt.Errorf("salt[%v]: a function name is a string", key)), false
	}
	if !strings.Contains(name, ".") {
		return exec.AsValue(&saltModule{l: s, mod: name}), true
	}
	return s.fn(name), true
}

func (s *saltLookup) GetAttribute(name string) (*exec.Value, bool) {
	return exec.AsValue(&saltModule{l: s, mod: name}), true
}

func (m *saltModule) GetAttribute(name string) (*exec.Value, bool) {
	return m.l.fn(m.mod + "." + name), true
}

func (m *saltModule) GetItem(key any) (*exec.Value, bool) {
	name, ok := key.(string)
	if !ok {
		return exec.AsValue(fmt.Errorf("salt.%s[%v]: a function name is a string", m.mod, key)), false
	}
	return m.l.fn(m.mod + "." + name), true
}

// SLSVars are the variables Salt gives a state file besides grains, pillar,
// opts and saltenv (salt/utils/templates.py generate_sls_context): for the
// file at path (relative to its file root, e.g. "web/init.sls") rendered as
// SLS sls ("web"), and its full path on disk, tplpath.
func SLSVars(sls, path, tplpath string) map[string]any {
	slspath := strings.TrimRight(strings.ReplaceAll(sls, ".", "/"), "/")
	out := map[string]any{"sls": sls}
	if path != "" {
		tpl := path
		switch {
		case sls == "":
			if i := strings.LastIndexByte(tpl, '/'); i >= 0 {
				tpl = tpl[i+1:]
			}
		case strings.HasSuffix(tpl, slspath+".sls"):
			tpl = tpl[len(tpl)-len(slspath)-4:]
		case strings.HasSuffix(tpl, slspath+"/init.sls"):
			tpl = tpl[len(tpl)-len(slspath)-9:]
		}
		slspath = ""
		if i := strings.LastIndexByte(tpl, '/'); i >= 0 {
			slspath = tpl[:i]
		}
		tpldir := slspath
		if tpldir == "" {
			tpldir = "."
		}
		out["tplpath"] = tplpath
		out["tplfile"] = tpl
		out["tpldir"] = tpldir
		out["tpldot"] = strings.ReplaceAll(slspath, "/", ".")
	}
	out["slspath"] = slspath
	out["slsdotpath"] = strings.ReplaceAll(slspath, "/", ".")
	out["slscolonpath"] = strings.ReplaceAll(slspath, "/", ":")
	out["sls_path"] = strings.ReplaceAll(slspath, "/", "_")
	return out
}
