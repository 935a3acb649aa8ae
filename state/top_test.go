package state

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/render/sls"
)

func topFile(t *testing.T, env, text string) TopFile {
	t.Helper()
	entries, err := sls.ParseYAML(env+"/top.sls", dedent(text))
	if err != nil {
		t.Fatal(err)
	}
	return TopFile{Env: env, File: env + "/top.sls", Entries: entries}
}

func matchAll(tgt, typ string) (bool, error) { return tgt == "*", nil }

// TestTopMerge is tests/pytests/unit/modules/state/test_top_file_merge.py
// (salt/state.py BaseHighState.merge_tops, _merge_tops_merge,
// _merge_tops_same, _merge_tops_merge_all): top files for base, foo and
// bar each with a section for every env, "<file's env>_<section env>";
// baz has no top file.
func TestTopMerge(t *testing.T) {
	envs := []string{"base", "foo", "bar", "baz"}
	full := func(t *testing.T, only ...string) []TopFile {
		var out []TopFile
		for _, env := range envs {
			if len(only) > 0 && env != only[0] {
				continue
			}
			if env == "baz" {
				out = append(out, TopFile{Env: env})
				continue
			}
			var b strings.Builder
			for _, sec := range envs {
				fmt.Fprintf(&b, "%s:\n  '*':\n    - %s_%s\n", sec, env, sec)
			}
			out = append(out, topFile(t, env, b.String()))
		}
		return out
	}
	limited := func(t *testing.T) []TopFile {
		tops := full(t)
		tops[0] = topFile(t, "base", "base:\n  '*':\n    - base_base\n")
		return tops
	}
	tests := []struct {
		name       string
		tops       []TopFile
		strategy   string
		defaultTop string
		want       map[string][]string
	}{
		{"test_merge_strategy_merge", full(t), "merge", "base",
			map[string][]string{"base": {"base_base"}, "foo": {"base_foo"}, "bar": {"base_bar"}, "baz": {"base_baz"}}},
		{"test_merge_strategy_merge_limited_base", limited(t), "merge", "base",
			map[string][]string{"base": {"base_base"}, "foo": {"foo_foo"}, "bar": {"bar_bar"}}},
		{"test_merge_strategy_merge_state_top_saltenv_base", full(t, "base"), "merge", "base",
			map[string][]string{"base": {"base_base"}, "foo": {"base_foo"}, "bar": {"base_bar"}, "baz": {"base_baz"}}},
		{"test_merge_strategy_merge_state_top_saltenv_foo", full(t, "foo"), "merge", "base",
			map[string][]string{"foo": {"foo_foo"}}},
		{"test_merge_strategy_merge_all", full(t), "merge_all", "base",
			map[string][]string{"base": {"base_base", "foo_base", "bar_base"}, "foo": {"base_foo", "foo_foo", "bar_foo"}, "bar": {"base_bar", "foo_bar", "bar_bar"}, "baz": {"base_baz", "foo_baz", "bar_baz"}}},
		{"test_merge_strategy_merge_all_state_top_saltenv_foo", full(t, "foo"), "merge_all", "base",
			map[string][]string{"base": {"foo_base"}, "foo": {"foo_foo"}, "bar": {"foo_bar"}, "baz": {"foo_baz"}}},
		{"test_merge_strategy_same", full(t), "same", "base",
			map[string][]string{"base": {"base_base"}, "foo": {"foo_foo"}, "bar": {"bar_bar"}, "baz": {"base_baz"}}},
		{"test_merge_strategy_same_limited_base", limited(t), "same", "base",
			map[string][]string{"base": {"base_base"}, "foo": {"foo_foo"}, "bar": {"bar_bar"}}},
		{"test_merge_strategy_same_default_top_foo", full(t), "same", "foo",
			map[string][]string{"base": {"base_base"}, "foo": {"foo_foo"}, "bar": {"bar_bar"}, "baz": {"foo_baz"}}},
		{"test_merge_strategy_same_state_top_saltenv_foo", full(t, "foo"), "same", "base",
			map[string][]string{"foo": {"foo_foo"}}},
		{"test_merge_strategy_same_state_top_saltenv_baz", full(t, "baz"), "same", "base",
			map[string][]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			top, errs := MergeTops(tc.tops, tc.strategy, tc.defaultTop)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			m, errs := top.Match("", matchAll)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if diff := cmp.Diff(tc.want, Matched(m)); diff != "" {
				t.Errorf("matches (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTopMatch: salt/state.py BaseHighState.top_matches and
// salt/matchers/confirm_top.py: the match type (compound by default),
// a string instead of a list (tests/pytests/unit/state/
// test_state_highstate.py test_top_matches_with_string), "{env: sls}"
// items, options that are not envs, subfilter, a saltenv restriction,
// and matcher errors with the file and line.
func TestTopMatch(t *testing.T) {
	tf := topFile(t, "base", `
		base:
		  '*':
		    - common
		  'os:Debian':
		    - match: grain
		    - debian
		    - prod: web.tuned
		    - ignore_missing: True
		  'cam*':
		    - cameras
		  'L@a,b':
		    - match: compound
		    - ab
		  'broken':
		    - match: nope
		    - never
		  'single': one
		  'outer':
		    - subfilter:
		        'inner':
		          - deep
		    - outer
		prod:
		  '*':
		    - web
		`)
	top, errs := MergeTops([]TopFile{tf}, "", "base")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if v := top.Verify(); len(v) > 0 {
		t.Fatalf("Verify: %v", v)
	}
	var asked []string
	m := func(tgt, typ string) (bool, error) {
		asked = append(asked, typ+":"+tgt)
		switch typ {
		case "nope":
			return false, errors.New("unknown matcher nope")
		case "grain":
			return tgt == "os:Debian", nil
		}
		return tgt == "*" || tgt == "L@a,b" || tgt == "single" || tgt == "outer" || tgt == "inner", nil
	}
	got, errs := top.Match("", m)
	want := []EnvSLS{{"base", []string{"common", "debian", "ab", "one", "deep", "outer"}}, {"prod", []string{"web.tuned", "web"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("matches (-want +got):\n%s", diff)
	}
	wantAsked := []string{"compound:*", "grain:os:Debian", "compound:cam*", "compound:L@a,b", "nope:broken", "compound:single", "compound:outer", "compound:inner", "compound:*"}
	if diff := cmp.Diff(wantAsked, asked); diff != "" {
		t.Errorf("matcher calls (-want +got):\n%s", diff)
	}
	if len(errs) != 1 || errs[0] != "Top file target 'broken' (match: nope) in saltenv 'base': unknown matcher nope (base/top.sls, line 1)" {
		t.Errorf("got errors %q", errs)
	}
	got, _ = top.Match("prod", m)
	if diff := cmp.Diff([]EnvSLS{{"prod", []string{"web"}}}, got); diff != "" {
		t.Errorf("saltenv=prod (-want +got):\n%s", diff)
	}
	top.Avail = []string{"base"}
	got, _ = top.Match("base", m)
	if diff := cmp.Diff([]EnvSLS{{"base", []string{"common", "debian", "ab", "one", "deep", "outer"}}}, got); diff != "" {
		t.Errorf("without env prod (-want +got):\n%s", diff)
	}
}

// TestTopVerify: salt/state.py BaseHighState.verify_tops messages.
func TestTopVerify(t *testing.T) {
	tf := topFile(t, "base", `
		base:
		  '*':
		    - ''
		    - match:
		  'x': {a: b}
		`)
	top, _ := MergeTops([]TopFile{tf}, "merge", "base")
	want := []string{
		"Environment base contains an empty sls index",
		"Improperly formatted top file matcher in saltenv {'match': None}: None file",
		"Malformed topfile (state declarations not formed as a list)",
	}
	if diff := cmp.Diff(want, top.Verify()); diff != "" {
		t.Errorf("Verify (-want +got):\n%s", diff)
	}
	_, errs := MergeTops([]TopFile{topFile(t, "base", "base: [a]\n")}, "merge", "base")
	if diff := cmp.Diff([]string{"Unable to render top file. No targets found."}, errs); diff != "" {
		t.Errorf("MergeTops (-want +got):\n%s", diff)
	}
}

// TestHighstateCompile: the top file's matches compiled across two envs,
// as state.highstate does (salt/state.py render_highstate).
func TestHighstateCompile(t *testing.T) {
	files := tree{
		"base/common.sls": "motd:\n  file.managed:\n    - name: /etc/motd\n",
		"base/web/a.sls":  "a: test.nop\n",
		"base/web/b.sls":  "b: test.nop\n",
		"prod/app.sls":    "app:\n  test.nop:\n    - require:\n      - file: motd\n",
	}
	c := CompileMatches(files, []EnvSLS{{"base", []string{"common", "web.*"}}, {"prod", []string{"app"}}})
	if len(c.Errors) > 0 {
		t.Fatal(c.Errors)
	}
	if diff := cmp.Diff([]string{"motd", "a", "b", "app"}, runIDs(c.Low)); diff != "" {
		t.Errorf("run order (-want +got):\n%s", diff)
	}
	if len(Check(c.Low)) != 0 {
		t.Errorf("Check: %v", Check(c.Low))
	}
	// Without a Lister a glob names nothing: Salt tries it as a name.
	c = CompileMatches(plainLoader{files}, []EnvSLS{{"base", []string{"web.*"}}})
	if diff := cmp.Diff([]string{"No matching sls found for 'web.*' in env 'base'"}, msgs(c.Errors)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	c = CompileMatches(files, []EnvSLS{{"dev", []string{"x"}}})
	if diff := cmp.Diff([]string{"No matching salt environment for environment 'dev' found", "No matching sls found for 'x' in env 'dev'"}, msgs(c.Errors)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestListen: salt/state.py State.call_listen, as
// tests/pytests/functional/modules/state/requisites/test_listen.py pins
// it: a listener's mod_watch runs when its target changed, once however
// many listen on it, and a reference to no state is an error return.
func TestListen(t *testing.T) {
	files := tree{"base/requisite.sls": `
		successful_changing_state:
		  cmd.run:
		    - name: echo "Successful Change"
		non_changing_state:
		  test.succeed_without_changes
		test_listening_change_state:
		  cmd.run:
		    - name: echo "Listening State"
		    - listen:
		      - cmd: successful_changing_state
		test_listening_non_changing_state:
		  cmd.run:
		    - name: echo "Only run once"
		    - listen:
		      - test: non_changing_state
		test_listening_resolution_one:
		  cmd.run:
		    - name: echo "Successful listen resolution"
		    - listen:
		      - cmd: successful_changing_state
		test_listening_resolution_two:
		  cmd.run:
		    - name: echo "Successful listen resolution"
		    - listen:
		      - cmd: successful_changing_state
		in_changing:
		  test.succeed_with_changes:
		    - name: foo
		    - listen_in:
		      - cmd: test_listen_in_resolution
		test_listen_in_resolution:
		  cmd.wait:
		    - name: echo "Successful listen_in resolution"
		dangling:
		  cmd.run:
		    - listen:
		      - cmd: nowhere
		`}
	low := compile(t, files, "requisite")
	if p := Problems(low); len(p) != 0 {
		t.Fatalf("listen is no ordering requisite, got problems %v", p)
	}
	changed := func(tag string) bool {
		return strings.Contains(tag, "successful_changing_state") || strings.Contains(tag, "in_changing")
	}
	w, errs := Listen(low, changed)
	var got []string
	for _, c := range w {
		got = append(got, Tag(c))
		if c["sfun"] == nil || c["listen"] != nil {
			t.Errorf("watcher %v: want sfun and no requisites", c)
		}
	}
	want := []string{
		`cmd_|-listener_test_listening_change_state_|-echo "Listening State"_|-mod_watch`,
		`cmd_|-listener_test_listening_resolution_one_|-echo "Successful listen resolution"_|-mod_watch`,
		`cmd_|-listener_test_listening_resolution_two_|-echo "Successful listen resolution"_|-mod_watch`,
		`cmd_|-listener_test_listen_in_resolution_|-echo "Successful listen_in resolution"_|-mod_watch`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("watchers (-want +got):\n%s", diff)
	}
	wantErr := []ListenError{{Tag: "Listen_Error_|-listen_nowhere_|-listen_cmd_|-Listen_Error", Ret: map[string]any{
		"comment": "Referenced state cmd: nowhere does not exist", "name": "listen_cmd:nowhere", "result": false, "changes": map[string]any{}}}}
	if diff := cmp.Diff(wantErr, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestParseTopAndSingle: ParseTop reads plain YAML; Single is Salt's
// state.single chunk (salt/modules/state.py single).
func TestParseTopAndSingle(t *testing.T) {
	tf, err := ParseTop("base", "top.sls", "base:\n  '*':\n    - a\n")
	if err != nil || len(tf.Entries) != 1 || tf.Entries[0].Keys[0] != "*" {
		t.Fatalf("got %+v, %v", tf, err)
	}
	if _, err := ParseTop("base", "top.sls", "base: [\n"); err == nil {
		t.Error("got no error for broken YAML")
	}
	c, err := Single("pkg.installed", "vim", map[string]any{"version": "9"})
	want := Chunk{"state": "pkg", "fun": "installed", "__id__": "vim", "name": "vim", "version": "9"}
	if err != nil || !cmp.Equal(want, c) {
		t.Errorf("got %v, %v; want %v", c, err, want)
	}
	if _, err := Single("pkg", "vim", nil); err == nil || err.Error() != "Invalid function passed" {
		t.Errorf("got %v, want Invalid function passed", err)
	}
}
