package fileserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/state"
)

func chunk(stateFun string, kv ...any) state.Chunk {
	mod, fun, _ := strings.Cut(stateFun, ".")
	c := state.Chunk{"state": mod, "fun": fun, "__id__": "id", "__sls__": "sls", "name": "/etc/x"}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

func files(kv ...string) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = map[string]any{"data": []byte(kv[i+1]), "sha256": hexSum(kv[i+1])}
	}
	return m
}

// inlined is the part of a chunk Inline fills.
func inlined(c state.Chunk) map[string]any {
	out := map[string]any{}
	for _, k := range []string{KeyFiles, KeyDirs, KeyMissing, KeyTooLarge, KeyErrors} {
		if v, ok := c[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestInline: the salt:// files each state needs, as STATES.md sets out;
// a source list behaves as Salt's file.source_list (salt/modules/file.py):
// the first source that exists is used, salt:// ones looked up on the
// master, the others (http, ftp, file, a local path) left to the agent.
func TestInline(t *testing.T) {
	base := tree(t, map[string]string{
		"motd": "hello", "dev-only": "", "b/x.conf": "x", "script.sh": "echo hi", "a.tgz": "tgz",
		"motd.sha256": "abc", "weird?name": "w",
	})
	dev := tree(t, map[string]string{"motd": "dev motd"})
	s := New(map[string][]string{"base": {base}, "dev": {dev}})
	for _, tc := range []struct {
		name string
		in   state.Chunk
		want map[string]any
	}{
		{"managed", chunk("file.managed", "source", "salt://motd"),
			map[string]any{KeyFiles: files("salt://motd", "hello")}},
		{"managed missing", chunk("file.managed", "source", "salt://nope"),
			map[string]any{KeyMissing: []string{"salt://nope"}}},
		{"managed list: first found", chunk("file.managed", "source", []any{
			"salt://nope", "https://example.com/motd", "salt://b/x.conf", "salt://motd"}),
			map[string]any{KeyMissing: []string{"salt://nope"}, KeyFiles: files("salt://b/x.conf", "x")}},
		{"managed list of maps", chunk("file.managed", "source", []any{
			map[string]any{"salt://nope": "sha256=00"}, map[string]any{"salt://motd": ""},
			map[string]any{"salt://a": "", "salt://b": ""}}),
			map[string]any{KeyMissing: []string{"salt://nope"}, KeyFiles: files("salt://motd", "hello")}},
		{"managed []string", chunk("file.managed", "source", []string{"salt://nope", "salt://motd"}),
			map[string]any{KeyMissing: []string{"salt://nope"}, KeyFiles: files("salt://motd", "hello")}},
		{"saltenv query", chunk("file.managed", "source", "salt://motd?saltenv=dev"),
			map[string]any{KeyFiles: files("salt://motd?saltenv=dev", "dev motd")}},
		{"chunk env", chunk("file.managed", "source", "salt://motd", "__env__", "dev"),
			map[string]any{KeyFiles: files("salt://motd", "dev motd")}},
		{"no base fallback", chunk("file.managed", "source", "salt://b/x.conf", "__env__", "dev"),
			map[string]any{KeyMissing: []string{"salt://b/x.conf"}}},
		{"escaped name", chunk("file.managed", "source", "salt://|weird?name"),
			map[string]any{KeyFiles: files("salt://|weird?name", "w")}},
		{"source_hash file", chunk("file.managed", "source", "https://example.com/motd", "source_hash", "salt://motd.sha256"),
			map[string]any{KeyFiles: files("salt://motd.sha256", "abc")}},
		{"escape refused", chunk("file.managed", "source", "salt://../etc/passwd"),
			map[string]any{KeyMissing: []string{"salt://../etc/passwd"}}},
		{"http only", chunk("file.managed", "source", "http://example.com/x"), map[string]any{}},
		{"file only", chunk("file.managed", "source", "file:///etc/motd"), map[string]any{}},
		{"contents", chunk("file.managed", "contents", "salt://motd"), map[string]any{}},
		{"wrong type", chunk("file.managed", "source", 42), map[string]any{}},
		{"script", chunk("cmd.script", "source", "salt://script.sh"),
			map[string]any{KeyFiles: files("salt://script.sh", "echo hi")}},
		{"script by name", chunk("cmd.script", "name", "salt://script.sh one two"),
			map[string]any{KeyFiles: files("salt://script.sh", "echo hi")}},
		{"script by local name", chunk("cmd.script", "name", "/bin/true"), map[string]any{}},
		{"archive", chunk("archive.extracted", "source", "salt://a.tgz", "template", "jinja"),
			map[string]any{KeyFiles: files("salt://a.tgz", "tgz")}},
		{"other state", chunk("cmd.run", "source", "salt://motd"), map[string]any{}},
		{"stale keys", chunk("file.managed", "source", "salt://motd", KeyMissing, []string{"x"}, KeyErrors, map[string]any{}),
			map[string]any{KeyFiles: files("salt://motd", "hello")}},
		{"stale keys, other state", chunk("test.nop", KeyFiles, map[string]any{"salt://x": "y"}), map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Inline([]state.Chunk{tc.in}, "base", nil); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, inlined(tc.in)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestInlineTemplate: "template: jinja" renders the source on the master
// with Salt's file.get_managed context (name, source, user, group, mode,
// attrs, saltenv; defaults updated by context), and inlines the result
// with its own hash; another engine, or a failing render, fails that
// state with a message.
func TestInlineTemplate(t *testing.T) {
	root := tree(t, map[string]string{"motd.j2": "Hello {{ who }}", "bad.j2": "{% if %}", "big.j2": "x"})
	s := New(map[string][]string{"base": {root}})
	var gotCtx map[string]any
	var gotPath string
	render := func(path string, src []byte, ctx map[string]any) ([]byte, error) {
		if string(src) == "{% if %}" {
			return nil, errors.New("Jinja syntax error: Expected an expression; line 1")
		}
		if string(src) == "x" {
			return []byte(strings.Repeat("x", MaxFileBytes+1)), nil
		}
		gotCtx, gotPath = ctx, path
		return []byte(strings.ReplaceAll(string(src), "{{ who }}", fmt.Sprint(ctx["who"]))), nil
	}
	c := chunk("file.managed", "source", "salt://motd.j2", "template", "jinja", "user", "root", "mode", "0644",
		"defaults", map[string]any{"who": "defaults", "other": 1},
		"context", map[string]any{"who": "context"})
	if err := s.Inline([]state.Chunk{c}, "base", render); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]any{KeyFiles: files("salt://motd.j2", "Hello context")}, inlined(c)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	wantCtx := map[string]any{"name": "/etc/x", "source": "salt://motd.j2", "user": "root", "group": nil,
		"mode": "0644", "attrs": nil, "saltenv": "base", "who": "context", "other": 1}
	if d := cmp.Diff(wantCtx, gotCtx); d != "" {
		t.Errorf("template context (-want +got):\n%s", d)
	}
	if gotPath != filepath.Join(root, "motd.j2") {
		t.Errorf("template path = %q", gotPath)
	}

	for _, tc := range []struct {
		name   string
		c      state.Chunk
		render TemplateFunc
		want   map[string]any
	}{
		{"mako", chunk("file.managed", "source", "salt://motd.j2", "template", "mako"), render,
			map[string]any{KeyErrors: map[string]any{"salt://motd.j2": "Specified template format mako is not supported"}}},
		{"no renderer", chunk("file.managed", "source", "salt://motd.j2", "template", "jinja"), nil,
			map[string]any{KeyErrors: map[string]any{"salt://motd.j2": "Specified template format jinja is not supported"}}},
		{"render error", chunk("cmd.script", "source", "salt://bad.j2", "template", "jinja"), render,
			map[string]any{KeyErrors: map[string]any{"salt://bad.j2": "Jinja syntax error: Expected an expression; line 1"}}},
		{"rendered too large", chunk("file.managed", "source", "salt://big.j2", "template", "jinja"), render,
			map[string]any{KeyTooLarge: []string{"salt://big.j2"}}},
		{"missing", chunk("file.managed", "source", "salt://nope.j2", "template", "jinja"), render,
			map[string]any{KeyMissing: []string{"salt://nope.j2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Inline([]state.Chunk{tc.c}, "base", tc.render); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, inlined(tc.c)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestInlineRecurse: file.recurse gets every file under its directory,
// keyed salt.utils.url.create(path, saltenv) as Salt's
// _gen_recurse_managed_files names them, and __dirs__: the directory and
// every directory under it; a source list tries each directory in turn
// (file.source_list), over all roots.
func TestInlineRecurse(t *testing.T) {
	r1 := tree(t, map[string]string{"web/a.conf": "a", "web/sub/b.conf": "b", "web/empty/": "", "notdir": "x"})
	r2 := tree(t, map[string]string{"web/c.conf": "c", "web/a.conf": "shadowed"})
	s := New(map[string][]string{"base": {r1, r2}, "dev": {r2}})
	c := chunk("file.recurse", "name", "/srv/web", "source", []any{"salt://nope/", "salt://notdir", "salt://web/"})
	d := chunk("file.recurse", "name", "/srv/web", "source", "salt://web?saltenv=dev")
	if err := s.Inline([]state.Chunk{c, d}, "base", nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		KeyMissing: []string{"salt://nope", "salt://notdir"},
		KeyFiles: files("salt://web/a.conf?saltenv=base", "a", "salt://web/c.conf?saltenv=base", "c",
			"salt://web/sub/b.conf?saltenv=base", "b"),
		KeyDirs: []string{"salt://web?saltenv=base", "salt://web/empty?saltenv=base", "salt://web/sub?saltenv=base"},
	}
	if diff := cmp.Diff(want, inlined(c)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	want = map[string]any{
		KeyFiles: files("salt://web/a.conf?saltenv=dev", "shadowed", "salt://web/c.conf?saltenv=dev", "c"),
		KeyDirs:  []string{"salt://web?saltenv=dev"},
	}
	if diff := cmp.Diff(want, inlined(d)); diff != "" {
		t.Errorf("saltenv=dev (-want +got):\n%s", diff)
	}

	// template: jinja renders each file, its name being its destination.
	var names []string
	render := func(path string, src []byte, ctx map[string]any) ([]byte, error) {
		names = append(names, ctx["name"].(string)+" "+ctx["source"].(string))
		return append([]byte("rendered "), src...), nil
	}
	e := chunk("file.recurse", "name", "/srv/web/", "source", "salt://web/sub", "template", "jinja")
	if err := s.Inline([]state.Chunk{e}, "base", render); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(files("salt://web/sub/b.conf?saltenv=base", "rendered b"), e[KeyFiles]); diff != "" {
		t.Errorf("templated recurse (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/srv/web/b.conf salt://web/sub/b.conf?saltenv=base"}, names); diff != "" {
		t.Errorf("template names (-want +got):\n%s", diff)
	}
}

// TestInlineLimits: a file over 1 MiB, or one that would take the job
// over 3 MiB, is not inlined but named in __files_too_large__, so that
// its state fails with a clear comment (STATES.md); the budget is the
// whole job's, all chunks together.
func TestInlineLimits(t *testing.T) {
	kib900 := strings.Repeat("k", 900<<10)
	root := tree(t, map[string]string{
		"max": strings.Repeat("m", MaxFileBytes), "over": strings.Repeat("o", MaxFileBytes+1),
		"d/1": kib900, "d/2": kib900, "d/3": kib900, "d/4": kib900, "small": "s",
	})
	s := New(map[string][]string{"base": {root}})

	over := chunk("file.managed", "source", "salt://over")
	max := chunk("file.managed", "source", "salt://max")
	if err := s.Inline([]state.Chunk{over, max}, "base", nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{KeyTooLarge: []string{"salt://over"}}, inlined(over)); diff != "" {
		t.Errorf("over 1 MiB (-want +got):\n%s", diff)
	}
	if got := len(max[KeyFiles].(map[string]any)["salt://max"].(map[string]any)["data"].([]byte)); got != MaxFileBytes {
		t.Errorf("exactly 1 MiB inlined %d bytes", got)
	}

	var cs []state.Chunk
	for i := 1; i <= 4; i++ {
		cs = append(cs, chunk("file.managed", "source", fmt.Sprintf("salt://d/%d", i)))
	}
	cs = append(cs, chunk("file.managed", "source", "salt://small"))
	if err := s.Inline(cs, "base", nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, ok := cs[i][KeyFiles]; !ok {
			t.Errorf("chunk %d: not inlined within the job's 3 MiB: %v", i, inlined(cs[i]))
		}
	}
	if diff := cmp.Diff(map[string]any{KeyTooLarge: []string{"salt://d/4"}}, inlined(cs[3])); diff != "" {
		t.Errorf("the file over the job's budget (-want +got):\n%s", diff)
	}
	if _, ok := cs[4][KeyFiles]; !ok {
		t.Errorf("a small file after the budget ran out: %v; want inlined (it fits)", inlined(cs[4]))
	}

	// A recurse over the budget names the files that did not fit.
	r := chunk("file.recurse", "name", "/d", "source", "salt://d")
	if err := s.Inline([]state.Chunk{r}, "base", nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"salt://d/4?saltenv=base"}, r[KeyTooLarge]); diff != "" {
		t.Errorf("recurse over budget (-want +got):\n%s", diff)
	}
	if n := len(r[KeyFiles].(map[string]any)); n != 3 {
		t.Errorf("recurse inlined %d files, want 3", n)
	}
}

// TestInlineReadError: a file the master cannot read fails its state with
// the reason, and Inline's error tells the master's log.
func TestInlineReadError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	root := tree(t, map[string]string{"secret": "s"})
	os.Chmod(filepath.Join(root, "secret"), 0)
	s := New(map[string][]string{"base": {root}})
	c := chunk("file.managed", "source", "salt://secret")
	err := s.Inline([]state.Chunk{c}, "base", nil)
	if err == nil || !errors.Is(err, os.ErrPermission) {
		t.Errorf("Inline = %v, want a permission error", err)
	}
	msgs, _ := c[KeyErrors].(map[string]any)
	if msg, _ := msgs["salt://secret"].(string); !strings.Contains(msg, "permission denied") {
		t.Errorf("chunk errors = %v", c[KeyErrors])
	}
}

// TestInlineContents: file.managed "contents" with "template: jinja" is
// rendered on the master (salt/states/file.py managed: lines joined, each
// ending in a newline, then file.apply_template_on_contents with defaults
// updated by context), as the agent has no Jinja.
func TestInlineContents(t *testing.T) {
	s := New(map[string][]string{"base": {t.TempDir()}})
	var gotCtx map[string]any
	var gotSrc, gotPath string
	render := func(path string, src []byte, ctx map[string]any) ([]byte, error) {
		gotPath, gotSrc, gotCtx = path, string(src), ctx
		if strings.Contains(string(src), "{% bad") {
			return nil, errors.New("Jinja syntax error")
		}
		return []byte(strings.ReplaceAll(string(src), "{{ x }}", fmt.Sprint(ctx["x"]))), nil
	}
	for _, tc := range []struct {
		name       string
		c          state.Chunk
		src        string
		contents   any
		errs       map[string]any
		wantRender bool
	}{
		{"string", chunk("file.managed", "contents", "a {{ x }}\r\nb", "template", "jinja",
			"defaults", map[string]any{"x": 1}, "context", map[string]any{"x": 2}),
			"a {{ x }}\nb\n", "a 2\nb\n", nil, true},
		{"list", chunk("file.managed", "contents", []any{"one {{ x }}\n", "two"}, "template", "jinja",
			"context", map[string]any{"x": 3}), "one {{ x }}\ntwo\n", "one 3\ntwo\n", nil, true},
		{"no newline", chunk("file.managed", "contents", "v={{ x }}\n", "template", "jinja", "contents_newline", false,
			"defaults", map[string]any{"x": 4}), "v={{ x }}", "v=4", nil, true},
		{"no template", chunk("file.managed", "contents", "{{ x }}"), "", "{{ x }}", nil, false},
		{"mako", chunk("file.managed", "contents", "{{ x }}", "template", "mako"), "", "{{ x }}",
			map[string]any{"contents": "Specified template format mako is not supported"}, false},
		{"render error", chunk("file.managed", "contents", "{% bad", "template", "jinja"), "{% bad\n", "{% bad",
			map[string]any{"contents": "Jinja syntax error"}, true},
		{"not strings", chunk("file.managed", "contents", []any{1, 2}, "template", "jinja"), "", []any{1, 2}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotSrc, gotCtx, gotPath = "", nil, "x"
			if err := s.Inline([]state.Chunk{tc.c}, "base", render); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.contents, tc.c["contents"]); d != "" {
				t.Errorf("contents (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.errs, tc.c[KeyErrors]); tc.errs != nil && d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
			if !tc.wantRender {
				if gotCtx != nil {
					t.Errorf("rendered, want not")
				}
				return
			}
			if gotSrc != tc.src || gotPath != "" || gotCtx["saltenv"] != "base" {
				t.Errorf("render(%q, %q, %v), want source %q", gotPath, gotSrc, gotCtx, tc.src)
			}
		})
	}
}
