package statecomp

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/state"
)

func writeRoots(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, s := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A top file and SLS as Salt's docs write them (salt/state.py
// State.top_matches, HighState.render_state).
var docRoots = map[string]string{
	"top.sls": `base:
  '*':
    - core
  'os:Debian':
    - match: grain
    - web
`,
	"core.sls": `motd:
  test.succeed_without_changes:
    - name: {{ grains['os'] }} {{ sls }}
`,
	"web/init.sls": `{% from './map.jinja' import port with context %}
include:
  - .conf
nginx:
  test.nop:
    - port: {{ port }}
`,
	"web/map.jinja": `{% set port = salt['pillar.get']('web:port', 80) %}`,
	"web/conf.sls": `web_conf:
  cmd.run:
    - name: echo {{ salt['grains.get']('kernel', 'none') }}
`,
}

func lowNames(r *Result) []string {
	var out []string
	for _, c := range r.State["low"].([]any) {
		m := c.(map[string]any)
		out = append(out, fmt.Sprintf("%s.%s %v", m["state"], m["fun"], m["name"]))
	}
	return out
}

func TestCompileHighstateShared(t *testing.T) {
	dir := writeRoots(t, docRoots)
	c := New(Options{FileRoots: map[string][]string{"base": {dir}}})
	var devs []Device
	for i := 0; i < 100; i++ {
		os := "Debian"
		if i%10 == 0 {
			os = "Alpine"
		}
		devs = append(devs, Device{ID: fmt.Sprintf("cam%03d", i), Grains: map[string]any{"id": fmt.Sprintf("cam%03d", i), "os": os, "kernel": "Linux", "serial": i}})
	}
	res, st := c.Compile(Request{Fun: "state.apply"}, devs)
	// The first compiles learn the family's dependencies; those in flight
	// meanwhile run again, at most a few per worker.
	if most := 2 + 3*runtime.GOMAXPROCS(0); st.Variants != 2 || st.Compiled > most {
		t.Errorf("got %d variants from %d compiles, want 2 variants and at most %d compiles", st.Variants, st.Compiled, most)
	}
	if errs := res[1].State["errors"]; errs != nil {
		t.Fatalf("errors: %v", errs)
	}
	want := []string{"test.succeed_without_changes Debian core", "cmd.run echo Linux", "test.nop nginx"}
	if d := cmp.Diff(want, lowNames(res[1])); d != "" {
		t.Errorf("Debian low: %s", d)
	}
	if d := cmp.Diff([]string{"test.succeed_without_changes Alpine core"}, lowNames(res[0])); d != "" {
		t.Errorf("Alpine low: %s", d)
	}
	if res[1].Sum != res[2].Sum || res[1].Sum == res[0].Sum {
		t.Errorf("equal devices should share one result, unequal ones not")
	}
	// Again: all from the cache.
	_, st = c.Compile(Request{Fun: "state.apply"}, devs)
	if st.Compiled != 0 {
		t.Errorf("second compile ran %d compiles, want 0", st.Compiled)
	}
	// The pillar= override is a render input.
	res, _ = c.Compile(Request{Fun: "state.apply", Pillar: map[string]any{"web": map[string]any{"port": 8080}}}, devs[1:2])
	if !strings.Contains(fmt.Sprint(res[0].State["low"]), "port:8080") {
		t.Errorf("pillar override not rendered: %v", res[0].State["low"])
	}
}

// eventually compiles until ok says the result is the one wanted, for at
// most a few file server lookup TTLs.
func eventually(t *testing.T, c *Compiler, req Request, devs []Device, ok func([]*Result) bool) ([]*Result, Stats) {
	t.Helper()
	deadline := time.Now().Add(5 * fileserver.LookupTTL)
	for {
		res, st := c.Compile(req, devs)
		if ok(res) || time.Now().After(deadline) {
			return res, st
		}
		time.Sleep(fileserver.LookupTTL / 10)
	}
}

func TestCompileFileChangeInvalidates(t *testing.T) {
	dir := writeRoots(t, docRoots)
	dir0 := t.TempDir() // an earlier root, empty for now
	c := New(Options{FileRoots: map[string][]string{"base": {dir0, dir}}})
	devs := []Device{{ID: "a", Grains: map[string]any{"os": "Debian"}}}
	req := Request{Fun: "state.sls", Mods: []string{"web"}}
	c.Compile(req, devs)
	p := filepath.Join(dir, "web", "map.jinja")
	if err := os.WriteFile(p, []byte(`{% set port = 443 %}`), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // even with the mtime put back
	os.Chtimes(p, old, old)
	res, _ := eventually(t, c, req, devs, func(res []*Result) bool {
		return strings.Contains(fmt.Sprint(res[0].State["low"]), "port:443")
	})
	if !strings.Contains(fmt.Sprint(res[0].State["low"]), "port:443") {
		t.Errorf("after the change: low %v; want port 443", res[0].State["low"])
	}
	if _, st := c.Compile(req, devs); st.Compiled != 0 {
		t.Errorf("unchanged files: %d compiles, want 0", st.Compiled)
	}
	// A new file in an earlier root shadows the old one.
	if err := os.MkdirAll(filepath.Join(dir0, "web"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir0, "web", "conf.sls"), []byte("other:\n  test.nop: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ = eventually(t, c, req, devs, func(res []*Result) bool {
		return strings.Contains(fmt.Sprint(lowNames(res[0])), "test.nop other")
	})
	if !strings.Contains(fmt.Sprint(lowNames(res[0])), "test.nop other") {
		t.Errorf("shadowing file not seen: %v", lowNames(res[0]))
	}
}

func TestCompilePerDeviceGrain(t *testing.T) {
	dir := writeRoots(t, map[string]string{"id.sls": "hostname:\n  test.nop:\n    - name: {{ grains['id'] }}\n"})
	c := New(Options{FileRoots: map[string][]string{"base": {dir}}})
	devs := []Device{{ID: "a", Grains: map[string]any{"id": "a"}}, {ID: "b", Grains: map[string]any{"id": "b"}}, {ID: "c", Grains: map[string]any{"id": "c"}}}
	res, st := c.Compile(Request{Fun: "state.sls", Mods: []string{"id"}}, devs)
	if st.Variants != 3 {
		t.Errorf("got %d variants, want 3", st.Variants)
	}
	for i, d := range devs {
		if got := lowNames(res[i]); len(got) != 1 || got[0] != "test.nop "+d.ID {
			t.Errorf("%s: got %v", d.ID, got)
		}
	}
}

func TestCompileErrorsNameFileAndLine(t *testing.T) {
	dir := writeRoots(t, map[string]string{
		"bad.sls":   "a:\n  test.nop:\n    - x: {{ grains['os'] }\n",
		"cmd.sls":   "a:\n  test.nop:\n    - x: {{ salt['cmd.run']('id') }}\n",
		"good.sls":  "b:\n  test.nop: []\n",
		"yaml.sls":  "a:\n  test.nop:\n  - x\n - y\n",
		"other.sls": "{% set x = salt['network.ip_addrs']() %}\n",
	})
	c := New(Options{FileRoots: map[string][]string{"base": {dir}}})
	devs := []Device{{ID: "a", Grains: map[string]any{"os": "Debian"}}}
	for _, tc := range []struct{ mod, want string }{
		{"bad", filepath.Join(dir, "bad.sls") + " line 3"},
		{"cmd", "line 3 (jinja): unable to render expression at line 3: salt['cmd.run'] cannot run at render time on the master"},
		{"other", "line 1 (jinja): Unable to execute controlStructure at line 1: salt['network.ip_addrs'] cannot run at render time on the master"},
		{"yaml", filepath.Join(dir, "yaml.sls") + " line 3 (yaml)"},
		{"missing", "No matching sls found for 'missing' in env 'base'"},
	} {
		res, _ := c.Compile(Request{Fun: "state.sls", Mods: []string{tc.mod}}, devs)
		errs := fmt.Sprint(res[0].State["errors"])
		if !strings.Contains(errs, tc.want) {
			t.Errorf("%s: got errors %s, want %q", tc.mod, errs, tc.want)
		}
		if l := res[0].State["low"].([]any); len(l) != 0 {
			t.Errorf("%s: low %v with errors", tc.mod, l)
		}
	}
	res, _ := c.Compile(Request{Fun: "state.sls", Mods: []string{"good"}}, devs)
	if res[0].State["errors"] != nil {
		t.Errorf("good: %v", res[0].State["errors"])
	}
}

func TestShowTop(t *testing.T) {
	dir := writeRoots(t, docRoots)
	c := New(Options{FileRoots: map[string][]string{"base": {dir}}})
	res, _ := c.Compile(Request{Fun: "state.show_top"}, []Device{{ID: "a", Grains: map[string]any{"os": "Debian"}}, {ID: "b", Grains: map[string]any{"os": "Alpine"}}})
	if d := cmp.Diff(map[string]any{"base": []any{"core", "web"}}, res[0].State["top"]); d != "" {
		t.Errorf("Debian top: %s", d)
	}
	if d := cmp.Diff(map[string]any{"base": []any{"core"}}, res[1].State["top"]); d != "" {
		t.Errorf("Alpine top: %s", d)
	}
}

func TestScanDeps(t *testing.T) {
	for _, c := range []struct {
		src  string
		want []string
	}{
		{"x: {{ grains['os'] }}", []string{"g:os"}},
		{"{% if grains.os_family == 'Debian' %}{% endif %}", []string{"g:os_family"}},
		{"{{ grains.get('role') }} {{ pillar['web'] }}", []string{"g:role", "p:web"}},
		{"{{ salt['grains.get']('ip4:eth0') }}", []string{"g:ip4"}},
		{"{{ salt.pillar.get('a:b', 1) }}", []string{"p:a"}},
		{"{{ salt['config.get']('x') }}", []string{"g:x", "p:x"}},
		{"{{ salt['match.grain']('os:Debian') }}", []string{"m:grain:os:Debian"}},
		{"{% for k, v in grains.items() %}{% endfor %}", []string{"*g"}},
		{"{% set g = grains %}", []string{"*g"}},
		{"{{ grains[key] }}", []string{"*g"}},
		{"{{ opts['id'] }}", []string{"*id"}},
		{"{{ salt[fn]() }}", []string{"*id"}},
		{"{{ salt['grains.get']('a' ~ x) }}", []string{"*g"}},
		{"{{ salt['cmd.run']('ls') }}", []string{}},
		{"plain: yaml", nil},
	} {
		got := scanDeps(c.src)
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s: %s", c.src, d)
		}
	}
}

// TestTopTargetsInFileOrder: a top file's targets count in the order
// written, not sorted (Salt reads the top file as an OrderedDict:
// salt/state.py BaseHighState.top_matches).
func TestTopTargetsInFileOrder(t *testing.T) {
	dir := writeRoots(t, map[string]string{
		"top.sls": "base:\n  'zeta*':\n    - z\n  '*':\n    - a\n",
		"z.sls":   "zz:\n  test.nop: []\n",
		"a.sls":   "aa:\n  test.nop: []\n",
	})
	c := New(Options{FileRoots: map[string][]string{"base": {dir}}})
	res, _ := c.Compile(Request{Fun: "state.show_top"}, []Device{{ID: "zeta1"}})
	if d := cmp.Diff(map[string]any{"base": []any{"z", "a"}}, res[0].State["top"]); d != "" {
		t.Errorf("top: %s", d)
	}
}

// TestInlineTemplatePerDevice: a file.managed source with template: jinja
// is rendered for each device with its grains and the state's context
// (salt/states/file.py managed, salt/modules/file.py get_managed), and a
// change to the source file compiles again.
func TestInlineTemplatePerDevice(t *testing.T) {
	dir := writeRoots(t, map[string]string{
		"motd.sls": "motd:\n  file.managed:\n    - name: /etc/motd\n    - source: salt://motd.j2\n    - template: jinja\n    - context:\n        greeting: hi\n",
		"motd.j2":  "{{ greeting }} {{ grains['site'] }}\n",
	})
	c := New(Options{FileRoots: map[string][]string{"base": {dir}}})
	devs := []Device{{ID: "a", Grains: map[string]any{"site": "north"}}, {ID: "b", Grains: map[string]any{"site": "south"}}, {ID: "c", Grains: map[string]any{"site": "north"}}}
	req := Request{Fun: "state.sls", Mods: []string{"motd"}}
	data := func(r *Result) string {
		low := r.State["low"].([]any)
		if len(low) != 1 {
			t.Fatalf("low %v, errors %v", low, r.State["errors"])
		}
		f, _ := low[0].(map[string]any)["__files__"].(map[string]any)["salt://motd.j2"].(map[string]any)
		b, _ := f["data"].([]byte)
		return string(b)
	}
	res, st := c.Compile(req, devs)
	if got := data(res[0]) + data(res[1]); got != "hi north\nhi south\n" {
		t.Errorf("rendered sources: %q", got)
	}
	if st.Variants != 2 || res[0].Sum != res[2].Sum {
		t.Errorf("got %d variants (a and c equal: %v), want 2", st.Variants, res[0].Sum == res[2].Sum)
	}
	if err := os.WriteFile(filepath.Join(dir, "motd.j2"), []byte("{{ greeting }}, {{ grains['site'] }}!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ = eventually(t, c, req, devs, func(res []*Result) bool { return data(res[1]) == "hi, south!\n" })
	if got := data(res[1]); got != "hi, south!\n" {
		t.Errorf("after the source changed: %q", got)
	}
}

// TestOwnForInline: the chunks ownForInline leaves shared (and out of
// fileserver.Inline's reach) are those Inline leaves alone (a chunk it
// changed in place would change every device's compile that shares it).
func TestOwnForInline(t *testing.T) {
	dir := writeRoots(t, map[string]string{"f.txt": "x\n", "d/g.txt": "y\n", "t.sh": "echo\n"})
	fs := fileserver.New(map[string][]string{"base": {dir}})
	src := "salt://f.txt"
	chunks := []state.Chunk{
		{"state": "file", "fun": "managed", "name": "/x", "source": src},
		{"state": "file", "fun": "managed", "name": "/x", "contents": "hi"},
		{"state": "file", "fun": "recurse", "name": "/x", "source": "salt://d"},
		{"state": "cmd", "fun": "script", "name": "salt://t.sh"},
		{"state": "archive", "fun": "extracted", "name": "/x", "source": src},
		{"state": "file", "fun": "copy", "name": "/x", "source": src},
		{"state": "file", "fun": "directory", "name": "salt://d"},
		{"state": "cmd", "fun": "run", "name": "salt://t.sh", "source": src},
		{"state": "pkg", "fun": "installed", "name": "x", "sources": []any{map[string]any{"x": src}}},
		{"state": "test", "fun": "nop", "name": src},
		{"state": "test", "fun": "nop", "name": "x", fileserver.KeyFiles: map[string]any{}},
		{"state": "test", "fun": "nop", "name": "x", fileserver.KeyMissing: []string{src}},
	}
	for _, c := range chunks {
		before := fmt.Sprint(c)
		low := []state.Chunk{c}
		in := ownForInline(low)
		owned := fmt.Sprintf("%p", low[0]) != fmt.Sprintf("%p", c)
		if owned != (len(in) == 1) || owned && fmt.Sprintf("%p", in[0]) != fmt.Sprintf("%p", low[0]) {
			t.Errorf("%s: copied %v, but gave %d chunks for Inline", before, owned, len(in))
		}
		shared := state.Chunk(maps.Clone(c))
		if err := fs.Inline([]state.Chunk{shared}, "base", func(string, []byte, map[string]any) ([]byte, error) { return []byte("r"), nil }); err != nil {
			t.Logf("%s: %v", before, err)
		}
		if changed := fmt.Sprint(shared) != before; changed && !owned {
			t.Errorf("%s: Inline changed it to %v, but ownForInline did not copy it", before, shared)
		}
		if fmt.Sprint(c) != before {
			t.Errorf("%s: changed by ownForInline", before)
		}
	}
}

// TestCompilePerDeviceShared: devices compiled together, in parallel
// (sharing the files' high data and chunks that read no per-device
// input), get what each gets compiled alone.
func TestCompilePerDeviceShared(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	files := highstate20(true)
	files["app3.sls"] += "app3_file:\n  file.managed:\n    - name: /etc/app3/{{ grains['os'] }}\n    - source: salt://f.txt\n"
	files["f.txt"] = "hello\n"
	dir := writeRoots(t, files)
	devs := benchDevices(60)
	res, st := New(Options{FileRoots: map[string][]string{"base": {dir}}}).Compile(Request{Fun: "state.apply"}, devs)
	if st.Variants != len(devs) {
		t.Errorf("got %d variants, want %d", st.Variants, len(devs))
	}
	for i, d := range devs[:12] {
		alone, _ := New(Options{FileRoots: map[string][]string{"base": {dir}}}).Compile(Request{Fun: "state.apply"}, []Device{d})
		if diff := cmp.Diff(alone[0].State, res[i].State); diff != "" {
			t.Fatalf("%s compiled with the others (-alone +together):\n%s", d.ID, diff)
		}
		if alone[0].Sum != res[i].Sum {
			t.Errorf("%s: sums differ", d.ID)
		}
	}
}
