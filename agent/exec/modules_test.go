package exec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGrainsModule(t *testing.T) {
	e, _ := newTestExecutor(t)
	g := e.grains.Get()
	tests := []struct {
		name   string
		fun    string
		args   []any
		kwargs map[string]any
		want   any
	}{
		{"get", "grains.get", []any{"id"}, nil, "cam-01"},
		{"get nested list", "grains.get", []any{"roles:1"}, nil, "outdoor"},
		{"get nested map", "grains.get", []any{"site:name"}, nil, "lyon"},
		{"get delimiter", "grains.get", []any{"site|name"}, map[string]any{"delimiter": "|"}, "lyon"},
		{"get missing", "grains.get", []any{"nope"}, nil, ""},
		{"get default", "grains.get", []any{"nope"}, map[string]any{"default": "httpd"}, "httpd"},
		{"get default positional", "grains.get", []any{"nope", 7}, nil, 7},
		{"item", "grains.item", []any{"id", "site:name", "nope"}, nil,
			map[string]any{"id": "cam-01", "site:name": "lyon", "nope": ""}},
		{"item default", "grains.item", []any{"nope"}, map[string]any{"default": "x"}, map[string]any{"nope": "x"}},
		{"item none", "grains.item", nil, nil, map[string]any{}},
		{"items", "grains.items", nil, nil, g},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, e, tt.fun, tt.args, tt.kwargs)
			if d := cmp.Diff(Result{Return: tt.want, Success: true}, got); d != "" {
				t.Errorf("%s %v (-want +got):\n%s", tt.fun, tt.args, d)
			}
		})
	}

	got := run(t, e, "grains.ls", nil, nil)
	names, _ := got.Return.([]any)
	var want []any
	for _, k := range sortedKeys(g) {
		want = append(want, k)
	}
	if d := cmp.Diff(want, names); d != "" || !slices.Contains(names, any("roles")) {
		t.Errorf("grains.ls (-want +got):\n%s", d)
	}
}

func TestRefreshGrains(t *testing.T) {
	e, refreshed := newTestExecutor(t)
	before := e.grains.Get()
	got := run(t, e, "saltutil.refresh_grains", nil, map[string]any{"refresh_pillar": false})
	if d := cmp.Diff(Result{Return: true, Success: true}, got); d != "" {
		t.Fatalf("saltutil.refresh_grains (-want +got):\n%s", d)
	}
	select {
	case g := <-refreshed:
		if g["id"] != "cam-01" || g["site"] == nil {
			t.Errorf("refreshed grains: got id %v site %v, want cam-01 and the static site", g["id"], g["site"])
		}
		now := e.grains.Get()
		if fmt.Sprintf("%p", now) != fmt.Sprintf("%p", g) || fmt.Sprintf("%p", now) == fmt.Sprintf("%p", before) {
			t.Errorf("the store does not hold the refreshed grains")
		}
	default:
		t.Errorf("OnGrainsRefresh was not called")
	}
}

func TestSysModule(t *testing.T) {
	e, _ := newTestExecutor(t)
	funs := e.Functions()
	for _, want := range []string{"test.ping", "test.version", "test.echo", "test.arg", "test.sleep",
		"cmd.run", "cmd.run_all", "cmd.retcode", "grains.items", "grains.get", "grains.item", "grains.ls",
		"sys.list_functions", "sys.doc", "saltutil.running", "saltutil.kill_job", "saltutil.refresh_grains"} {
		if !slices.Contains(funs, want) {
			t.Errorf("Functions(): %s missing from %v", want, funs)
		}
		if doc, ok := e.Doc(want); !ok || doc == "" {
			t.Errorf("Doc(%q): got %q, %v, want a documentation", want, doc, ok)
		}
	}
	if !slices.IsSorted(funs) {
		t.Errorf("Functions() is not sorted: %v", funs)
	}
	if _, ok := e.Doc("nope.nope"); ok {
		t.Errorf("Doc(nope.nope): got ok, want not found")
	}

	tests := []struct {
		name string
		fun  string
		args []any
		want any
	}{
		{"list module", "sys.list_functions", []any{"cmd"}, []any{"cmd.retcode", "cmd.run", "cmd.run_all"}},
		{"list module dot", "sys.list_functions", []any{"grains."}, []any{"grains.append", "grains.delval", "grains.get", "grains.item", "grains.items", "grains.ls", "grains.set", "grains.setval", "grains.setvals"}},
		{"list glob", "sys.list_functions", []any{"grains.i*"}, []any{"grains.item", "grains.items"}},
		{"list two", "sys.list_functions", []any{"test.ping", "cmd.run"}, []any{"cmd.run", "test.ping"}},
		{"list none", "sys.list_functions", []any{"nomodule"}, []any{}},
		{"modules", "sys.list_modules", []any{"s*"}, []any{"saltutil", "status", "sys", "system"}},
		{"doc one", "sys.doc", []any{"test.ping"}, map[string]any{"test.ping": registry["test.ping"].doc}},
		{"doc unknown", "sys.doc", []any{"nope.nope"}, map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, e, tt.fun, tt.args, nil)
			want := Result{Return: tt.want, Success: true}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s %v (-want +got):\n%s", tt.fun, tt.args, d)
			}
		})
	}

	all := run(t, e, "sys.list_functions", nil, nil)
	if l, _ := all.Return.([]any); len(l) != len(funs) {
		t.Errorf("sys.list_functions: got %d functions, want %d", len(l), len(funs))
	}
	docs := run(t, e, "sys.doc", []any{"cmd"}, nil)
	if m, _ := docs.Return.(map[string]any); len(m) != 3 || !strings.Contains(m["cmd.run"].(string), "process group") {
		t.Errorf("sys.doc cmd: got %v, want the 3 cmd docs", docs.Return)
	}
}

