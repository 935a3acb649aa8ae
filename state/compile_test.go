package state

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCompileErrors: broken SLS give the list of strings Salt gives, from
// the Salt tests named in each case.
func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		files tree
		mods  []string
		want  []string
	}{{
		// tests/pytests/functional/modules/state/requisites/test_require.py
		// test_requisites_require_ordering_and_errors_2 (salt/state.py
		// State.reconcile_extend, reached through requisite_in).
		name: "require_in an ID of another module",
		files: tree{"base/requisite.sls": `
			A:
			  cmd.run:
			    - name: echo A
			    - require_in:
			      - foobar: W
			`},
		mods: []string{"requisite"},
		want: []string{"Cannot extend ID 'W' in 'base:requisite'. It is not part of the high state.\nThis is likely due to a missing include statement or an incorrectly typed ID.\nEnsure that a state with an ID of 'W' is available\nin environment 'base' and to SLS 'requisite'"},
	}, {
		// test_require.py test_requisites_require_ordering_and_errors_3
		name: "require_in a state module the ID does not have",
		files: tree{"base/requisite.sls": `
			B:
			  cmd.run:
			    - name: echo B last
			    - require_in:
			      - foobar: A
			A:
			  cmd.run:
			    - name: echo A first
			`},
		mods: []string{"requisite"},
		want: []string{"Cannot extend ID 'A' in 'base:requisite'. It is not part of the high state.\nThis is likely due to a missing include statement or an incorrectly typed ID.\nEnsure that a state with an ID of 'A' is available\nin environment 'base' and to SLS 'requisite'"},
	}, {
		// test_require.py test_requisites_require_ordering_and_errors_4
		// (salt/state.py State.verify_high)
		name: "require not a list",
		files: tree{"base/requisite.sls": `
			A:
			  cmd.run:
			    - name: echo A
			B:
			  cmd.run:
			    - name: echo B
			    - require:
			        cmd: A
			C:
			  cmd.run:
			    - name: echo C
			    - require_in:
			        cmd: A
			`},
		mods: []string{"requisite"},
		want: []string{"The require statement in state 'B' in SLS 'requisite' needs to be formed as a list"},
	}, {
		// test_require.py test_requisites_require_ordering_and_errors_5
		name: "two states requiring each other",
		files: tree{"base/requisite.sls": `
			A:
			  cmd.run:
			    - name: echo A
			    - require:
			      - cmd: B
			B:
			  cmd.run:
			    - name: echo B
			    - require:
			      - cmd: A
			`},
		mods: []string{"requisite"},
		want: []string{`A recursive requisite was found, SLS "requisite" ID "B" ID "A"`},
	}, {
		// tests/pytests/functional/modules/state/requisites/test_prereq.py
		// (prereq_recursion_error): two prereqs on each other.
		name: "prereq recursion",
		files: tree{"base/requisite.sls": `
			A:
			  test.succeed_without_changes:
			    - name: a
			    - prereq:
			      - test: B
			B:
			  test.succeed_without_changes:
			    - name: b
			    - prereq:
			      - test: A
			`},
		mods: []string{"requisite"},
		want: []string{`A recursive requisite was found, SLS "requisite" ID "B" ID "A"`},
	}, {
		// tests/pytests/functional/modules/state/test_state.py
		// test_show_states_missing_sls / salt/state.py render_highstate.
		name:  "missing sls",
		files: tree{"base/other.sls": "x: test.nop\n"},
		mods:  []string{"nope"},
		want:  []string{"No matching sls found for 'nope' in env 'base'"},
	}, {
		// salt/state.py BaseHighState.render_state: a missing include.
		name: "missing include",
		files: tree{"base/a.sls": `
			include:
			  - b
			x:
			  test.nop
			`},
		mods: []string{"a"},
		want: []string{"Specified SLS b in saltenv base is not available on the salt master or through a configured fileserver"},
	}, {
		// render_state: an include of an env that does not exist.
		name: "include of a missing env",
		files: tree{"base/a.sls": `
			include:
			  - prod: b
			x: test.nop
			`},
		mods: []string{"a"},
		want: []string{"Nonexistent saltenv 'prod' found in include of 'b' within SLS 'base:a'"},
	}, {
		// render_state: a relative include above the top package.
		name: "relative include beyond the top",
		files: tree{"base/a.sls": `
			include:
			  - ..b
			x: test.nop
			`},
		mods: []string{"a"},
		want: []string{"Attempted relative include of '..b' within SLS 'base:a' goes beyond top level package "},
	}, {
		// salt/state.py _handle_state_decls
		name: "ID not a dictionary",
		files: tree{"base/y.sls": `
			x: [1, 2]
			short: pkg
			`},
		mods: []string{"y"},
		want: []string{"ID x in SLS y is not a dictionary", "ID short in SLS y is not a dictionary"},
	}, {
		// _handle_state_decls: file.managed and file.comment under one ID.
		name: "two declarations of one module",
		files: tree{"base/y.sls": `
			/etc/redis/redis.conf:
			  file.managed:
			    - source: salt://redis/redis.conf
			  file.comment:
			    - regex: ^requirepass
			`},
		mods: []string{"y"},
		want: []string{"ID '/etc/redis/redis.conf' in SLS 'y' contains multiple state declarations of the same type"},
	}, {
		// salt/state.py State.verify_high: the function counts.
		name: "too many and missing functions, trailing colon, names",
		files: tree{"base/y.sls": `
			a:
			  file.managed:
			    - absent
			b:
			  file:
			    - name: /tmp/b
			c:
			  test.nop:
			d:
			  test.nop:
			    - names: one
			e:
			  cmd:
			    - run it
			f:
			  cmd: run
			`},
		mods: []string{"y"},
		want: []string{
			"Too many functions declared in state 'file' in SLS 'y'",
			"No function declared in state 'file' in SLS 'y'",
			"ID 'c' in SLS 'y' contains a short declaration (test.nop) with a trailing colon. When not passing any arguments to a state, the colon must be omitted.",
			"The 'names' argument in state 'd' in SLS 'y' needs to be formed as a list",
			`The function "run it" in state "e" in SLS "y" has whitespace, a function with whitespace is not supported, perhaps this is an argument that is missing a ":"`,
			"State 'f' in SLS 'y' is not formed as a list",
		},
	}, {
		// salt/state.py verify_high: a requisite with a dot in its type.
		name: "requisite type with a dot",
		files: tree{"base/y.sls": `
			a:
			  test.nop:
			    - require:
			      - test.nop: b
			      - [x]
			b: test.nop
			`},
		mods: []string{"y"},
		want: []string{
			"Invalid requisite type 'test.nop' in state 'a', in SLS 'y'. Requisite types must not contain dots, did you mean 'test'?",
			"Requisite declaration ['x'] in SLS y is not formed as a single key dictionary",
		},
	}, {
		// salt/state.py merge_included_states.
		name: "conflicting IDs",
		files: tree{
			"base/a.sls": "include:\n  - b\nx:\n  test.nop:\n    - name: a\n",
			"base/b.sls": "x:\n  test.nop:\n    - name: b\n",
		},
		mods: []string{"a"},
		want: []string{"Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting ID is 'x' and is found in SLS 'base:a' and SLS 'base:b'"},
	}, {
		// salt/state.py _handle_extend.
		name:  "extend not a dictionary",
		files: tree{"base/a.sls": "extend: [x]\nx: test.nop\n"},
		mods:  []string{"a"},
		want:  []string{"Extension value in SLS 'a' is not a dictionary"},
	}, {
		// render_state: include not a list.
		name:  "include not a list",
		files: tree{"base/a.sls": "include: b\nx: test.nop\n"},
		mods:  []string{"a"},
		want:  []string{"Include Declaration in SLS a is not formed as a list", "ID include in SLS a is not a dictionary"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := CompileMatches(tc.files, []EnvSLS{{Env: "base", SLS: tc.mods}})
			checkMemo(t, tc.files, []EnvSLS{{Env: "base", SLS: tc.mods}})
			if diff := cmp.Diff(tc.want, msgs(c.Errors)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if c.Low != nil {
				t.Errorf("got %d chunks with errors, want none", len(c.Low))
			}
		})
	}
}

