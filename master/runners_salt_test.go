package master

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/version"
	"github.com/halite-fleet/halite/master/api"
)

// TestSaltRunners pins the shapes of the runners of Salt 3006's
// salt/runners/manage.py (present, alived, versions), jobs.py (list_job,
// exit_success, last_run), cache.py (grains) and salt.py (cmd).
func TestSaltRunners(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, func(m *Master) {
		m.SetLocalCall(exec.LocalCall(m.Name(), version.Version, m.log.Named("salt.cmd")))
	})
	tm.startAgent(t, "r1", map[string]any{"role": "cam"})
	down := tm.startAgent(t, "down1", nil)
	tm.waitConnected(t, "r1", "down1")
	if err := down.stop(); err != nil {
		t.Fatalf("stop down1: %v", err)
	}
	waitFor(t, "down1 to disconnect", func() bool { return tm.minions.session("down1") == nil })

	job, _, _ := returnsOf(t, tm.publish(t, &api.Request{Tgt: "r1,down1", TgtType: "list", Fun: "test.echo", Arg: []any{"hi"}, Timeout: 1}))
	jid := job.JID
	empty, _, _ := returnsOf(t, tm.publish(t, &api.Request{Tgt: "r1", Fun: "test.echo", Arg: []any{""}}))

	t.Run("manage.present", func(t *testing.T) {
		for _, fun := range []string{"manage.present", "manage.alived"} {
			if got := strs(t, tm.run(t, fun)); !slices.Equal(got, []string{"r1"}) {
				t.Errorf("%s: got %v, want [r1]", fun, got)
			}
		}
		res, err := tm.call(t, api.OpRunner, "manage.present", nil, map[string]any{"show_ip": true})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(map[string]any{"r1": "127.0.0.1"}, res); d != "" {
			t.Errorf("manage.present show_ip=True (-want +got):\n%s", d)
		}
		for subset, want := range map[string][]string{"127.0.0.0/8": {"r1"}, "10.0.0.0/8": {}} {
			res, err := tm.call(t, api.OpRunner, "manage.present", nil, map[string]any{"subset": subset})
			if err != nil {
				t.Fatal(err)
			}
			if got := strs(t, res); !slices.Equal(got, want) {
				t.Errorf("manage.present subset=%s: got %v, want %v", subset, got, want)
			}
		}
		_, err = tm.call(t, api.OpRunner, "manage.present", nil, map[string]any{"subset": "10.0.0.0/99"})
		if !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("manage.present subset=10.0.0.0/99: got %v, want code %d", err, api.CodeBadRequest)
		}
	})
	t.Run("manage.versions", func(t *testing.T) {
		want := map[string]any{
			"Master":         version.Version,
			"Up to date":     map[string]any{"r1": version.Version},
			"Minion offline": map[string]any{"down1": false},
		}
		if d := cmp.Diff(want, tm.run(t, "manage.versions")); d != "" {
			t.Errorf("manage.versions (-want +got):\n%s", d)
		}
	})
	t.Run("jobs.list_job", func(t *testing.T) {
		got := dict(t, tm.run(t, "jobs.list_job", jid))
		for k, want := range map[string]any{"jid": jid, "Function": "test.echo", "Target": "r1,down1", "Target-type": "list"} {
			if got[k] != want {
				t.Errorf("list_job %s: got %v, want %v", k, got[k], want)
			}
		}
		if d := cmp.Diff([]any{"down1", "r1"}, got["Minions"]); d != "" {
			t.Errorf("list_job Minions (-want +got):\n%s", d)
		}
		r1 := dict(t, dict(t, got["Result"])["r1"])
		if r1["return"] != "hi" || fmt.Sprint(r1["retcode"]) != "0" {
			t.Errorf("list_job Result r1: got %v, want return hi, retcode 0", r1)
		}
		unknown := dict(t, tm.run(t, "jobs.list_job", "20000101000000000000"))
		want := map[string]any{"jid": "20000101000000000000", "Error": "Cannot contact returner or no job with this jid",
			"StartTime": "2000, Jan 01 00:00:00.000000", "Result": map[string]any{}}
		if d := cmp.Diff(want, unknown); d != "" {
			t.Errorf("list_job of an unknown job (-want +got):\n%s", d)
		}
		if _, err := tm.call(t, api.OpRunner, "jobs.list_job", []any{"../x"}, nil); !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("list_job ../x: got %v, want code %d", err, api.CodeBadRequest)
		}
	})
	t.Run("jobs.exit_success", func(t *testing.T) {
		if d := cmp.Diff(map[string]any{"r1": true, "down1": false}, tm.run(t, "jobs.exit_success", jid)); d != "" {
			t.Errorf("exit_success (-want +got):\n%s", d)
		}
		// An empty return is not a success (Python truthiness).
		if d := cmp.Diff(map[string]any{"r1": false}, tm.run(t, "jobs.exit_success", empty.JID)); d != "" {
			t.Errorf("exit_success of an empty return (-want +got):\n%s", d)
		}
	})
	t.Run("jobs.last_run", func(t *testing.T) {
		res, err := tm.call(t, api.OpRunner, "jobs.last_run", nil, map[string]any{"function": "test.echo"})
		if err != nil {
			t.Fatal(err)
		}
		if got := dict(t, res); got[empty.JID] == nil || len(got) != 1 {
			t.Errorf("last_run function=test.echo: got %v, want the job %s", got, empty.JID)
		}
		res, err = tm.call(t, api.OpRunner, "jobs.last_run", nil, map[string]any{"target": "r1,*"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := dict(t, res)[jid]; !ok {
			t.Errorf("last_run target='r1,*': got %v, want the job %s", res, jid)
		}
		res, err = tm.call(t, api.OpRunner, "jobs.last_run", nil, map[string]any{"function": "state.*"})
		if err != nil || res != false {
			t.Errorf("last_run function='state.*': got %v, %v, want False", res, err)
		}
	})
	t.Run("cache.grains", func(t *testing.T) {
		got := dict(t, tm.run(t, "cache.grains", "r*"))
		if len(got) != 1 || dict(t, got["r1"])["role"] != "cam" || dict(t, got["r1"])["id"] != "r1" {
			t.Errorf("cache.grains r*: got %v, want r1's grains", got)
		}
		got = dict(t, tm.run(t, "cache.grains", "role:cam", "grain"))
		if _, ok := got["r1"]; !ok || len(got) != 1 {
			t.Errorf("cache.grains role:cam grain: got %v, want r1 only", got)
		}
		if _, err := tm.call(t, api.OpRunner, "cache.grains", nil, nil); !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("cache.grains without a target: got %v, want code %d", err, api.CodeBadRequest)
		}
	})
	t.Run("salt.cmd", func(t *testing.T) {
		if got := tm.run(t, "salt.cmd", "test.echo", "on the master"); got != "on the master" {
			t.Errorf("salt.cmd test.echo: got %v, want 'on the master'", got)
		}
		res, err := tm.call(t, api.OpRunner, "salt.cmd", []any{"test.arg", "a"}, map[string]any{"k": "v"})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]any{"a"}, dict(t, res)["args"]); d != "" {
			t.Errorf("salt.cmd test.arg args (-want +got):\n%s", d)
		}
		if _, err := tm.call(t, api.OpRunner, "salt.cmd", []any{"no.such"}, nil); !api.IsCode(err, api.CodeFailed) {
			t.Errorf("salt.cmd no.such: got %v, want code %d", err, api.CodeFailed)
		}
	})
}

