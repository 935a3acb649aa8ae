package reactor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/testwait"
	"github.com/halite-fleet/halite/render"
	"github.com/halite-fleet/halite/targets"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type record struct {
	mu        sync.Mutex
	reactions []*Reaction
	events    []event.Event
}

func (r *record) dispatch(_ context.Context, x *Reaction) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reactions = append(r.reactions, x)
	jid := fmt.Sprintf("2026%016d", len(r.reactions))
	x.Claim(jid)
	return jid, nil
}

func (r *record) fire(tag string, data map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event.Event{Tag: tag, Data: data})
}

func (r *record) count() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reactions), len(r.events)
}

func TestMatcher(t *testing.T) {
	rules := []Rule{{Tag: "salt/minion/*/start"}, {Tag: "salt/auth"}, {Tag: "salt/*"}, {Tag: "my/[ab]?/x"}, {Tag: "salt/auth"}}
	m := newMatcher(rules)
	for _, tc := range []struct {
		tag  string
		want []int
	}{
		{"salt/minion/cam1/start", []int{0, 2}},
		{"salt/auth", []int{1, 2, 4}},
		{"salt/minion/x/stop", []int{2}},
		{"my/a1/x", []int{3}},
		{"my/c1/x", nil},
		{"other", nil},
	} {
		got := m.match(tc.tag, nil)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("match(%q): got %v, want %v", tc.tag, got, tc.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	got, err := ParseConfig([]any{
		map[string]any{"salt/minion/*/start": []any{"/srv/reactor/start.sls", "/srv/reactor/monitor.sls"}},
		map[string]any{"myco/custom/event/tag": []any{"salt://reactor/mycustom.sls"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "[{salt/minion/*/start [/srv/reactor/start.sls /srv/reactor/monitor.sls]} {myco/custom/event/tag [salt://reactor/mycustom.sls]}]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParseConfig([]any{"salt/auth"}); err == nil {
		t.Error("got no error for a bare string entry, want one")
	}
}

func TestFilesSaltURL(t *testing.T) {
	base, other := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(base, "reactor"), 0o755)
	os.MkdirAll(filepath.Join(other, "reactor"), 0o755)
	writeFile(t, filepath.Join(base, "reactor"), "a.sls", "")
	writeFile(t, filepath.Join(other, "reactor"), "a.sls", "")
	f := Files{Roots: map[string][]string{"base": {base}, "reactor": {other}}}
	for _, tc := range []struct{ in, want string }{
		{"salt://reactor/a.sls", filepath.Join(base, "reactor/a.sls")},
		{"salt://reactor/a.sls?saltenv=reactor", filepath.Join(other, "reactor/a.sls")},
		{"salt://../reactor/a.sls", filepath.Join(base, "reactor/a.sls")},
	} {
		got, err := f.Expand(tc.in)
		if err != nil || len(got) != 1 || got[0] != tc.want {
			t.Errorf("Expand(%q): got %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := f.Expand("salt://reactor/missing.sls"); err == nil {
		t.Error("got no error for a missing file, want one")
	}
	g, err := Files{}.Expand(filepath.Join(base, "reactor", "*.sls"))
	if err != nil || len(g) != 1 {
		t.Errorf("local glob: got %v %v, want one file", g, err)
	}
}

func runEngine(t *testing.T, opts Options) (*Engine, *event.Bus) {
	t.Helper()
	bus := event.NewBus(zap.NewNop())
	e := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, bus) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		bus.Close()
	})
	waitFor(t, "subscription", func() bool { return bus.Stats().Subscribers == 1 })
	return e, bus
}

// TestTemplateInjection: Jinja or braces inside event data stay data.
func TestTemplateInjection(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "r.sls", "run:\n  local.cmd.run:\n    - tgt: {{ data['id'] }}\n    - args:\n      - cmd: {{ data['cmd']|json }}\n")
	rec := &record{}
	_, bus := runEngine(t, Options{Rules: []Rule{{Tag: "t", Files: []string{f}}}, Renderer: render.New(render.Options{}),
		Dispatch: rec.dispatch, Fire: rec.fire, Types: []string{TypeLocal}})
	evil := "{{ salt['cmd.run']('id') }}{% for i in range(10**9) %}x{% endfor %}"
	bus.Publish("t", map[string]any{"id": "cam1", "cmd": evil})
	waitFor(t, "the reaction", func() bool { n, _ := rec.count(); return n == 1 })
	got := rec.reactions[0].Kwarg["cmd"]
	if got != evil {
		t.Errorf("got cmd %q, want the event's text unchanged %q", got, evil)
	}
}

// TestOverflow: a full queue loses events loudly: counted and fired.
func TestOverflow(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "r.sls", "ping:\n  local.test.ping:\n    - tgt: '*'\n")
	release := make(chan struct{})
	rec := &record{}
	e := New(Options{Rules: []Rule{{Tag: "t/*", Files: []string{f}}}, Renderer: render.New(render.Options{}),
		Dispatch: func(ctx context.Context, r *Reaction) (string, error) {
			<-release
			return rec.dispatch(ctx, r)
		}, Fire: rec.fire, Types: []string{TypeLocal}, Workers: 1, Queue: 4})
	bus := event.NewBus(zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, bus) }()
	defer func() { cancel(); <-done; bus.Close() }()
	waitFor(t, "subscription", func() bool { return bus.Stats().Subscribers == 1 })
	const n = 50
	for i := range n {
		e.Submit(event.Event{Tag: fmt.Sprintf("t/%d", i), Data: map[string]any{}})
	}
	st := e.Stats()
	// One in the worker at most, four queued.
	if st.Queued+st.Overflow != n || st.Overflow < n-5 {
		t.Errorf("got queued %d overflow %d, want %d in all and at least %d lost", st.Queued, st.Overflow, n, n-5)
	}
	_, evs := rec.count()
	if evs != 1 || rec.events[0].Tag != TagOverflow {
		t.Fatalf("got events %v, want one %s (rate-limited)", rec.events, TagOverflow)
	}
	if d := rec.events[0].Data["dropped"].(uint64); d == 0 {
		t.Errorf("got dropped %d in the overflow event, want > 0", d)
	}
	close(release)
	waitFor(t, "queued reactions", func() bool { n, _ := rec.count(); return uint64(n) == st.Queued })
}

