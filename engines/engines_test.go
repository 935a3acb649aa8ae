package engines

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/testwait"
)

func TestParseConfig(t *testing.T) {
	got, err := ParseConfig([]any{
		map[string]any{"webhook": map[string]any{"port": 8080}},
		map[string]any{"hook2": map[string]any{"engine_module": "webhook", "port": 8081}},
		"stalekey",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{
		{Name: "webhook", Module: "webhook", Opts: map[string]any{"port": 8080}},
		{Name: "hook2", Module: "webhook", Opts: map[string]any{"port": 8081}},
		{Name: "stalekey", Module: "stalekey", Opts: map[string]any{}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("specs (-want +got):\n%s", d)
	}
	bad := []struct {
		list []any
		want string
	}{
		{[]any{map[string]any{"a": 1}}, "engine a: expected a mapping of options"},
		{[]any{map[string]any{"a": nil, "b": nil}}, "expected one engine name"},
		{[]any{"a", "a"}, "engine a: listed twice"},
		{[]any{map[string]any{"a": map[string]any{"engine_module": 3}}}, "engine a: option engine_module"},
		{[]any{42}, "item 1"},
	}
	for _, b := range bad {
		if _, err := ParseConfig(b.list); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseConfig(%v) error = %v, want %q", b.list, err, b.want)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	tests := []struct {
		conf []any
		want string
	}{
		{[]any{map[string]any{"script": map[string]any{}}}, "engine script: option cmd is required"},
		{[]any{map[string]any{"script": map[string]any{"cmd": "true", "intervl": 3}}}, "engine script: unknown option intervl"},
		{[]any{map[string]any{"poll": map[string]any{"engine_module": "script", "cmd": []any{"/no/such/program"}}}}, "engine poll: option cmd:"},
		{[]any{map[string]any{"script": map[string]any{"cmd": "true", "interval": "soon"}}}, "engine script: option interval"},
		{[]any{"nosuch"}, `engine nosuch: no engine module "nosuch"`},
	}
	for _, tt := range tests {
		_, err := New(Options{Config: tt.conf})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v) error = %v, want %q", tt.conf, err, tt.want)
		}
	}
}

var flakyRuns atomic.Int64

func init() {
	// flaky fails twice, panics once, then runs until stopped.
	Register("flaky_test", func(o *Opts) (Engine, error) {
		return EngineFunc(func(ctx context.Context, env *Env) error {
			switch flakyRuns.Add(1) {
			case 1, 2:
				return errors.New("boom")
			case 3:
				panic("kaboom")
			}
			env.Fire("flaky/up", nil)
			<-ctx.Done()
			return nil
		}), nil
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 30*time.Second, what, cond)
}

func runManager(t *testing.T, o Options) (*Manager, *event.Bus) {
	t.Helper()
	bus := event.NewBus(nil)
	o.Env.Bus = bus
	o.Env.Role, o.Env.ID = "master", "m1"
	if o.Log == nil {
		o.Log = zaptest.NewLogger(t)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		bus.Close()
	})
	return m, bus
}

func TestRestartWithBackoff(t *testing.T) {
	flakyRuns.Store(0)
	bus := event.NewBus(nil)
	sub := bus.Subscribe("flaky/up", 10)
	o := Options{Config: []any{"flaky_test"}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Log: zaptest.NewLogger(t)}
	o.Env.Bus = bus
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-sub.C():
	case <-time.After(30 * time.Second):
		t.Fatal("the engine never came up after its failures")
	}
	st := m.Status()[0]
	if st.Restarts != 3 || !strings.Contains(st.LastError, "kaboom") || !st.Running {
		t.Errorf("status = %+v, want 3 restarts, last error the panic, running", st)
	}
	cancel()
	<-done
	bus.Close()
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "engine.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScriptEngine(t *testing.T) {
	// The script fires an event, logs, calls a function and echoes each
	// event it reads back as another event.
	p := script(t, `echo '{"tag": "site/camera/12/up", "data": {"ip": "10.0.0.12"}}'
echo 'not json'
echo '{"log": "polled", "level": "info"}'
echo '{"call": "test.echo", "args": ["hi"], "id": 7}'
while read -r line; do
  case "$line" in
    *'"id":7'*) echo "{\"tag\": \"site/answer\", \"data\": {\"line\": $(printf '%s' "$line" | sed 's/"/\\"/g; s/^/"/; s/$/"/')}}" ;;
    *'"tag":"ping"'*) echo '{"tag": "site/pong", "data": {}}' ;;
  esac
done
`)
	var calls sync.Map
	bus := event.NewBus(nil)
	sub := bus.Subscribe("site/*", 10)
	o := Options{Config: []any{map[string]any{"poller": map[string]any{"engine_module": "script", "cmd": []any{p}, "events": []any{"ping"}}}},
		Log: zaptest.NewLogger(t)}
	o.Env = Env{Role: "agent", ID: "cam1", Bus: bus, Call: func(_ context.Context, fun string, args []any, _ map[string]any) (any, error) {
		calls.Store(fun, args)
		return args[0], nil
	}}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done; bus.Close() }()
	next := func() event.Event {
		t.Helper()
		select {
		case ev := <-sub.C():
			return ev
		case <-time.After(30 * time.Second):
			t.Fatal("no event from the script engine")
		}
		return event.Event{}
	}
	if ev := next(); ev.Tag != "site/camera/12/up" || ev.Data["ip"] != "10.0.0.12" {
		t.Errorf("first event = %v, want site/camera/12/up with its ip", ev)
	}
	if ev := next(); ev.Tag != "site/answer" || !strings.Contains(ev.Data["line"].(string), `"return":"hi"`) {
		t.Errorf("call answer = %v, want the return of test.echo", ev)
	}
	waitFor(t, "the engine to subscribe", func() bool { return bus.Stats().Subscribers >= 2 })
	bus.Publish("ping", map[string]any{})
	if ev := next(); ev.Tag != "site/pong" {
		t.Errorf("after ping: %v, want site/pong", ev)
	}
	if _, ok := calls.Load("test.echo"); !ok {
		t.Error("test.echo was not called")
	}
}