// TestCompileErrorLocation: an error about an ID names its file and line;
// a YAML error keeps the parser's line.
func TestCompileErrorLocation(t *testing.T) {
	files := tree{"base/y.sls": "ok: test.nop\nbad:\n  test.nop:\n"}
	_, _, errs := Compile(files, "base", []string{"y"})
	want := []string{"ID 'bad' in SLS 'y' contains a short declaration (test.nop) with a trailing colon. When not passing any arguments to a state, the colon must be omitted. (base/y.sls, line 2)"}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	_, _, errs = Compile(tree{"base/y.sls": "a: b\n c: [\n"}, "base", []string{"y"})
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "Rendering SLS 'base:y' failed: ") || !strings.Contains(errs[0], "(base/y.sls, line ") {
		t.Errorf("got %q, want Salt's rendering failure with the file and line", errs)
	}
}

// TestCompileLow: the low chunks, as Salt's compile_high_data and
// order_chunks make them (tests/pytests/functional/modules/state/
// test_state.py test_show_lowstate; salt/state.py).
func TestCompileLow(t *testing.T) {
	files := tree{"base/web/init.sls": `
		nginx:
		  pkg.installed: []
		  service.running:
		    - enable: True
		    - watch:
		      - file: /etc/nginx/nginx.conf
		/etc/nginx/nginx.conf:
		  file:
		    - managed
		    - source: salt://web/nginx.conf
		    - mode: 644
		`}
	low := compile(t, files, "web")
	want := []Chunk{
		{"state": "pkg", "name": "nginx", "__sls__": "web", "__env__": "base", "__id__": "nginx", "fun": "installed", "order": 10000},
		{"state": "service", "name": "nginx", "__sls__": "web", "__env__": "base", "__id__": "nginx", "fun": "running", "order": 10001,
			"enable": true, "watch": []any{map[string]any{"file": "/etc/nginx/nginx.conf"}}},
		{"state": "file", "name": "/etc/nginx/nginx.conf", "__sls__": "web", "__env__": "base", "__id__": "/etc/nginx/nginx.conf", "fun": "managed", "order": 10002,
			"source": "salt://web/nginx.conf", "mode": 644},
	}
	if diff := cmp.Diff(want, low); diff != "" {
		t.Errorf("low (-want +got):\n%s", diff)
	}
	if p := Problems(low); len(p) != 0 {
		t.Errorf("got problems %v, want none", p)
	}
	if got, want := Tag(low[1]), "service_|-nginx_|-nginx_|-running"; got != want {
		t.Errorf("got tag %q, want %q", got, want)
	}
}