// TestRenderError: a broken file logs and fires file, line and tag.
func TestRenderError(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "bad.sls", "a:\n  local.test.ping:\n    - tgt: x\n{% if data['id'] %}\n  b: {{ data['id'] + }}\n{% endif %}\n")
	// yaml.v3 names the line of the mapping the bad item breaks.
	g := writeFile(t, dir, "badyaml.sls", "a:\n  local.test.ping:\n    - tgt: x\n  - bad\n")
	rec := &record{}
	_, bus := runEngine(t, Options{Rules: []Rule{{Tag: "t", Files: []string{f, g}}}, Renderer: render.New(render.Options{}),
		Dispatch: rec.dispatch, Fire: rec.fire, Types: []string{TypeLocal}})
	bus.Publish("t", map[string]any{"id": "x"})
	waitFor(t, "two render errors", func() bool { _, n := rec.count(); return n == 2 })
	for i, want := range []struct {
		file string
		line int
	}{{f, 5}, {g, 1}} {
		d := rec.events[i].Data
		if rec.events[i].Tag != TagRenderError || d["file"] != want.file || d["tag"] != "t" || d["line"] != want.line {
			t.Errorf("event %d: got %s %v, want %s for %s line %d", i, rec.events[i].Tag, d, TagRenderError, want.file, want.line)
		}
	}
}

// TestLoopGuard: a reaction to the returns of its own jobs stops at
// MaxDepth, loudly.
func TestLoopGuard(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "loop.sls", "again:\n  local.test.ping:\n    - tgt: '*'\n")
	rec := &record{}
	var bus *event.Bus
	e, b := runEngine(t, Options{Rules: []Rule{{Tag: "start", Files: []string{f}}, {Tag: "salt/job/*/ret/*", Files: []string{f}}},
		Renderer: render.New(render.Options{}), MaxDepth: 2, Types: []string{TypeLocal}, Fire: rec.fire,
		Dispatch: func(ctx context.Context, r *Reaction) (string, error) {
			jid, err := rec.dispatch(ctx, r)
			bus.Publish("salt/job/"+jid+"/ret/cam1", map[string]any{"id": "cam1"})
			return jid, err
		}})
	bus = b
	// The return is published before Dispatch returns, as the master's
	// events of a job are: the guard must know its depth from Claim.
	bus.Publish("start", nil)
	waitFor(t, "the loop guard", func() bool { return e.Stats().Looped >= 1 })
	n, _ := rec.count()
	if n != 2 {
		t.Errorf("got %d reactions, want 2 (reactor_max_depth)", n)
	}
	waitFor(t, "the loop event", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, ev := range rec.events {
			if ev.Tag == TagLoop {
				return true
			}
		}
		return false
	})
}

func TestTypesRefused(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "r.sls", "x:\n  local.test.ping:\n    - tgt: a\n")
	rec := &record{}
	e, bus := runEngine(t, Options{Rules: []Rule{{Tag: "t", Files: []string{f}}}, Renderer: PlainYAML{},
		Dispatch: rec.dispatch, Fire: rec.fire, Types: []string{TypeCaller}})
	bus.Publish("t", nil)
	waitFor(t, "the error", func() bool { return e.Stats().Failed == 1 })
	if n, _ := rec.count(); n != 0 {
		t.Errorf("got %d dispatched, want 0", n)
	}
}

func TestPlainYAMLRefusesJinja(t *testing.T) {
	_, _, err := PlainYAML{}.SLS("f.sls", []byte("a:\n  caller.test.ping: []\n{% if x %}\n"), "t", nil)
	if err == nil || !strings.Contains(err.Error(), "-tags reactor") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("got %v, want an error naming line 3 and -tags reactor", err)
	}
	_, entries, err := PlainYAML{}.SLS("f.sls", []byte("touch:\n  caller.file.touch:\n    - args:\n      - name: /tmp/x\n"), "t", nil)
	if err != nil || len(entries) != 1 {
		t.Errorf("got %v %v, want one entry", entries, err)
	}
}

func TestMatcherAgreesWithGlob(t *testing.T) {
	pats := []string{"a*b*c", "*", "a*", "*c", "a**c", "salt/*/x/*", "*ab*ab*", "a*b?c", "[ab]*"}
	tags := []string{"abc", "aXbYc", "ac", "abab", "salt/1/x/2", "salt/x", "xabyab", "ababab", "aab", "a1b2c", "bcc", ""}
	for _, p := range pats {
		m := newMatcher([]Rule{{Tag: p}})
		for _, tag := range tags {
			got := len(m.match(tag, nil)) == 1
			want := targets.MatchGlob(p, tag)
			if got != want {
				t.Errorf("match(%q, %q): got %v, want %v", p, tag, got, want)
			}
		}
	}
}