func TestScriptEngineCrashRestarts(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "runs")
	p := script(t, `echo x >> `+count+`
echo '{"tag": "crash/run", "data": {}}'
exit 3
`)
	m, bus := runManager(t, Options{Config: []any{map[string]any{"crashy": map[string]any{"engine_module": "script", "cmd": []any{p}}}},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	_ = bus
	waitFor(t, "three runs of the crashing script", func() bool {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "x") >= 3
	})
	st := m.Status()[0]
	if st.Restarts < 2 || !strings.Contains(st.LastError, "exit status 3") {
		t.Errorf("status = %+v, want restarts and the exit status", st)
	}
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestSyncAndLookup(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "_engines"), 0o755)
	os.WriteFile(filepath.Join(root, "_engines", "poll.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	os.WriteFile(filepath.Join(root, "_engines", "count.star"), []byte("def on_event(tag, data):\n    pass\n"), 0o644)
	os.WriteFile(filepath.Join(root, "_engines", "README"), []byte("docs"), 0o644)
	files, err := Collect([]string{root}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("collected %d files, want 3", len(files))
	}
	wire := FilesToWire(files)
	back, err := FilesFromWire(wire)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "engines")
	changed, err := Sync(dir, back)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"engines.README", "engines.count", "engines.poll"}, changed); d != "" {
		t.Errorf("changed (-want +got):\n%s", d)
	}
	if changed, _ := Sync(dir, back); len(changed) != 0 {
		t.Errorf("second sync changed %v, want nothing", changed)
	}
	u := UserDir{Dirs: []string{dir}, Verified: true}
	mod, err := u.Lookup("poll")
	if err != nil || mod.Version != sum([]byte("#!/bin/sh\necho hi\n")) {
		t.Fatalf("Lookup(poll) = %v, %v", mod.Version, err)
	}
	if _, err := u.Lookup("count"); err == nil || !strings.Contains(err.Error(), "built without Starlark") {
		t.Errorf("Lookup(count) without Starlark: %v", err)
	}
	if _, err := u.Lookup("README"); !errors.Is(err, ErrNoModule) {
		t.Errorf("Lookup(README), not executable: %v, want ErrNoModule", err)
	}
	// Tampered on disk: refused.
	os.WriteFile(filepath.Join(dir, "poll.sh"), []byte("#!/bin/sh\nrm -rf /\n"), 0o755)
	if _, err := u.Lookup("poll"); !errors.Is(err, ErrTampered) {
		t.Errorf("Lookup of a tampered file: %v, want ErrTampered", err)
	}
	// A file whose content does not match its hash, or whose name is bad,
	// is not written; it fails alone.
	for _, b := range []File{
		{Name: "x.sh", Data: []byte("a"), SHA256: sum([]byte("b"))},
		{Name: "../evil", Data: []byte("a"), SHA256: sum([]byte("a"))},
		{Name: ".hidden", Data: []byte("a"), SHA256: sum([]byte("a"))},
		{Name: "", Data: []byte("a"), SHA256: sum([]byte("a"))},
	} {
		_, err := Sync(dir, append(append([]File(nil), back...), b))
		var se *SyncError
		if !errors.As(err, &se) || len(se.Failed) != 1 || se.Failed[b.Name] == nil {
			t.Errorf("Sync with the file %q: got %v, want a *SyncError for it alone", b.Name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, b.Name)); b.Name != "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Sync wrote the refused file %q: %v", b.Name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Sync wrote ../evil: %v", err)
	}
	// Removed on the master: removed here.
	changed, err = Sync(dir, back[:1])
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"engines.count", "engines.poll"}, changed); d != "" {
		t.Errorf("changed after removal (-want +got):\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "poll.sh")); !os.IsNotExist(err) {
		t.Errorf("poll.sh still there after it was removed on the master: %v", err)
	}
}

