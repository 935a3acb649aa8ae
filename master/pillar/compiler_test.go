package pillar

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var debian = map[string]any{"os": "Debian", "os_family": "Debian", "role": "web"}

// TestTopAndGrains: the top file's targets of each type match the
// device, the SLS render with its grains, in top file order.
func TestTopAndGrains(t *testing.T) {
	dir := tree(t, map[string]string{
		"top.sls": `base:
  '*':
    - common
  'os:Debian':
    - match: grain
    - debian
  'G@role:web and web*':
    - web
  'cam[0-9]':
    - match: pcre
    - cams
  'web1,db1':
    - match: list
    - listed
`,
		"common.sls": "common: {{ grains['os'] }}\nport: 80\n",
		"debian.sls": "pkg: apache2\n",
		"web.sls":    "role: {{ grains.role }}\nport: 8080\n",
		"cams.sls":   "cam: true\n",
		"listed.sls": "listed: yes\n",
	})
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}}, map[string]map[string]any{
		"web1": debian, "cam1": {"os": "Alpine"},
	})
	want := map[string]any{"common": "Debian", "port": 8080, "pkg": "apache2", "role": "web", "listed": true}
	if d := cmp.Diff(want, mustFor(t, c, "web1")); d != "" {
		t.Errorf("web1 (-want +got):\n%s", d)
	}
	want = map[string]any{"common": "Alpine", "port": 80, "cam": true}
	if d := cmp.Diff(want, mustFor(t, c, "cam1")); d != "" {
		t.Errorf("cam1 (-want +got):\n%s", d)
	}
}

// TestNodegroupTop is Salt's tests/pytests/functional/pillar/test_top.py
// test_pillar_top_compound_match: N@ in a compound target.
func TestNodegroupTop(t *testing.T) {
	dir := tree(t, map[string]string{
		"top.sls": "base:\n  'N@mins not L@minion':\n    - ng1\n  'N@missing_minion':\n    - ng2\n",
		"ng1.sls": "pillar_from_nodegroup: True\n",
		"ng2.sls": "pillar_from_nodegroup_with_ghost: True\n",
	})
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}, Nodegroups: map[string]any{
		"min": "minion", "sub_min": "sub_minion", "mins": "N@min or N@sub_min", "missing_minion": "L@minion,ghostminion",
	}}, nil)
	if d := cmp.Diff(map[string]any{"pillar_from_nodegroup_with_ghost": true}, mustFor(t, c, "minion")); d != "" {
		t.Errorf("minion (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"pillar_from_nodegroup": true}, mustFor(t, c, "sub_minion")); d != "" {
		t.Errorf("sub_minion (-want +got):\n%s", d)
	}
}