// startJob runs req in the background and returns a channel with its result.
func startJob(e *Executor, req Request) <-chan Result {
	done := make(chan Result, 1)
	go func() { done <- e.Run(context.Background(), req) }()
	return done
}

func TestRunningAndKillJob(t *testing.T) {
	e, _ := newTestExecutor(t)
	const jid = "20260101000000000042"
	done := startJob(e, Request{JID: jid, Fun: "test.sleep", Args: []any{60}, Kwargs: map[string]any{"__pub_x": 1},
		Tgt: "cam-*", User: "root"})
	waitFor(t, "the job to be running", func() bool { return len(e.running(nil)) == 1 })

	got := run(t, e, "saltutil.running", nil, nil)
	list, _ := got.Return.([]any)
	if len(list) != 1 {
		t.Fatalf("saltutil.running: got %#v, want one job (not itself)", got.Return)
	}
	entry := list[0].(map[string]any)
	delete(entry, "_stamp")
	want := map[string]any{"jid": jid, "fun": "test.sleep", "arg": []any{60, map[string]any{"__pub_x": 1, "__kwarg__": true}},
		"pid": os.Getpid(), "tgt": "cam-*", "tgt_type": "glob", "user": "root", "ret": ""}
	if d := cmp.Diff(want, entry); d != "" {
		t.Errorf("saltutil.running entry (-want +got):\n%s", d)
	}

	found := run(t, e, "saltutil.find_job", []any{jid}, nil)
	if m, _ := found.Return.(map[string]any); m["jid"] != jid {
		t.Errorf("saltutil.find_job %s: got %#v, want the job", jid, found.Return)
	}
	if nf := run(t, e, "saltutil.find_job", []any{"20260101000000000099"}, nil); !cmp.Equal(nf.Return, map[string]any{}) {
		t.Errorf("saltutil.find_job of no job: got %#v, want {}", nf.Return)
	}
	if nk := run(t, e, "saltutil.kill_job", []any{"20260101000000000099"}, nil); nk.Return != "" || !nk.Success {
		t.Errorf("saltutil.kill_job of no job: got %#v, want \"\"", nk)
	}

	killed := run(t, e, "saltutil.kill_job", []any{jid}, nil)
	wantMsg := fmt.Sprintf("Signal 9 sent to job %s at pid %d", jid, os.Getpid())
	if d := cmp.Diff(Result{Return: wantMsg, Success: true}, killed); d != "" {
		t.Errorf("saltutil.kill_job (-want +got):\n%s", d)
	}
	select {
	case r := <-done:
		want := Result{Return: "ERROR: job " + jid + " was killed by saltutil.kill_job", Retcode: 1}
		if d := cmp.Diff(want, r); d != "" {
			t.Errorf("killed job (-want +got):\n%s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("killed job did not return")
	}
	if n := len(e.running(nil)); n != 0 {
		t.Errorf("running jobs after kill: got %d, want 0", n)
	}
}

func TestKillJobKillsCommand(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see processes")
	}
	e, _ := newTestExecutor(t)
	const jid = "20260101000000000043"
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := startJob(e, Request{JID: jid, Fun: "cmd.run", Args: []any{startsBackgroundChild(pidFile)}})
	child := readPid(t, pidFile)
	run(t, e, "saltutil.kill_job", []any{jid}, nil)
	select {
	case r := <-done:
		if msg, _ := r.Return.(string); r.Success || !strings.Contains(msg, "was killed") {
			t.Errorf("killed cmd.run: got %#v, want a killed failure", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("killed cmd.run did not return")
	}
	waitFor(t, "the command's background child to be killed", func() bool { return gone(child) })
}