// TestSyncOneBadFile: a file that cannot be written fails alone and the
// others are synced. A name of 255 bytes (the most a Linux file system
// takes) made the temporary name NAME.tmp too long, and the whole sync
// failed; a name longer still (valid on the master's file system, not on
// the agent's) fails alone; an update that fails keeps the version synced
// before.
func TestSyncOneBadFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "engines")
	file := func(name, body string) File {
		return File{Name: name, Data: []byte(body), SHA256: sum([]byte(body)), Mode: 0o755}
	}
	v1 := file("keep.sh", "#!/bin/sh\necho v1\n")
	if _, err := Sync(dir, []File{v1}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("l", 252) + ".sh"
	tooLong := strings.Repeat("t", 300) + ".sh"
	v2 := file("keep.sh", "#!/bin/sh\necho v2\n")
	v2.SHA256 = sum([]byte("something else"))
	changed, err := Sync(dir, []File{file("a.sh", "#!/bin/sh\n"), file(long, "#!/bin/sh\n"), file(tooLong, "x"), v2})
	var se *SyncError
	if !errors.As(err, &se) {
		t.Fatalf("Sync: got %v, want a *SyncError", err)
	}
	var failed []string
	for n := range se.Failed {
		failed = append(failed, n)
	}
	if d := cmp.Diff([]string{"keep.sh", tooLong}, failed, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("failed files (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"engines.a", "engines." + strings.TrimSuffix(long, ".sh")}, changed); d != "" {
		t.Errorf("changed (-want +got):\n%s", d)
	}
	man, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(man) != 3 || man["a.sh"] == "" || man[long] == "" || man["keep.sh"] != v1.SHA256 {
		t.Errorf("manifest %v: want a.sh, the 255-byte name and keep.sh at v1", man)
	}
	u := UserDir{Dirs: []string{dir}, Verified: true}
	for _, mod := range []string{"a", strings.TrimSuffix(long, ".sh")} {
		if _, err := u.Lookup(mod); err != nil {
			t.Errorf("Lookup(%.20s…) after the sync: %v", mod, err)
		}
	}
	if m, err := u.Lookup("keep"); err != nil || m.Version != v1.SHA256 {
		t.Errorf("Lookup(keep): version %s, %v; want v1's %s", m.Version, err, v1.SHA256)
	}
}

// TestCollectRefusesEscapingSymlinks: a file of _engines that is a
// symlink leading out of the directory (a key the master can read) is not
// collected, so not sent to the agents, and is logged; a symlink to
// another file of the directory is followed.
func TestCollectRefusesEscapingSymlinks(t *testing.T) {
	root := t.TempDir()
	eng := filepath.Join(root, "_engines")
	os.MkdirAll(eng, 0o755)
	secret := filepath.Join(root, "master.pem")
	os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600)
	os.WriteFile(filepath.Join(eng, "good.sh"), []byte("#!/bin/sh\n"), 0o755)
	links := map[string]string{
		"inside.sh":  "good.sh",
		"leak.star":  "../master.pem",
		"abs.sh":     secret,
		"dotdot.sh":  "../_engines/../master.pem",
		"dangling":   "no-such-file",
		"parent.dir": "..",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(eng, name)); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zap.WarnLevel)
	files, err := Collect([]string{root}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Name)
		if strings.Contains(string(f.Data), "PRIVATE") {
			t.Errorf("collected %s with the secret's content", f.Name)
		}
	}
	if d := cmp.Diff([]string{"good.sh", "inside.sh"}, got); d != "" {
		t.Errorf("collected (-want +got):\n%s", d)
	}
	var warned []string
	for _, e := range logs.FilterMessageSnippet("engine file refused").All() {
		warned = append(warned, filepath.Base(e.ContextMap()["file"].(string)))
	}
	want := []string{"abs.sh", "dangling", "dotdot.sh", "leak.star", "parent.dir"}
	if d := cmp.Diff(want, warned, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("refusals logged (-want +got):\n%s", d)
	}
}

