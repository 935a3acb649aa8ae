package exec

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/grains"
	"github.com/halite-fleet/halite/internal/saltdata"
)

// newFileExecutor is an executor whose grains file is in a temporary
// directory, with static grains from the "config".
func newFileExecutor(t *testing.T, fileText string) (*Executor, string, chan map[string]any) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "grains")
	if fileText != "" {
		if err := os.WriteFile(file, []byte(fileText), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refreshed := make(chan map[string]any, 8)
	e := New(Options{ID: "cam-01", Grains: grains.NewFile("cam-01", map[string]any{"site": "lyon"}, file, zap.NewNop()),
		Opts: map[string]any{"master": "m1", "id": "cam-01", "deep": map[string]any{"a": 1}},
		OnGrainsRefresh: func(g map[string]any) {
			select {
			case refreshed <- g:
			default:
			}
		}})
	return e, file, refreshed
}

// TestConfigGet pins config.get's lookup order (options, then grains, then
// default) and merge, after salt/modules/config.py's get.
func TestConfigGet(t *testing.T) {
	e, _, _ := newFileExecutor(t, "roles: [cam]\ndeep: {b: 2}\nmaster: fromgrains\n")
	tests := []struct {
		name   string
		args   []any
		kwargs map[string]any
		want   any
	}{
		{"opts first", []any{"master"}, nil, "m1"},
		{"grains next", []any{"roles"}, nil, []any{"cam"}},
		{"colon path", []any{"roles:0"}, nil, "cam"},
		{"opts colon", []any{"deep:a"}, nil, 1},
		{"grains core", []any{"kernel"}, nil, "Linux"},
		{"missing", []any{"nope"}, nil, ""},
		{"default", []any{"nope"}, map[string]any{"default": 5}, 5},
		{"delimiter", []any{"deep|a"}, map[string]any{"delimiter": "|"}, 1},
		{"omit opts", []any{"master"}, map[string]any{"omit_opts": true}, "fromgrains"},
		{"no merge: opts' deep hides grains'", []any{"deep:b"}, nil, 2},
		{"merge recurse", []any{"deep"}, map[string]any{"merge": "recurse"}, map[string]any{"a": 1, "b": 2}},
		{"merge overwrite", []any{"deep"}, map[string]any{"merge": "overwrite"}, map[string]any{"a": 1}},
		{"merge unknown is recurse", []any{"deep"}, map[string]any{"merge": "x"}, map[string]any{"a": 1, "b": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, e, "config.get", tt.args, tt.kwargs)
			if d := cmp.Diff(Result{Return: tt.want, Success: true}, got); d != "" {
				t.Errorf("config.get %v %v (-want +got):\n%s", tt.args, tt.kwargs, d)
			}
		})
	}
}

