package fileserver

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// MaxJobBytes is the most file data Inline puts into one job, all chunks
// together.
const MaxJobBytes = 3 << 20

// The chunk keys Inline fills (docs: STATES.md, "__state__").
const (
	// KeyFiles: {"salt://path": {"data": []byte, "sha256": hex}} for each
	// salt:// file the state needs, keyed by the URL the state names it
	// with (file.managed, cmd.script, archive.extracted: the source as
	// written; file.recurse: CreateURL(path, saltenv) of each file, the
	// URLs Salt's file.recurse builds). A file too large for the job (over
	// MaxFileBytes, or past MaxJobBytes) and not templated is
	// {"manifest": protocol.Manifest.Any(), "sha256": hex} instead, when
	// the server has Manifests: the agent fetches it by chunks.
	KeyFiles = "__files__"
	// KeyDirs: file.recurse only: CreateURL(path, saltenv) of the source
	// directory chosen and of every directory under it.
	KeyDirs = "__dirs__"
	// KeyMissing: the salt:// sources, as written, that the file server
	// does not hold (or refuses), in the order tried. The state fails with
	// Salt's comment when it needs one.
	KeyMissing = "__files_missing__"
	// KeyTooLarge: the URLs (as keyed in KeyFiles) of files over
	// MaxFileBytes, or that would take the job over MaxJobBytes; the state
	// fails, naming them.
	KeyTooLarge = "__files_too_large__"
	// KeyErrors: {"url": "message"} for a file that could not be read or
	// whose template failed to render: the state fails with the message
	// as its comment (what Salt's file.get_managed returns).
	KeyErrors = "__files_errors__"
)

// TemplateFunc renders a salt:// file that a state gives "template:
// jinja": path is the file on the master's disk, src its bytes, ctx the
// variables Salt's file.get_managed passes (name, source, user, group,
// mode, attrs, saltenv, then the state's defaults, then its context on
// top). The caller adds what it knows of the device (grains, pillar, salt,
// opts). For a file.managed "contents" there is no file: path is "" (do
// not cache a parsed template by it) and ctx holds saltenv, defaults and
// context (file.apply_template_on_contents).
type TemplateFunc func(path string, src []byte, ctx map[string]any) ([]byte, error)

// Inline fills, in place, each chunk that needs salt:// files with them:
// file.managed and cmd.script "source" (and file.managed's "source_hash"
// when it is a salt:// URL; cmd.script without a source takes the first
// word of its name, as Salt's), archive.extracted "source", file.recurse
// "source" (a directory). A source list is tried in order, as Salt's
// file.source_list: the first salt:// source found is inlined and those
// before it are listed missing; http(s)://, ftp:// and file:// sources and
// local paths are left to the agent. A file.managed or cmd.script with
// "template: jinja" gets its file rendered by render, with the chunk's
// context; so does its "contents" (a string or list of strings, given no
// source): Inline replaces it with the rendered text, or puts the render
// error in KeyErrors under "contents". env is the saltenv of chunks without "__env__"; a URL's
// "?saltenv=" wins over both.
//
// Inline only sets the keys above on a chunk (and deletes stale ones) and
// replaces a rendered "contents", it never changes a value inside one: a caller that shares chunks
// between devices (a compile cache) passes shallow copies. Inlined bytes
// are shared and must not be modified. Call it once per chunk: a
// rendered "contents" would be rendered again.
//
// What a device must learn of (missing, too large, render errors) is put
// in its chunk; the error returned joins only the master's own read
// errors (a permission denied, an I/O error), for its log: the chunks are
// filled all the same, and the job may go out.
func (s *Server) Inline(chunks []state.Chunk, env string, render TemplateFunc) error {
	in := &inliner{s: s, render: render, left: MaxJobBytes}
	for _, c := range chunks {
		if c == nil {
			continue
		}
		for _, k := range []string{KeyFiles, KeyDirs, KeyMissing, KeyTooLarge, KeyErrors} {
			delete(c, k)
		}
		cenv := c.Env()
		if cenv == "" {
			cenv = defaultEnv(env)
		}
		o := &out{}
		switch c.State() + "." + c.Fun() {
		case "file.managed":
			if c["source"] == nil {
				in.contents(c, cenv, o)
				break
			}
			in.source(c, cenv, o, true)
			if h, ok := c["source_hash"].(string); ok && strings.HasPrefix(h, Scheme) {
				in.one(c, cenv, h, o, false)
			}
		case "cmd.script":
			if c["source"] == nil {
				// Salt's cmd.script: no source, the name is the source,
				// args split from it (the agent's module does the same).
				if name, _, _ := strings.Cut(c.Name(), " "); strings.HasPrefix(name, Scheme) {
					in.one(c, cenv, name, o, true)
				}
				break
			}
			in.source(c, cenv, o, true)
		case "archive.extracted":
			in.source(c, cenv, o, false)
		case "file.recurse":
			in.recurse(c, cenv, o)
		default:
			continue
		}
		o.put(c)
	}
	return errors.Join(in.errs...)
}