// TestCompareVersions pins the order manage.versions groups by.
func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"v1.2.3", "1.2.3", 0},
		{"v1.2", "v1.2.0", 0},
		{"v1.2.3", "v1.10.0", -1},
		{"v2.0.0-3-gabc", "v1.9.9", 1},
		{"devel", "v9.9.9", 1},
		{"v9.9.9", "devel", -1},
		{"devel", "devel", 0},
	} {
		if got := compareVersions(c.a, c.b); got != c.want {
			t.Errorf("compareVersions(%q, %q): got %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestCallTimeout: a runner's timeout= argument wins over halite-run's
// -t (Request.Timeout), which wins over the master's timeout option (the
// runners of salt/runners/manage.py take timeout=, else __opts__).
func TestCallTimeout(t *testing.T) {
	m := &Master{cfg: &config.Master{Timeout: 5}}
	for _, c := range []struct {
		name    string
		req     api.Request
		want    time.Duration
		wantErr bool
	}{
		{"master option", api.Request{}, 5 * time.Second, false},
		{"-t", api.Request{Timeout: 2}, 2 * time.Second, false},
		{"timeout=", api.Request{Timeout: 2, Kwarg: map[string]any{"timeout": 7}}, 7 * time.Second, false},
		{"timeout=0", api.Request{Timeout: 2, Kwarg: map[string]any{"timeout": 0}}, 2 * time.Second, false},
		{"timeout=-1", api.Request{Kwarg: map[string]any{"timeout": -1}}, 0, true},
		{"timeout=soon", api.Request{Kwarg: map[string]any{"timeout": "soon"}}, 0, true},
	} {
		got, err := m.callTimeout(&args{req: &c.req})
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("%s: got %v, %v, want %v (error: %v)", c.name, got, err, c.want, c.wantErr)
		}
	}
}