func TestUserEngineRestartsOnChange(t *testing.T) {
	dir := t.TempDir()
	write := func(msg string) {
		body := "#!/bin/sh\necho '{\"tag\": \"user/" + msg + "\", \"data\": {}}'\nwhile read -r l; do :; done\n"
		files := []File{{Name: "hello.sh", Data: []byte(body), SHA256: sum([]byte(body)), Mode: 0o755}}
		if _, err := Sync(dir, files); err != nil {
			t.Fatal(err)
		}
	}
	bus := event.NewBus(nil)
	sub := bus.Subscribe("user/*", 10)
	o := Options{Config: []any{"hello"}, Lookup: UserDir{Dirs: []string{dir}, Verified: true}.Lookup, Log: zaptest.NewLogger(t)}
	o.Env.Bus = bus
	m, err := New(o) // not synced yet: waits
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done; bus.Close() }()
	expect := func(tag string) {
		t.Helper()
		select {
		case ev := <-sub.C():
			if ev.Tag != tag {
				t.Fatalf("event %s, want %s", ev.Tag, tag)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s event", tag)
		}
	}
	write("v1")
	m.Refresh()
	expect("user/v1")
	write("v2")
	m.Refresh()
	expect("user/v2")
	if st := m.Status()[0]; st.Version != sum([]byte("#!/bin/sh\necho '{\"tag\": \"user/v2\", \"data\": {}}'\nwhile read -r l; do :; done\n")) {
		t.Errorf("version = %s, want the hash of v2", st.Version)
	}
}