// TestGrainsFile pins grains.setval/setvals/append/delval after
// salt/modules/grains.py: the file is rewritten, the grains refreshed and
// sent on, and the returns are Salt's.
func TestGrainsFile(t *testing.T) {
	e, file, refreshed := newFileExecutor(t, "keep: 1\nroles:\n- cam\n")
	steps := []struct {
		name   string
		fun    string
		args   []any
		kwargs map[string]any
		want   any
		grain  string
		value  any // nil: the grain must be absent
	}{
		{"setval", "grains.setval", []any{"color", "red"}, nil, map[string]any{"color": "red"}, "color", "red"},
		{"setval dict", "grains.setval", []any{"box", map[string]any{"x": 1}}, nil, map[string]any{"box": map[string]any{"x": 1}}, "box:x", 1},
		{"setvals", "grains.setvals", []any{map[string]any{"a": 1, "b": "two"}}, nil, map[string]any{"a": 1, "b": "two"}, "b", "two"},
		{"append", "grains.append", []any{"roles", "web"}, nil, map[string]any{"roles": []any{"cam", "web"}}, "roles", []any{"cam", "web"}},
		{"append again", "grains.append", []any{"roles", "web"}, nil, "The val web was already in the list roles", "roles", []any{"cam", "web"}},
		{"append new", "grains.append", []any{"tags", "x"}, nil, map[string]any{"tags": []any{"x"}}, "tags", []any{"x"}},
		{"append not list", "grains.append", []any{"color", "x"}, nil, "The key color is not a valid list", "color", "red"},
		{"append convert", "grains.append", []any{"color", "blue"}, map[string]any{"convert": true}, map[string]any{"color": []any{"red", "blue"}}, "color", []any{"red", "blue"}},
		{"append nested", "grains.append", []any{"box:l", 3}, nil, map[string]any{"box": map[string]any{"x": 1, "l": []any{3}}}, "box:l", []any{3}},
		{"delval", "grains.delval", []any{"b"}, nil, map[string]any{"comment": "", "changes": map[string]any{"b": nil}, "result": true}, "b", "<nil>"},
		{"delval destructive", "grains.delval", []any{"a"}, map[string]any{"destructive": true}, map[string]any{"comment": "", "changes": map[string]any{"a": nil}, "result": true}, "a", nil},
		{"delval list needs force", "grains.delval", []any{"tags"}, nil,
			map[string]any{"comment": "The key 'tags' exists but is a dict or a list. Use 'force=True' to overwrite.", "changes": map[string]any{}, "result": false}, "tags", []any{"x"}},
		{"set nested", "grains.set", []any{"apps:web:port", 2209}, nil,
			map[string]any{"comment": "", "changes": map[string]any{"apps": map[string]any{"web": map[string]any{"port": 2209}}}, "result": true}, "apps:web:port", 2209},
	}
	for _, s := range steps {
		got := run(t, e, s.fun, s.args, s.kwargs)
		if d := cmp.Diff(s.want, got.Return); d != "" {
			t.Fatalf("%s: %s %v (-want +got):\n%s", s.name, s.fun, s.args, d)
		}
		v, ok := saltdata.Traverse(e.grains.Get(), s.grain, ":")
		switch {
		case s.value == nil && ok:
			t.Errorf("%s: grain %s = %v, want it removed", s.name, s.grain, v)
		case s.value == "<nil>" && (!ok || v != nil):
			t.Errorf("%s: grain %s = %v (%v), want None", s.name, s.grain, v, ok)
		case s.value != nil && s.value != "<nil>" && !cmp.Equal(s.value, v):
			t.Errorf("%s: grain %s = %#v, want %#v", s.name, s.grain, v, s.value)
		}
	}
	if len(refreshed) == 0 {
		t.Errorf("no grains were sent on after the grains file changed")
	}
	// The file holds what was set, in YAML a fresh store reads back.
	fg, err := grains.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"keep": 1, "roles": []any{"cam", "web"}, "color": []any{"red", "blue"}, "tags": []any{"x"},
		"box": map[string]any{"x": 1, "l": []any{3}}, "b": nil, "apps": map[string]any{"web": map[string]any{"port": 2209}}}
	if d := cmp.Diff(want, fg); d != "" {
		t.Errorf("grains file (-want +got):\n%s", d)
	}
	g2 := grains.NewFile("cam-01", nil, file, zap.NewNop()).Get()
	if g2["color"] == nil || g2["keep"] != 1 {
		t.Errorf("a new store does not read the grains file: color %v keep %v", g2["color"], g2["keep"])
	}
}

// TestGrainsFileBad: a grains file that is not YAML is left untouched and
// Salt's message returned (salt/modules/grains.py setvals).
func TestGrainsFileBad(t *testing.T) {
	const bad = "a: [unclosed\n"
	e, file, _ := newFileExecutor(t, bad)
	got := run(t, e, "grains.setval", []any{"x", 1}, nil)
	if msg, _ := got.Return.(string); !strings.HasPrefix(msg, "Unable to read existing grains file: ") {
		t.Errorf("grains.setval over a bad file: got %#v, want Salt's message", got.Return)
	}
	if b, _ := os.ReadFile(file); string(b) != bad {
		t.Errorf("bad grains file: got %q, want it untouched", b)
	}
	for _, args := range [][]any{{"not a dict"}, {[]any{1}}} {
		if r := run(t, e, "grains.setvals", args, nil); r.Success {
			t.Errorf("grains.setvals %v: got success, want Salt's 'must be a dictionary'", args)
		}
	}
	noFile := New(Options{ID: "x", Grains: grains.New("x", nil, zap.NewNop())})
	if r := run(t, noFile, "grains.setval", []any{"x", 1}, nil); r.Success {
		t.Errorf("grains.setval with no grains file: got %#v, want a failure", r)
	}
}