type inliner struct {
	s      *Server
	render TemplateFunc
	left   int64 // bytes the job may still take
	errs   []error
}

// out is what Inline found for one chunk.
type out struct {
	files    map[string]any
	dirs     []string
	missing  []string
	tooLarge []string
	errors   map[string]any
}

func (o *out) put(c state.Chunk) {
	if o.files != nil {
		c[KeyFiles] = o.files
	}
	if o.dirs != nil {
		c[KeyDirs] = o.dirs
	}
	if o.missing != nil {
		c[KeyMissing] = o.missing
	}
	if o.tooLarge != nil {
		c[KeyTooLarge] = o.tooLarge
	}
	if o.errors != nil {
		c[KeyErrors] = o.errors
	}
}

func (o *out) add(u string, data []byte, sum string) {
	if o.files == nil {
		o.files = map[string]any{}
	}
	o.files[u] = map[string]any{"data": data, "sha256": sum}
}

func (o *out) fail(u, msg string) {
	if o.errors == nil {
		o.errors = map[string]any{}
	}
	o.errors[u] = msg
}

// sources are a state's "source" as a list of URLs: a string, or a list
// of strings and one-key {url: hash} maps (file.source_list; a map of
// another size is skipped, as Salt does).
func sources(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []string:
		return v
	case []any:
		var out []string
		for _, x := range v {
			switch x := x.(type) {
			case string:
				out = append(out, x)
			case map[string]any:
				if len(x) == 1 {
					for k := range x {
						out = append(out, k)
					}
				}
			}
		}
		return out
	}
	return nil
}

// source inlines the first salt:// source of c found, rendering it when
// templated is true and c says "template".
func (in *inliner) source(c state.Chunk, env string, o *out, templated bool) {
	for _, u := range sources(c["source"]) {
		if !strings.HasPrefix(u, Scheme) {
			continue // the agent's: http, ftp, file, a local path
		}
		if in.one(c, env, u, o, templated) {
			return
		}
	}
}

// one inlines the salt:// file u and says whether it exists (whether a
// source list stops at it).
func (in *inliner) one(c state.Chunk, env, u string, o *out, templated bool) bool {
	rel, senv, _ := resolveURL(u, env)
	return in.file(c, u, rel, senv, c["name"], o, templated)
}

// file inlines rel of senv under the key u; name is the state's name as
// a template sees it.
func (in *inliner) file(c state.Chunk, u, rel, senv string, name any, o *out, templated bool) bool {
	f, data, err := in.s.read(u, rel, senv, MaxFileBytes)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrRefused):
		o.missing = append(o.missing, u)
		return false
	case errors.Is(err, ErrTooLarge):
		if !in.manifest(c, u, f.Path, o, templated) {
			o.tooLarge = append(o.tooLarge, u)
		}
		return true
	case err != nil:
		in.errs = append(in.errs, err)
		o.fail(u, err.Error())
		return true
	}
	sum := f.SHA256
	if tmpl, _ := c["template"].(string); templated && tmpl != "" {
		if data, err = in.template(c, tmpl, u, senv, name, f.Path, data); err != nil {
			o.fail(u, err.Error())
			return true
		}
		if len(data) > MaxFileBytes {
			o.tooLarge = append(o.tooLarge, u)
			return true
		}
		sum = sumHex(data)
	}
	if int64(len(data)) > in.left {
		if !in.manifest(c, u, f.Path, o, templated) {
			o.tooLarge = append(o.tooLarge, u)
		}
		return true
	}
	in.left -= int64(len(data))
	o.add(u, data, sum)
	return true
}