// TestCompileFeatures: include, extend, names, use, _in forms, order, in
// Salt's results (each case names its Salt test).
func TestCompileFeatures(t *testing.T) {
	tests := []struct {
		name  string
		files tree
		mods  []string
		// want: the __id__ (and name when it differs) of each chunk in
		// the order the engine runs them (Sequence).
		want  []string
		check func(t *testing.T, low []Chunk)
	}{{
		// tests/pytests/functional/modules/state/requisites/test_require.py
		// test_requisites_require_no_state_module: run D, B, C, E, A; G
		// and H fail with their requisites not found.
		name: "require and require_in by bare ID",
		files: tree{"base/requisite.sls": `
			A:
			  cmd.run:
			    - name: echo A fifth
			    - require:
			      - C
			B:
			  cmd.run:
			    - name: echo B second
			    - require_in:
			      - A
			      - C
			C:
			  cmd.run:
			    - name: echo C third
			D:
			  cmd.run:
			    - name: echo D first
			    - require_in:
			      - B
			E:
			  cmd.run:
			    - name: echo E fourth
			    - require:
			      - B
			    - require_in:
			      - A
			G:
			  cmd.run:
			    - name: echo G
			    - require:
			      - Z
			H:
			  cmd.run:
			    - name: echo H
			    - require:
			      - Z
			`},
		mods: []string{"requisite"},
		want: []string{"D", "B", "C", "E", "A", "G", "H"},
		check: func(t *testing.T, low []Chunk) {
			m := "The following requisites were not found:\n                   require:\n                       id: Z\n"
			want := []Problem{{Chunk: 5, Missing: m, Comment: m}, {Chunk: 6, Missing: m, Comment: m}}
			if diff := cmp.Diff(want, Problems(low)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if got := Check(low); len(got) != 2 || got[0] != "ID 'G' in SLS 'requisite': "+m {
				t.Errorf("got Check %q", got)
			}
		},
	}, {
		// test_require.py test_requisites_require_ordering_and_errors_1
		name: "require by module: id",
		files: tree{"base/requisite.sls": `
			A:
			  cmd.run:
			    - name: echo A fifth
			    - require:
			      - cmd: C
			B:
			  cmd.run:
			    - name: echo B second
			    - require_in:
			      - cmd: A
			      - cmd: C
			C:
			  cmd.run:
			    - name: echo C third
			D:
			  cmd.run:
			    - name: echo D first
			    - require_in:
			      - cmd: B
			E:
			  cmd.run:
			    - name: echo E fourth
			    - require:
			      - cmd: B
			    - require_in:
			      - cmd: A
			F:
			  cmd.run:
			    - name: echo F
			    - require:
			      - foobar: A
			G:
			  cmd.run:
			    - name: echo G
			    - require:
			      - cmd: Z
			`},
		mods: []string{"requisite"},
		want: []string{"D", "B", "C", "E", "A", "F", "G"},
		check: func(t *testing.T, low []Chunk) {
			var got []string
			for _, p := range Problems(low) {
				got = append(got, low[p.Chunk].ID()+": "+p.Missing)
			}
			want := []string{
				"F: The following requisites were not found:\n                   require:\n                       foobar: A\n",
				"G: The following requisites were not found:\n                   require:\n                       cmd: Z\n",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		},
	}, {
		// test_require.py test_issue_59922_conflict_in_name_and_id_for_require_in:
		// "test: A" is X (named A), not the cmd with ID A. Runs B, X, A.
		name: "require_in by module and name",
		files: tree{"base/requisite.sls": `
			X:
			  test.succeed_without_changes:
			    - name: A
			A:
			  cmd.run:
			    - name: echo A
			B:
			  cmd.run:
			    - name: echo B
			    - require_in:
			      - test: A
			`},
		mods: []string{"requisite"},
		want: []string{"B", "X", "A"},
	}, {
		// test_require.py test_issue_61121_extend_is_to_strict: extend adds
		// a cmd.run to A, which runs after test A.
		name: "extend adds a module to an ID",
		files: tree{"base/requisite.sls": `
			A:
			  test.succeed_without_changes:
			    - name: a
			extend:
			  A:
			    cmd:
			      - run
			      - name: echo A
			`},
		mods: []string{"requisite"},
		check: func(t *testing.T, low []Chunk) {
			var got []string
			for _, i := range Sequence(low) {
				got = append(got, Tag(low[i]))
			}
			want := []string{"test_|-A_|-a_|-succeed_without_changes", "cmd_|-A_|-echo A_|-run"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("run order (-want +got):\n%s", diff)
			}
		},
	}, {
		// tests/pytests/functional/modules/state/requisites/test_use.py
		// test_requisites_use: C uses A's onlyif, E gets D's by use_in;
		// names are not copied.
		name: "use and use_in",
		files: tree{"base/requisite.sls": `
			A:
			  cmd.run:
			    - name: echo "A"
			    - onlyif: 'false'
			C:
			  cmd.run:
			    - name: echo "C"
			    - use:
			        - cmd: A
			D:
			  cmd.run:
			    - name: echo "D"
			    - onlyif: 'false'
			    - use_in:
			        - cmd: E
			E:
			  cmd.run:
			    - name: echo "E"
			`},
		mods: []string{"requisite"},
		want: []string{"A", "C", "D", "E"},
		check: func(t *testing.T, low []Chunk) {
			for _, c := range low {
				if c["onlyif"] != "false" {
					t.Errorf("%s: got onlyif %v, want 'false'", c.ID(), c["onlyif"])
				}
			}
			if low[1].Name() != `echo "C"` || low[3].Name() != `echo "E"` {
				t.Errorf("names changed: %q %q", low[1].Name(), low[3].Name())
			}
		},
	}, {
		// salt/state.py compile_high_data: names expand into chunks in
		// their order (name_order), each with the state's arguments; a
		// name given as a mapping brings its own.
		name: "names",
		files: tree{"base/pkgs.sls": `
			pkgs:
			  pkg.installed:
			    - names:
			      - zsh
			      - vim:
			        - version: 9
			      - curl
			    - refresh: False
			after:
			  test.nop
			`},
		mods: []string{"pkgs"},
		want: []string{"pkgs zsh", "pkgs vim", "pkgs curl", "after"},
		check: func(t *testing.T, low []Chunk) {
			if low[1]["version"] != 9 || low[0]["refresh"] != false || low[2]["order"] != 10000.0003 {
				t.Errorf("got %v / %v", low[1], low[2])
			}
			if _, ok := low[0]["name_order"]; ok {
				t.Errorf("name_order left in %v", low[0])
			}
		},
	}, {
		// salt/state.py order_chunks: first, numbers, none (auto order),
		// last, a negative order just before last.
		name: "order",
		files: tree{"base/o.sls": `
			auto1: test.nop
			last:
			  test.nop:
			    - order: last
			minus:
			  test.nop:
			    - order: -1
			five:
			  test.nop:
			    - order: 5
			first:
			  test.nop:
			    - order: first
			auto2: test.nop
			`},
		mods: []string{"o"},
		want: []string{"first", "five", "auto1", "auto2", "minus", "last"},
	}, {
		// tests/pytests/functional/modules/state/test_state.py test_include
		// and render_state: relative includes from a package's init.sls and
		// from a module; included SLS run first (state_auto_order).
		name: "include relative and absolute",
		files: tree{
			"base/web/init.sls":     "include:\n  - .conf\n  - common\nweb: test.nop\n",
			"base/web/conf.sls":     "include:\n  - ..common\n  - .sub.leaf\nconf: test.nop\n",
			"base/web/sub/leaf.sls": "include:\n  - ..conf\nleaf: test.nop\n",
			"base/common.sls":       "common: test.nop\n",
		},
		mods: []string{"web"},
		want: []string{"common", "leaf", "conf", "web"},
	}, {
		// render_state: include of another env in the {env: sls} form.
		name: "include another env",
		files: tree{
			"base/a.sls": "include:\n  - prod: b\na: test.nop\n",
			"prod/b.sls": "b: test.nop\n",
		},
		mods: []string{"a"},
		want: []string{"b", "a"},
		check: func(t *testing.T, low []Chunk) {
			if low[0].Env() != "prod" || low[1].Env() != "base" {
				t.Errorf("got envs %q %q", low[0].Env(), low[1].Env())
			}
		},
	}, {
		// tests/pytests/unit/state/test_state_highstate.py
		// test_find_sls_ids_with_exclude: require / require_in by sls.
		name: "require and require_in by sls",
		files: tree{
			"base/stateB.sls": `
				include:
				  - slsfile1
				  - slsfile2
				some-state:
				  test.nop:
				    - require:
				      - sls: slsfile1
				    - require_in:
				      - sls: slsfile2
				`,
			"base/slsfile1.sls": "slsfile1-nop:\n  test.nop\n",
			"base/slsfile2.sls": "slsfile2-nop:\n  test.nop\n",
		},
		mods: []string{"stateB"},
		want: []string{"slsfile1-nop", "some-state", "slsfile2-nop"},
	}, {
		// test_state.py test_exclude and test_state_highstate.py
		// test_dont_extend_in_excluded_sls_file.
		name: "exclude",
		files: tree{
			"base/a.sls":  "include:\n  - b\nexclude:\n  - id: b2\n  - sls: c\na: test.nop\n",
			"base/b.sls":  "include:\n  - c\nb1: test.nop\nb2: test.nop\n",
			"base/c.sls":  "c: test.nop\n",
			"base/t2.sls": "x: test.nop\n",
		},
		mods: []string{"a"},
		want: []string{"b1", "a"},
	}, {
		// salt/state.py requisite_in: watch_in, onchanges_in, onfail_in,
		// prereq_in and listen_in.
		name: "the _in forms",
		files: tree{"base/in.sls": `
			conf:
			  file.managed:
			    - name: /etc/x
			    - watch_in:
			      - service: svc
			    - onchanges_in:
			      - cmd: reload
			    - onfail_in:
			      - cmd: alarm
			    - prereq_in:
			      - cmd: stop
			    - listen_in:
			      - service: svc
			svc:
			  service.running: []
			reload:
			  cmd.run: []
			alarm:
			  cmd.run: []
			stop:
			  cmd.run: []
			`},
		mods: []string{"in"},
		check: func(t *testing.T, low []Chunk) {
			by := map[string]Chunk{}
			for _, c := range low {
				by[c.ID()] = c
			}
			ref := []any{map[string]any{"file": "conf"}}
			for id, kind := range map[string]string{"svc": "watch", "reload": "onchanges", "alarm": "onfail", "stop": "prereq"} {
				if diff := cmp.Diff(ref, by[id][kind]); diff != "" {
					t.Errorf("%s %s (-want +got):\n%s", id, kind, diff)
				}
			}
			if diff := cmp.Diff([]any{map[string]any{"cmd": "stop"}}, by["conf"]["prerequired"]); diff != "" {
				t.Errorf("conf prerequired (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]any{map[string]any{"service": "svc"}}, by["conf"]["listen_in"]); diff != "" {
				t.Errorf("conf listen_in (-want +got):\n%s", diff)
			}
			// stop runs before conf (conf has prerequired stop), svc, reload
			// and alarm after it.
			if diff := cmp.Diff([]string{"stop", "conf", "svc", "reload", "alarm"}, runIDs(low)); diff != "" {
				t.Errorf("run order (-want +got):\n%s", diff)
			}
		},
	}, {
		// salt/state.py _handle_state_decls: several modules under one ID,
		// short and long forms, in file order.
		name: "several functions under one ID",
		files: tree{"base/m.sls": `
			app:
			  user.present: []
			  file:
			    - directory
			    - name: /srv/app
			  cmd.run:
			    - name: make
			`},
		mods: []string{"m"},
		check: func(t *testing.T, low []Chunk) {
			var got []string
			for _, c := range low {
				got = append(got, Tag(c))
			}
			// The dotted keys are renamed (moved last) in Salt's dict,
			// so the long form comes first.
			want := []string{"file_|-app_|-/srv/app_|-directory", "user_|-app_|-app_|-present", "cmd_|-app_|-make_|-run"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			low := compile(t, tc.files, tc.mods...)
			if tc.want != nil {
				var got []string
				for _, i := range Sequence(low) {
					s := low[i].ID()
					if k := len(got); k < len(tc.want) && strings.Contains(tc.want[k], " ") {
						s += " " + pyStr(low[i]["name"])
					}
					got = append(got, s)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("run order (-want +got):\n%s", diff)
				}
			}
			if tc.check != nil {
				tc.check(t, low)
			}
		})
	}
}

// TestCompileLeavesEntries: the Loader's entries (which the master
// caches) are not changed by compiling, so a second compile from them
// gives the same low state.
func TestCompileLeavesEntries(t *testing.T) {
	files := tree{
		"base/a.sls": `
			include:
			  - b
			extend:
			  b1:
			    test:
			      - require:
			        - test: a1
			      - name: renamed
			a1:
			  test.nop:
			    - require_in:
			      - test: b2
			    - watch_in:
			      - sls: b
			    - use:
			      - test: b2
			b3:
			  file.managed:
			    - names:
			      - /x
			      - /y:
			        - mode: 600
			`,
		"base/b.sls": `
			b1:
			  test.nop:
			    - require:
			      - test: b2
			b2:
			  test.nop:
			    - mode: 644
			    - require: []
			`,
	}
	ct := cachedTree{}
	for _, name := range []string{"a", "b"} {
		_, entries, err := files.Load("base", name)
		if err != nil {
			t.Fatal(err)
		}
		ct[name] = entries
	}
	before := deepCopy(fmt.Sprint(ct))
	first := compile(t, ct, "a")
	second := compile(t, ct, "a")
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second compile (-first +second):\n%s", diff)
	}
	if after := fmt.Sprint(ct); after != before {
		t.Errorf("entries changed:\nbefore %s\nafter  %s", before, after)
	}
	Order(first) // ordering again changes only chunk keys
	if diff := cmp.Diff(fmt.Sprint(ct), before); diff != "" {
		t.Errorf("entries changed by Order: %s", diff)
	}
}