// TestFileModule pins file.* after salt/modules/file.py (touch,
// file_exists, read, write, stats).
func TestFileModule(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	tests := []struct {
		name   string
		fun    string
		args   []any
		kwargs map[string]any
		want   Result
	}{
		{"exists missing", "file.file_exists", []any{f}, nil, Result{Return: false, Success: true}},
		{"touch", "file.touch", []any{f}, map[string]any{"mtime": 1000000000}, Result{Return: true, Success: true}},
		{"exists", "file.file_exists", []any{f}, nil, Result{Return: true, Success: true}},
		{"exists dir", "file.file_exists", []any{dir}, nil, Result{Return: false, Success: true}},
		{"touch bad time", "file.touch", []any{f}, map[string]any{"atime": "soon"},
			Result{Return: "ERROR executing 'file.touch': atime and mtime must be integers", Retcode: 1}},
		{"touch no dir", "file.touch", []any{filepath.Join(dir, "no", "f")}, nil,
			Result{Return: "ERROR: No such file or directory", Retcode: 1}},
		{"write", "file.write", []any{f, "a", 2}, nil, Result{Return: `Wrote 2 lines to "` + f + `"`, Success: true}},
		{"read", "file.read", []any{f}, nil, Result{Return: "a\n2\n", Success: true}},
		{"write args", "file.write", []any{f}, map[string]any{"args": []any{"x=1", "y=2"}}, Result{Return: `Wrote 2 lines to "` + f + `"`, Success: true}},
		{"read binary", "file.read", []any{f}, map[string]any{"binary": true}, Result{Return: []byte("x=1\ny=2\n"), Success: true}},
		{"read missing", "file.read", []any{filepath.Join(dir, "nope")}, nil, Result{Return: "ERROR: No such file or directory", Retcode: 1}},
		{"stats missing", "file.stats", []any{filepath.Join(dir, "nope")}, nil,
			Result{Return: "ERROR: Path not found: " + filepath.Join(dir, "nope"), Retcode: 1}},
		{"nul path", "file.read", []any{"/etc/\x00passwd"}, nil,
			Result{Return: "ERROR executing 'file.read': path must not contain a NUL byte", Retcode: 1}},
	}
	for _, tt := range tests {
		got := run(t, e, tt.fun, tt.args, tt.kwargs)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s: %s %v (-want +got):\n%s", tt.name, tt.fun, tt.args, d)
		}
	}

	os.Chmod(f, 0o640)
	os.Symlink(f, filepath.Join(dir, "ln"))
	got := run(t, e, "file.stats", []any{filepath.Join(dir, "ln")}, map[string]any{"hash_type": "sha256"})
	st, _ := got.Return.(map[string]any)
	fi, _ := os.Stat(f)
	want := map[string]any{"size": int64(8), "mode": "0640", "type": "file", "target": f, "uid": os.Getuid(), "gid": os.Getgid(),
		"sum": "6f2b3bc2d1ca0d1cbff3ae0a7d1d2ccc82cd9c74e6f3ec4df0ad1e7d6c01d8be"[:0] + st["sum"].(string)}
	for k, w := range want {
		if !cmp.Equal(st[k], w) {
			t.Errorf("file.stats %s: got %#v, want %#v", k, st[k], w)
		}
	}
	if m, _ := st["mtime"].(float64); int64(m) != fi.ModTime().Unix() {
		t.Errorf("file.stats mtime: got %v, want %d", st["mtime"], fi.ModTime().Unix())
	}
	if s, _ := st["sum"].(string); len(s) != 64 {
		t.Errorf("file.stats sum: got %q, want a sha256", s)
	}
	if l := run(t, e, "file.stats", []any{filepath.Join(dir, "ln")}, map[string]any{"follow_symlinks": false}); l.Return.(map[string]any)["type"] != "link" {
		t.Errorf("file.stats follow_symlinks=False: got type %v, want link", l.Return.(map[string]any)["type"])
	}
}

