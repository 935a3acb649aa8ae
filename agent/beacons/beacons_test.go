package beacons

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/internal/testwait"
)

// fakeProc writes a proc tree with the given files.
func fakeProc(t *testing.T, files map[string]string) *env {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &env{proc: dir, sys: dir}
}

func yamlValueB(b *testing.B, s string) any {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		b.Fatalf("yaml %q: %v", s, err)
	}
	return v
}

func yamlValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("yaml %q: %v", s, err)
	}
	return v
}

func check(t *testing.T, name, conf string, e *env) []map[string]any {
	t.Helper()
	s, err := ParseSpec(name, yamlValue(t, conf), time.Second)
	if err != nil {
		t.Fatalf("ParseSpec(%s): %v", name, err)
	}
	b, err := s.build(e)
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	if c, ok := b.(interface{ Close() error }); ok {
		defer c.Close()
	}
	out, err := b.Check(context.Background())
	if err != nil {
		t.Fatalf("check %s: %v", name, err)
	}
	return out
}

const meminfo80 = "MemTotal:       1000000 kB\nMemFree:         100000 kB\nMemAvailable:    200000 kB\nSwapTotal:       400000 kB\nSwapFree:        100000 kB\n"

func TestBeaconsFakeProc(t *testing.T) {
	e := fakeProc(t, map[string]string{
		"meminfo":     meminfo80,
		"loadavg":     "0.50 1.75 3.10 1/200 1234\n",
		"1/comm":      "camd\n",
		"1/cmdline":   "/usr/sbin/camd\x00-f\x00",
		"2/comm":      "sh\n",
		"net/dev":     "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n  eth0: 1000 10 1 2 0 0 0 0 2000 20 3 4 0 0 0 0\n    lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n",
		"stat":        "cpu  10 20 30 40 50 60 70 80 0 0\nctxt 99\nbtime 1700000000\nprocesses 5\nprocs_running 1\nprocs_blocked 0\n",
		"uptime":      "123.45 100.00\n",
		"self/mounts": "rootfs / rootfs rw 0 0\n",
	})
	tests := []struct {
		name, conf string
		want       []map[string]any
	}{
		{"memusage", "[{percent: 63%}]", []map[string]any{{"memusage": 80.0}}},
		{"memusage", "[{percent: '90%'}]", nil},
		{"swapusage", "[{percent: 50}]", []map[string]any{{"swapusage": 75.0}}},
		{"swapusage", "[{percent: 80%}]", nil},
		{"load", "[{averages: {1m: [0.0, 2.0], 15m: [0.0, 3.0]}}]", []map[string]any{{"1m": 0.5, "5m": 1.75, "15m": 3.1}}},
		{"load", "[{averages: {1m: [0.0, 2.0], 15m: [0.0, 4.0]}}]", nil},
		{"ps", "[{processes: {camd: running, telnetd: stopped, sh: stopped}}]", []map[string]any{{"camd": "Running"}, {"telnetd": "Stopped"}}},
		{"service", "[{services: {camd: {}, nginx: {}}}]", []map[string]any{
			{"camd": map[string]any{"running": true}, "service_name": "camd", "tag": "camd"},
			{"nginx": map[string]any{"running": false}, "service_name": "nginx", "tag": "nginx"},
		}},
		{"network_info", "[{interfaces: {eth0: {type: greater, bytes_recv: 500}}}]", []map[string]any{{"interface": "eth0", "network_info": map[string]any{
			"bytes_recv": uint64(1000), "packets_recv": uint64(10), "errin": uint64(1), "dropin": uint64(2),
			"bytes_sent": uint64(2000), "packets_sent": uint64(20), "errout": uint64(3), "dropout": uint64(4)}}}},
		{"network_info", "[{interfaces: {eth0: {type: less, bytes_recv: 500}}}]", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.conf, func(t *testing.T) {
			got := check(t, tt.name, tt.conf, e)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

func TestStatusBeacon(t *testing.T) {
	e := fakeProc(t, map[string]string{
		"meminfo": meminfo80, "loadavg": "0.50 1.75 3.10 1/200 1234\n", "uptime": "123.45 100.00\n",
		"stat": "cpu  10 20 30 40 50 60 70 80 0 0\nctxt 99\n",
	})
	got := check(t, "status", "[{loadavg: ['1m']}, {meminfo: [MemTotal]}, {uptime: }]", e)
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1: %v", len(got), got)
	}
	if _, ok := got[0]["tag"].(string); !ok {
		t.Errorf("status event has no time tag: %v", got[0])
	}
	want := map[string]any{
		"loadavg": map[string]any{"1m": 0.5},
		"meminfo": map[string]any{"MemTotal": map[string]any{"value": uint64(1000000), "unit": "kB"}},
		"uptime":  map[string]any{"seconds": 123.45},
	}
	if d := cmp.Diff(want, got[0]["data"]); d != "" {
		t.Errorf("status data (-want +got):\n%s", d)
	}
}

func TestDiskusageRealRoot(t *testing.T) {
	// The real root file system: at 0% it always fires, at 100% only when full.
	got := check(t, "diskusage", "[{/: 0%}]", defaultEnv())
	if len(got) != 1 || got[0]["mount"] != "/" {
		t.Fatalf("diskusage at 0%%: got %v, want one event for /", got)
	}
	if p, ok := got[0]["diskusage"].(float64); !ok || p < 0 || p > 100 {
		t.Errorf("diskusage = %v, want a percentage", got[0]["diskusage"])
	}
}

func TestBadOptions(t *testing.T) {
	tests := []struct{ name, conf, want string }{
		{"memusage", "[{percent: lots}]", "beacon memusage: option percent: expected a percentage"},
		{"memusage", "[{interval: 10}]", "beacon memusage: option percent is required"},
		{"memusage", "[{percent: 50%}, {percnt: 3}]", "beacon memusage: unknown option percnt"},
		{"memusage", "[{percent: 50%}, {interval: -1}]", "beacon memusage: option interval: expected a positive number"},
		{"load", "[{averages: {2m: [0, 1]}}]", `beacon load: option averages: unknown average "2m"`},
		{"ps", "[{processes: {x: maybe}}]", "beacon ps: option processes: x: expected running or stopped"},
		{"service", "[{services: {x: {onchangeonly: perhaps}}}]", "beacon service: option services: x: option onchangeonly: expected a boolean"},
		{"log", "[{file: /tmp/x}, {tags: {t: {regex: '('}}}]", "beacon log: option tags: t: regex: bad regular expression"},
		{"inotify", "[{files: {/nonexistent/x: {}}}]", "beacon inotify: option files: /nonexistent/x:"},
		{"inotify", "[{files: {/tmp: {mask: [bogus]}}}]", "beacon inotify: option files: /tmp: mask: unknown mask bogus"},
		{"nosuch", "[{interval: 1}]", `beacon nosuch: no beacon module "nosuch"`},
		{"mem2", "[{beacon_module: memusage}, {percent: 200}]", "beacon mem2: option percent: expected a percentage"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.conf, func(t *testing.T) {
			_, err := ParseSpec(tt.name, yamlValue(t, tt.conf), time.Second)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseSpec error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLogBeacon(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.log")
	os.WriteFile(file, []byte("old Failed password for root\n"), 0o644)
	s, err := ParseSpec("log", yamlValue(t, "[{file: "+file+"}, {tags: {sshd_fail: {regex: 'Failed password for (\\w+)'}}}]"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.build(defaultEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer b.(interface{ Close() error }).Close()
	ctx := context.Background()
	if got, _ := b.Check(ctx); len(got) != 0 {
		t.Fatalf("first check read old lines: %v", got)
	}
	f, _ := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("ok line\nnew Failed password for admin\npartial Failed password for x")
	f.Close()
	got, _ := b.Check(ctx)
	want := []map[string]any{{"tag": "sshd_fail", "match": "yes", "raw": "new Failed password for admin", "error": "no"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("after append (-want +got):\n%s", d)
	}
	// Rotation: the old file's rest is read, then the new file from its start.
	f, _ = os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(" end\n")
	f.Close()
	os.Rename(file, file+".1")
	os.WriteFile(file, []byte("rotated Failed password for bob\n"), 0o644)
	got, _ = b.Check(ctx)
	if len(got) != 2 || got[0]["raw"] != "partial Failed password for x end" || got[1]["raw"] != "rotated Failed password for bob" {
		t.Errorf("after rotation: got %v", got)
	}
}

func TestInotifyBeacon(t *testing.T) {
	dir := t.TempDir()
	s, err := ParseSpec("inotify", yamlValue(t, "[{files: {"+dir+": {mask: [create, modify], recurse: True, auto_add: True}}}]"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.build(defaultEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer b.(interface{ Close() error }).Close()
	os.WriteFile(filepath.Join(dir, "a.conf"), []byte("x"), 0o644)
	got, err := b.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ev := range got {
		seen[ev["change"].(string)+" "+ev["path"].(string)] = true
		if ev["tag"] != ev["path"] {
			t.Errorf("event tag %v, want its path %v", ev["tag"], ev["path"])
		}
	}
	if !seen["IN_CREATE "+filepath.Join(dir, "a.conf")] || !seen["IN_MODIFY "+filepath.Join(dir, "a.conf")] {
		t.Errorf("inotify events = %v, want IN_CREATE and IN_MODIFY of a.conf", got)
	}
}

// collector gathers fired events.
type collector struct {
	mu  sync.Mutex
	evs []string
}

func (c *collector) fire(tag string, data map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, tag)
}

func (c *collector) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.evs {
		if strings.HasPrefix(t, prefix) {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 20*time.Second, what, cond)
}

func TestManagerRuntimeChanges(t *testing.T) {
	dir := t.TempDir()
	c := &collector{}
	m, err := New(Options{ID: "cam1", Config: yamlValue(t, "{diskusage: [{/: 0%}, {interval: 0.05}]}"), Fire: c.fire,
		SaveFile: filepath.Join(dir, "agent.d", "beacons.conf")})
	if err != nil {
		t.Fatal(err)
	}
	m.env = fakeProc(t, map[string]string{"meminfo": meminfo80, "self/mounts": "rootfs / rootfs rw 0 0\n"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "diskusage events", func() bool { return c.count("salt/beacon/cam1/diskusage/") >= 2 })
	// onchangeonly: the same data fires once.
	if err := m.Add("disk2", yamlValue(t, "[{beacon_module: memusage}, {percent: 0%}, {interval: 0.05}, {onchangeonly: True}]")); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("disk2", yamlValue(t, "[{beacon_module: diskusage}, {/: 0%}]")); err == nil {
		t.Error("adding disk2 twice: no error")
	}
	if err := m.Add("bad", yamlValue(t, "[{beacon_module: diskusage}, {/: 500%}]")); err == nil || !strings.Contains(err.Error(), "beacon bad: option /") {
		t.Errorf("add with a bad option: error %v", err)
	}
	waitFor(t, "disk2 checks", func() bool { return m.Stats()["disk2"].Checks >= 5 })
	if n := c.count("salt/beacon/cam1/disk2/"); n != 1 {
		t.Errorf("onchangeonly beacon fired %d times for unchanged data, want 1", n)
	}
	if err := m.SetEnabled("diskusage", false); err != nil {
		t.Fatal(err)
	}
	list := m.List()
	if d := cmp.Diff([]any{map[string]any{"/": "0%"}, map[string]any{"enabled": false}, map[string]any{"interval": 0.05}}, list["diskusage"]); d != "" {
		t.Errorf("list after disable (-want +got):\n%s", d)
	}
	file, err := m.Save()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	var saved struct{ Beacons map[string]any }
	if err := yaml.Unmarshal(b, &saved); err != nil {
		t.Fatalf("saved file: %v\n%s", err, b)
	}
	if _, _, err := ParseConfig(saved.Beacons, time.Second); err != nil {
		t.Errorf("saved beacons do not load back: %v\n%s", err, b)
	}
	// Once disabled, diskusage is checked no more: its count stays put
	// while disk2 goes on.
	checks := func(name string) uint64 { return m.Stats()[name].Checks }
	waitFor(t, "diskusage to stop", func() bool {
		c0, d0 := checks("diskusage"), checks("disk2")
		deadline := time.Now().Add(20 * time.Second)
		for checks("disk2") < d0+3 {
			if time.Now().After(deadline) {
				t.Fatal("disk2 stopped being checked")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return checks("diskusage") == c0
	})
	c0, d0 := checks("diskusage"), checks("disk2")
	waitFor(t, "disk2 checks", func() bool { return checks("disk2") >= d0+5 })
	if c := checks("diskusage"); c != c0 {
		t.Errorf("disabled beacon checked %d more times", c-c0)
	}
	if err := m.Delete("disk2"); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete("disk2"); err == nil {
		t.Error("deleting disk2 twice: no error")
	}
	if _, ok := m.List()["disk2"]; ok {
		t.Error("disk2 still listed after delete")
	}
}

// TestManagerReplace: the beacons: option reread on SIGHUP replaces the
// running beacons; a bad one changes nothing.
func TestManagerReplace(t *testing.T) {
	c := &collector{}
	m, err := New(Options{ID: "cam1", Config: yamlValue(t, "{diskusage: [{/: 0%}, {interval: 0.05}], keep: [{beacon_module: memusage}, {percent: 0%}, {interval: 0.05}]}"), Fire: c.fire})
	if err != nil {
		t.Fatal(err)
	}
	m.env = fakeProc(t, map[string]string{"meminfo": meminfo80, "self/mounts": "rootfs / rootfs rw 0 0\n"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "diskusage events", func() bool { return c.count("salt/beacon/cam1/diskusage/") >= 1 })

	if err := m.Replace(yamlValue(t, "{mem2: [{beacon_module: memusage}, {percent: 500%}]}")); err == nil {
		t.Errorf("Replace with a bad beacon: got nil, want an error")
	}
	if got := len(m.List()); got != 2 {
		t.Errorf("after a bad Replace: got %d beacons, want the 2 kept", got)
	}
	if err := m.Replace(yamlValue(t, "{mem2: [{beacon_module: memusage}, {percent: 0%}, {interval: 0.05}], keep: [{beacon_module: memusage}, {percent: 0%}, {interval: 0.05}]}")); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	waitFor(t, "mem2 events", func() bool { return c.count("salt/beacon/cam1/mem2/") >= 1 })
	list := m.List()
	if _, ok := list["diskusage"]; ok {
		t.Errorf("diskusage: got it listed after Replace, want it gone")
	}
	if _, ok := list["keep"]; !ok {
		t.Errorf("keep: got it gone after Replace, want it kept")
	}
	checks := func(name string) uint64 { return m.Stats()[name].Checks }
	c0, k0 := checks("diskusage"), checks("keep")
	waitFor(t, "keep checks", func() bool { return checks("keep") >= k0+5 })
	if got := checks("diskusage"); got != c0 {
		t.Errorf("removed beacon: got %d more checks, want none", got-c0)
	}
}