// TestTopfileOrder is Salt's tests/unit/test_pillar.py test_topfile_order:
// order: sorts the targets, the later one's values win; lists replace.
func TestTopfileOrder(t *testing.T) {
	for _, tc := range []struct {
		ng, glob int
		want     string
	}{{1, 2, "bar"}, {2, 1, "foo"}} {
		dir := tree(t, map[string]string{
			"top.sls": strings.NewReplacer("NG", itoa(tc.ng), "GL", itoa(tc.glob)).Replace(`base:
    group:
        - match: nodegroup
        - order: NG
        - ssh
        - generic
    '*':
        - generic
    minion:
        - order: GL
        - ssh.minion
        - generic.minion
`),
			"ssh/init.sls":       "ssh:\n    foo\n",
			"ssh/minion.sls":     "ssh:\n    bar\n",
			"generic/init.sls":   "generic:\n    key1:\n      - value1\n      - value2\n    key2:\n        sub_key1: []\n",
			"generic/minion.sls": "generic:\n    key1:\n      - value3\n    key2:\n        sub_key2: []\n",
		})
		c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}, Nodegroups: map[string]any{"group": "minion"}}, nil)
		p := mustFor(t, c, "minion")
		if p["ssh"] != tc.want {
			t.Errorf("nodegroup order %d, glob order %d: ssh = %v, want %s", tc.ng, tc.glob, p["ssh"], tc.want)
		}
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// TestInclude is Salt's tests/unit/test_pillar.py test_include and the
// include cases of test_malformed_pillar_sls: globs, relative names,
// slashes, key: nesting, the including file's values winning, and
// pillar_includes_override_sls.
func TestInclude(t *testing.T) {
	files := map[string]string{
		"top.sls": "base:\n    '*':\n        - order: 1\n        - test.sub2\n    minion:\n        - order: 2\n        - test\n",
		"test/init.sls": `include:
   - test.sub1
   - test.sub_wildcard*
   - .test.sub_with_init_dot
   - test/sub/with/slashes
   - nested:
       key: 'n:level'
       defaults: {word: hello}
foo1: own
`,
		"test/sub1.sls":              "foo1:\n  bar1\n",
		"test/sub2.sls":              "foo2:\n  bar2\n",
		"test/sub_wildcard_1.sls":    "foo_wildcard:\n   bar_wildcard\n",
		"test/sub_with_init_dot.sls": "sub_init_dot: sub_with_init_dot_worked\n",
		"test/sub/with/slashes.sls":  "sub_with_slashes: sub_slashes_worked\n",
		"nested.sls":                 "said: {{ word }}\n",
	}
	c := newTest(t, Options{Roots: map[string][]string{"base": {tree(t, files)}}}, nil)
	want := map[string]any{
		"foo1": "own", "foo2": "bar2", "foo_wildcard": "bar_wildcard", "sub_init_dot": "sub_with_init_dot_worked",
		"sub_with_slashes": "sub_slashes_worked", "n": map[string]any{"level": map[string]any{"said": "hello"}},
	}
	if d := cmp.Diff(want, mustFor(t, c, "minion")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	c = newTest(t, Options{Roots: map[string][]string{"base": {tree(t, files)}}, IncludesOverrideSLS: true}, nil)
	if got := mustFor(t, c, "minion")["foo1"]; got != "bar1" {
		t.Errorf("pillar_includes_override_sls: foo1 = %v, want bar1", got)
	}
}

// TestMalformed: Salt's errors for SLS that are not mappings and
// includes that are not lists (tests/unit/test_pillar.py
// test_malformed_pillar_sls), and missing SLS.
func TestMalformed(t *testing.T) {
	dir := tree(t, map[string]string{
		"top.sls":    "base:\n  '*':\n    - list\n    - badinc\n    - missing\n    - good\n",
		"list.sls":   "- BAHHH\n",
		"badinc.sls": "foo: bar\ninclude: blah\n",
		"good.sls":   "ok: 1\n",
	})
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}}, nil)
	want := map[string]any{"foo": "bar", "include": "blah", "ok": 1, "_errors": []any{
		"SLS 'list' does not render to a dictionary",
		"Include Declaration in SLS 'badinc' is not formed as a list",
		"Specified SLS 'missing' in environment 'base' is not available on the salt master",
	}}
	if d := cmp.Diff(want, mustFor(t, c, "m1")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestRenderErrorKeepsPillar: a rendering error is Salt's _errors entry
// on a first compile (pillar_safe_render_error's text, or the error with
// file and line), and once a device has a pillar, a compile that fails
// to render keeps it.
func TestRenderErrorKeepsPillar(t *testing.T) {
	dir := tree(t, map[string]string{
		"top.sls": "base:\n  '*':\n    - app\n",
		"app.sls": "secret: s1\n",
	})
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}}, nil)
	if got := mustFor(t, c, "m1")["secret"]; got != "s1" {
		t.Fatalf("secret = %v, want s1", got)
	}
	write(t, dir, map[string]string{"app.sls": "secret: s2\nbroken: {{ nope(\n"})
	p := mustFor(t, c, "m1")
	if d := cmp.Diff(map[string]any{"secret": "s1"}, p); d != "" {
		t.Errorf("after a render error (-want +got):\n%s", d)
	}
	// A device compiled for the first time gets Salt's pillar.
	p = mustFor(t, c, "m2")
	want := []any{"Rendering SLS 'app' failed. Please see master log for details."}
	if d := cmp.Diff(want, p["_errors"]); d != "" {
		t.Errorf("first compile _errors (-want +got):\n%s", d)
	}
	// The runner's view names the file and line.
	shown := c.Show(context.Background(), "m1", "")
	errs, _ := shown["_errors"].([]any)
	if len(errs) != 1 || !strings.Contains(errs[0].(string), "app.sls line 2") {
		t.Errorf("Show _errors = %v, want the file and line 2", errs)
	}
	// Fixed: the next need compiles it.
	write(t, dir, map[string]string{"app.sls": "secret: s3\n"})
	if got := mustFor(t, c, "m1")["secret"]; got != "s3" {
		t.Errorf("after the fix secret = %v, want s3", got)
	}
}