// manifest puts the file at path into o as a manifest (KeyFiles), if the
// server indexes files for chunked transfer and the state does not render
// it (a rendered file is per device and is no file on disk).
func (in *inliner) manifest(c state.Chunk, u, path string, o *out, templated bool) bool {
	if in.s.Manifests == nil || path == "" {
		return false
	}
	if tmpl, _ := c["template"].(string); templated && tmpl != "" {
		return false
	}
	m, err := in.s.Manifests(path)
	if err != nil {
		in.errs = append(in.errs, err)
		return false
	}
	if o.files == nil {
		o.files = map[string]any{}
	}
	o.files[u] = map[string]any{"manifest": m.Any(), "sha256": hex.EncodeToString(m.SHA256)}
	return true
}

// template renders a source as Salt's file.get_managed does.
func (in *inliner) template(c state.Chunk, tmpl, u, senv string, name any, p string, src []byte) ([]byte, error) {
	if tmpl != "jinja" {
		// Salt knows others (mako, py, ...); Halite renders only Jinja.
		return nil, fmt.Errorf("Specified template format %s is not supported", tmpl)
	}
	if in.render == nil {
		return nil, fmt.Errorf("Specified template format %s is not supported", tmpl)
	}
	ctx := map[string]any{"saltenv": senv, "source": u, "name": name}
	for _, k := range []string{"user", "group", "mode", "attrs"} {
		ctx[k] = c[k]
	}
	// defaults, updated with context: a shallow update, as Salt's.
	for _, k := range []string{"defaults", "context"} {
		if m, ok := c[k].(map[string]any); ok {
			for k, v := range m {
				ctx[k] = v
			}
		}
	}
	return in.render(p, src, ctx)
}

// recurse inlines file.recurse's directory: its first salt:// source
// that is a directory, with every file under it.
func (in *inliner) recurse(c state.Chunk, env string, o *out) {
	for _, u := range sources(c["source"]) {
		if !strings.HasPrefix(u, Scheme) {
			continue // Salt's file.recurse refuses it: the agent says so
		}
		u = strings.TrimRight(u, "/")
		rel, senv, _ := resolveURL(u, env)
		files, dirs, err := in.s.listDir(u, rel, senv)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrRefused):
			o.missing = append(o.missing, u)
			continue
		case err != nil:
			in.errs = append(in.errs, err)
			o.fail(u, err.Error())
			return
		}
		base := ""
		if strings.Trim(rel, "/") != "" {
			base, _ = cleanRel(rel)
		}
		o.dirs = append(o.dirs, CreateURL(base, senv))
		for _, d := range dirs {
			o.dirs = append(o.dirs, CreateURL(d, senv))
		}
		for _, f := range files {
			// A template sees each file's own destination as its name,
			// as file.recurse's calls of file.managed give it.
			name := c["name"]
			if n, ok := name.(string); ok {
				name = strings.TrimRight(n, "/") + "/" + strings.TrimPrefix(f[len(base):], "/")
			}
			in.file(c, CreateURL(f, senv), f, senv, name, o, true)
		}
		return
	}
}

// contents renders file.managed's "contents" when the state gives
// "template" (salt/states/file.py managed: the parts' lines joined, each
// ending in a newline unless contents_newline is false, then
// file.apply_template_on_contents with defaults updated by context and
// saltenv).
func (in *inliner) contents(c state.Chunk, env string, o *out) {
	tmpl, _ := c["template"].(string)
	if tmpl == "" {
		return
	}
	var parts []string
	switch v := c["contents"].(type) {
	case string:
		parts = []string{v}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return // the agent says the SLS is malformed
			}
			parts = append(parts, s)
		}
	default:
		return
	}
	var b strings.Builder
	for _, p := range parts {
		for _, line := range splitLines(p) {
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	text := b.String()
	if nl, ok := c["contents_newline"].(bool); ok && !nl {
		text = strings.TrimRight(strings.TrimRight(text, "\n"), "\r")
	}
	if tmpl != "jinja" || in.render == nil {
		o.fail("contents", fmt.Sprintf("Specified template format %s is not supported", tmpl))
		return
	}
	ctx := map[string]any{"saltenv": env}
	for _, k := range []string{"defaults", "context"} {
		if m, ok := c[k].(map[string]any); ok {
			for k, v := range m {
				ctx[k] = v
			}
		}
	}
	out, err := in.render("", []byte(text), ctx)
	if err != nil {
		o.fail("contents", err.Error())
		return
	}
	c["contents"] = string(out)
}

// splitLines is Python's str.splitlines for \n, \r\n and \r.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