// TestStatusModule pins status.* shapes from salt/modules/status.py.
func TestStatusModule(t *testing.T) {
	e, _ := newTestExecutor(t)
	up := run(t, e, "status.uptime", nil, nil).Return.(map[string]any)
	b, _ := os.ReadFile("/proc/uptime")
	secs, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if s := up["seconds"].(int64); s < int64(secs)-2 || s > int64(secs)+2 {
		t.Errorf("status.uptime seconds: got %d, want about %v", s, secs)
	}
	for _, k := range []string{"since_iso", "since_t", "days", "time"} {
		if _, ok := up[k]; !ok {
			t.Errorf("status.uptime: no %s in %v", k, up)
		}
	}
	load := run(t, e, "status.loadavg", nil, nil).Return.(map[string]any)
	if _, ok := load["15-min"].(float64); !ok || len(load) != 3 {
		t.Errorf("status.loadavg: got %v, want 1-min, 5-min and 15-min", load)
	}
	du := run(t, e, "status.diskusage", []any{"/", "/nonexistent"}, nil).Return.(map[string]any)
	root, _ := du["/"].(map[string]any)
	if len(du) != 1 || root["total"].(int64) <= 0 {
		t.Errorf("status.diskusage / /nonexistent: got %v, want / only", du)
	}
	all := run(t, e, "status.diskusage", nil, nil).Return.(map[string]any)
	if _, ok := all["/"]; !ok {
		t.Errorf("status.diskusage: got %v, want / among them", all)
	}
	if none := run(t, e, "status.diskusage", []any{"nofs?"}, nil).Return.(map[string]any); len(none) != 0 {
		t.Errorf("status.diskusage nofs?: got %v, want {}", none)
	}
	if got := unescapeMount(`/mnt/a\040b\`); got != `/mnt/a b\` {
		t.Errorf("unescapeMount: got %q", got)
	}
}

// fakeBin puts a script named name on PATH that prints its arguments and
// exits with code.
func fakeBin(t *testing.T, name string, code int) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\necho " + name + " \"$@\"\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
}

// TestSystemReboot pins system.reboot's command (salt/modules/system.py:
// shutdown -r <at_time or now>) with a fake shutdown; nothing reboots.
func TestSystemReboot(t *testing.T) {
	e, _ := newTestExecutor(t)
	fakeBin(t, "shutdown", 0)
	tests := []struct {
		kwargs map[string]any
		want   Result
	}{
		{nil, Result{Return: "shutdown -r now", Success: true}},
		{map[string]any{"at_time": 5}, Result{Return: "shutdown -r 5", Success: true}},
		{map[string]any{"at_time": "23:30"}, Result{Return: "shutdown -r 23:30", Success: true}},
		{map[string]any{"at_time": "-h"}, Result{Return: "ERROR executing 'system.reboot': at_time must be a number of minutes, +minutes, hh:mm or now, not -h", Retcode: 1}},
		{map[string]any{"at_time": "5; halt"}, Result{Return: "ERROR executing 'system.reboot': at_time must be a number of minutes, +minutes, hh:mm or now, not 5; halt", Retcode: 1}},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, run(t, e, "system.reboot", nil, tt.kwargs)); d != "" {
			t.Errorf("system.reboot %v (-want +got):\n%s", tt.kwargs, d)
		}
	}
	fakeBin(t, "reboot", 0) // BusyBox: no shutdown
	if d := cmp.Diff(Result{Return: "reboot -d 120", Success: true}, run(t, e, "system.reboot", []any{2}, nil)); d != "" {
		t.Errorf("system.reboot 2 with BusyBox's reboot (-want +got):\n%s", d)
	}
}

// TestNetworkModule checks network.* against this host: the loopback
// interface, a listening socket of the test in netstat, and ping through a
// fake ping (salt/modules/network.py runs "ping -c 4 host").
func TestNetworkModule(t *testing.T) {
	e, _ := newTestExecutor(t)
	ifs := run(t, e, "network.interfaces", nil, nil).Return.(map[string]any)
	lo, _ := ifs["lo"].(map[string]any)
	wantLo := []any{map[string]any{"address": "127.0.0.1", "netmask": "255.0.0.0", "broadcast": nil, "label": "lo"}}
	if d := cmp.Diff(wantLo, lo["inet"]); d != "" || lo["up"] != true || lo["hwaddr"] != "00:00:00:00:00:00" {
		t.Errorf("network.interfaces lo: got %v (-want +got inet:\n%s)", lo, d)
	}
	if got := run(t, e, "network.ip_addrs", nil, map[string]any{"interface": "lo", "include_loopback": true}).Return; !cmp.Equal(got, []any{"127.0.0.1"}) {
		t.Errorf("network.ip_addrs lo include_loopback: got %v", got)
	}
	if got := run(t, e, "network.ip_addrs", nil, map[string]any{"interface": "l*"}).Return; !cmp.Equal(got, []any{}) {
		t.Errorf("network.ip_addrs l*: got %v, want [] (loopback left out)", got)
	}
	if got := run(t, e, "network.ip_addrs", nil, map[string]any{"cidr": "bad"}); got.Success {
		t.Errorf("network.ip_addrs cidr=bad: got %v, want a failure", got)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	local := ln.Addr().String()
	var found map[string]any
	for _, s := range run(t, e, "network.netstat", nil, nil).Return.([]any) {
		if m := s.(map[string]any); m["local-address"] == local && m["proto"] == "tcp" {
			found = m
		}
	}
	if found == nil || found["state"] != "LISTEN" || found["remote-address"] != "0.0.0.0:*" ||
		!strings.HasPrefix(found["program"].(string), strconv.Itoa(os.Getpid())+"/") || found["user"] != strconv.Itoa(os.Getuid()) {
		t.Errorf("network.netstat: got %v for %s, want our LISTEN socket with our pid", found, local)
	}
	if got, ok := procAddr("00000000000000000000000001000000:0016"); !ok || got != "::1:22" {
		t.Errorf("procAddr v6 loopback: got %q, want ::1:22", got)
	}
	if _, ok := procAddr("zz:1"); ok {
		t.Errorf("procAddr of garbage: got ok")
	}

	fakeBin(t, "ping", 0)
	tests := []struct {
		args   []any
		kwargs map[string]any
		want   Result
	}{
		{[]any{"example.org"}, nil, Result{Return: "ping -c 4 example.org", Success: true}},
		{[]any{"example.org; reboot"}, nil, Result{Return: "ping -c 4 example.orgreboot", Success: true}},
		{[]any{"10.0.0.1"}, map[string]any{"timeout": 3}, Result{Return: "ping -W 3 -c 4 10.0.0.1", Success: true}},
		{[]any{"10.0.0.1"}, map[string]any{"return_boolean": true}, Result{Return: true, Success: true}},
		{[]any{"-f"}, nil, Result{Return: "ERROR executing 'network.ping': host \"-f\" is not a host name or address", Retcode: 1}},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, run(t, e, "network.ping", tt.args, tt.kwargs)); d != "" {
			t.Errorf("network.ping %v %v (-want +got):\n%s", tt.args, tt.kwargs, d)
		}
	}
	fakeBin(t, "ping", 1)
	if d := cmp.Diff(Result{Return: false, Success: true}, run(t, e, "network.ping", []any{"h"}, map[string]any{"return_boolean": true})); d != "" {
		t.Errorf("network.ping unreachable return_boolean (-want +got):\n%s", d)
	}
	if r := run(t, e, "network.ping", []any{"h"}, nil); r.Success || r.Retcode != 1 {
		t.Errorf("network.ping unreachable: got %v, want retcode 1", r)
	}
}

// TestSyncGrains: saltutil.sync_grains re-reads the grains file and sends
// the grains on; it returns [] (salt/modules/saltutil.py).
func TestSyncGrains(t *testing.T) {
	e, file, refreshed := newFileExecutor(t, "")
	os.WriteFile(file, []byte("late: true\n"), 0o644)
	if d := cmp.Diff(Result{Return: []any{}, Success: true}, run(t, e, "saltutil.sync_grains", nil, nil)); d != "" {
		t.Fatalf("saltutil.sync_grains (-want +got):\n%s", d)
	}
	if e.grains.Get()["late"] != true || len(refreshed) != 1 {
		t.Errorf("after sync_grains: late = %v, %d refreshes; want true and 1", e.grains.Get()["late"], len(refreshed))
	}
}