// TestRecompile: a kept pillar is compiled again when a file it read
// changes, when a file it looked for appears, when the grains change,
// on Invalidate and on Refresh; not otherwise.
func TestRecompile(t *testing.T) {
	dir := tree(t, map[string]string{
		"top.sls":    "base:\n  'role:web':\n    - match: grain\n    - web\n  '*':\n    - common\n",
		"web.sls":    "web: 1\n",
		"common.sls": "os: {{ grains.os }}\n",
	})
	grains := map[string]map[string]any{"m1": {"role": "db", "os": "a"}}
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}}, nil)
	c.o.Grains = func(id string) map[string]any { return grains[id] }
	p1 := mustFor(t, c, "m1")
	if p2 := mustFor(t, c, "m1"); &p1 == nil || !sameMap(p1, p2) {
		t.Errorf("an unchanged pillar was compiled again")
	}
	grains["m1"] = map[string]any{"role": "web", "os": "b"}
	if d := cmp.Diff(map[string]any{"web": 1, "os": "b"}, mustFor(t, c, "m1")); d != "" {
		t.Errorf("after a grains change (-want +got):\n%s", d)
	}
	write(t, dir, map[string]string{"web.sls": "web: 2\n"})
	if got := mustFor(t, c, "m1")["web"]; got != 2 {
		t.Errorf("after web.sls changed, web = %v, want 2", got)
	}
	write(t, dir, map[string]string{"top.sls": "base:\n  '*':\n    - common\n    - extra\n"})
	if got := mustFor(t, c, "m1")["_errors"]; got == nil {
		t.Errorf("missing extra.sls: no _errors")
	}
	write(t, dir, map[string]string{"extra.sls": "extra: yes\n"})
	if d := cmp.Diff(map[string]any{"os": "b", "extra": true}, mustFor(t, c, "m1")); d != "" {
		t.Errorf("after extra.sls appeared (-want +got):\n%s", d)
	}
}

func sameMap(a, b map[string]any) bool { return mapID(a) == mapID(b) }

// TestPillarenvAndStrategies: pillarenv reads one environment's top file
// and SLS; strategy none reads base's top file only; every environment's
// top file is read otherwise.
func TestPillarenvAndStrategies(t *testing.T) {
	base := tree(t, map[string]string{"top.sls": "base:\n  '*':\n    - a\n", "a.sls": "k: {x: base, y: base}\nl: [1]\n"})
	dev := tree(t, map[string]string{"top.sls": "dev:\n  '*':\n    - a\n", "a.sls": "k: {x: dev}\nl: [2]\n"})
	roots := map[string][]string{"base": {base}, "dev": {dev}}
	for _, tc := range []struct {
		name string
		o    Options
		want map[string]any
	}{
		{"smart", Options{}, map[string]any{"k": map[string]any{"x": "dev", "y": "base"}, "l": []any{2}}},
		{"merge lists", Options{MergeLists: true}, map[string]any{"k": map[string]any{"x": "dev", "y": "base"}, "l": []any{1, 2}}},
		{"overwrite", Options{Strategy: "overwrite"}, map[string]any{"k": map[string]any{"x": "dev"}, "l": []any{2}}},
		{"none", Options{Strategy: "none"}, map[string]any{"k": map[string]any{"x": "base", "y": "base"}, "l": []any{1}}},
		{"pillarenv dev", Options{Pillarenv: "dev"}, map[string]any{"k": map[string]any{"x": "dev"}, "l": []any{2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Roots = roots
			c := newTest(t, tc.o, nil)
			if d := cmp.Diff(tc.want, mustFor(t, c, "m1")); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestIgnoreMissing: ignore_missing in the top file drops the missing
// SLS error (salt/pillar/__init__.py merge_tops, render_pstate).
func TestIgnoreMissing(t *testing.T) {
	dir := tree(t, map[string]string{"top.sls": "base:\n  '*':\n    - ignore_missing: True\n    - nothere\n    - a\n", "a.sls": "a: 1\n"})
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}}, nil)
	if d := cmp.Diff(map[string]any{"a": 1}, mustFor(t, c, "m1")); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestShowTop: the merged top data, Salt's pillar.show_top.
func TestShowTop(t *testing.T) {
	dir := tree(t, map[string]string{"top.sls": "base:\n  '*':\n    - a\n  'os:Debian':\n    - match: grain\n    - b\n"})
	c := newTest(t, Options{Roots: map[string][]string{"base": {dir}}}, nil)
	top, errs := c.ShowTop(context.Background(), "m1")
	want := map[string]any{"base": map[string]any{"*": []any{"a"}, "os:Debian": []any{map[string]any{"match": "grain"}, "b"}}}
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if d := cmp.Diff(want, top); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
