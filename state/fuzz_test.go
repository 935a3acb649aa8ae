package state

import (
	"testing"

	"github.com/halite-fleet/halite/render/sls"
)

// FuzzCompile compiles hostile SLS shapes (two files, one including the
// other) and runs everything that reads the result: no input may panic or
// hang. The same text is also read as a top file.
func FuzzCompile(f *testing.F) {
	seeds := [][2]string{
		{"a: test.nop\n", "b: test.nop\n"},
		{"include:\n  - b\n  - .c\n  - ..d\n  - prod: e\n  - {}\n  - [x]\na:\n  file.managed:\n    - names: [1, {x: [{y: 1}]}, {z: 3}, [q]]\n", "b: {test: [nop, {order: last}]}\n"},
		{"extend:\n  b:\n    file:\n      - name: x\n      - require: [y]\n  c: 3\n  d: {file.managed: 3}\nb: test.nop\n", "extend: [1]\n"},
		{"a:\n  cmd.run:\n    - require_in: {cmd: b}\n    - watch_in: [b, {sls: b}, {cmd.run: b}, 7, []]\n    - use: [{cmd: b}]\n    - use_in: [b]\n    - prereq: [{cmd: b}]\n    - prereq_in: [b]\n", "b:\n  cmd.run:\n    - require: [{cmd: a}, {}]\n    - listen: [a, {cmd: zz}]\n    - listen_in: [{cmd: a}]\n"},
		{"a:\n  test: ~\n  t.x:\n  file.managed: 1\n  cmd: [run, wait, 'x y']\n  __sls__: [1]\n", "b: [1]\nc: 1\nd: x.y.z\n"},
		{"exclude: [{sls: b}, {id: a}, 3, {a: 1, b: 2}]\na: test.nop\n", "exclude: b\n"},
		{"a:\n  test.nop:\n    - order: [1]\n    - name: {x: 1}\n    - {}\n    - {a: 1, b: 2}\n", "b:\n  test.nop:\n    - order: 99999999999999999999\n"},
		{"base:\n  '*':\n    - a\n    - match: grain\n    - {prod: b}\n    - subfilter: {x: [y]}\n  x: y\nprod: [1]\n", "include: [a]\n"},
		{"a: &x {test.nop: [{require: [*x]}]}\n", "b: !!binary aGk=\n"},
		{"", ""},
		{"- a\n", "a: b: c\n"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a)+len(b) > 1<<14 {
			return
		}
		files := tree{"base/a.sls": a, "base/b/init.sls": b, "prod/e.sls": b}
		c := CompileMatches(rawTree(files), []EnvSLS{{"base", []string{"a", "b*"}}, {"prod", []string{"e"}}})
		checkMemo(t, rawTree(files), []EnvSLS{{"base", []string{"a", "b*"}}, {"prod", []string{"e"}}})
		_ = c.High
		low := c.Low
		Problems(low)
		Check(low)
		Sequence(low)
		Listen(low, func(string) bool { return true })
		Order(low)
		for _, c := range low {
			Tag(c)
		}
		for _, text := range []string{a, b} {
			entries, err := sls.ParseYAML("top.sls", text)
			if err != nil {
				continue
			}
			top, _ := MergeTops([]TopFile{{Env: "base", Entries: entries}, {Env: "prod", Entries: entries}}, "merge", "base")
			top.Verify()
			top.Match("", func(string, string) (bool, error) { return true, nil })
			top.Map()
			for _, s := range []string{"same", "merge_all"} {
				top, _ = MergeTops([]TopFile{{Env: "base", Entries: entries}, {Env: "prod"}}, s, "base")
				top.Match("", func(string, string) (bool, error) { return true, nil })
			}
		}
	})
}

// rawTree is tree without dedenting (fuzz input is taken as written).
type rawTree tree

func (r rawTree) Load(env, name string) (string, []sls.Entry, error) {
	t := tree(r)
	f, _, err := t.Load(env, name)
	if err != nil {
		return f, nil, err
	}
	entries, err := sls.ParseYAML(f, t[f])
	return f, entries, err
}

func (r rawTree) Envs() []string           { return tree(r).Envs() }
func (r rawTree) List(env string) []string { return tree(r).List(env) }
