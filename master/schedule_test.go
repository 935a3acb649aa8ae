package master

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
)

// TestMasterSchedule: the master's schedule: runs a runner (manage.up
// every second) as Salt's master schedule does (salt/utils/schedule.py,
// __role master): each firing is a runner call, salt/run/<jid>/new and
// /ret, then a __schedule_return event with the return's load (handle_func:
// fire_event(load, "__schedule_return"), load cmd _return, id, fun,
// schedule, jid, return).
func TestMasterSchedule(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.Schedule = map[string]any{"up": map[string]any{"function": "manage.up", "seconds": 1}}
	}, nil)
	tm.startAgent(t, "web1", nil)
	tm.waitConnected(t, "web1")
	isUp := func(d map[string]any) bool { return d["fun"] == "runner.manage.up" && d["user"] == ScheduleUser }
	tm.events.wait(t, "salt/run/*/new", isUp)
	ret := tm.events.wait(t, "salt/run/*/ret", func(d map[string]any) bool {
		l, _ := d["return"].([]string)
		return isUp(d) && len(l) == 1 && l[0] == "web1"
	})
	jid, _ := ret["jid"].(string)
	load := tm.events.wait(t, ScheduleReturnTag, func(d map[string]any) bool { return d["jid"] == jid })
	for k, want := range map[string]any{"cmd": "_return", "id": "testmaster", "fun": "manage.up", "schedule": "up", "success": true} {
		if load[k] != want {
			t.Errorf("__schedule_return %s: got %v, want %v", k, load[k], want)
		}
	}
}

// TestMasterScheduleBadJob: a bad job of the master's schedule stops the
// master at start, naming the file and line of the job and what is wrong.
func TestMasterScheduleBadJob(t *testing.T) {
	tests := []struct {
		job, want string
	}{
		{"  x:\n    function: test.ping\n    seconds: 1\n", `job x: function: "test.ping" is not available`},
		{"  x:\n    function: manage.up\n    seconds: soon\n", "job x: seconds"},
		{"  x:\n    function: manage.up\n", "job x"},
		{"  x: 42\n", "job x"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		file := filepath.Join(dir, "master")
		conf := "root_dir: " + dir + "\nsock_dir: " + shortDir(t) + "\nschedule:\n" + tt.job
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.LoadMaster(dir, nil)
		if err == nil {
			_, err = New(cfg, zap.NewNop())
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), file+":4") {
			t.Errorf("schedule %q: got %v, want an error with %s:4 and %q", tt.job, err, file, tt.want)
		}
	}
}

// TestMasterReload: Reload (SIGHUP) replaces the master's schedule; a bad
// schedule or engine list is refused whole, naming the job's file and
// line, and the running schedule goes on.
func TestMasterReload(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) {
		c.Schedule = map[string]any{"up": map[string]any{"function": "manage.up", "seconds": 3600}}
	}, nil)
	jobs := func() []string {
		var names []string
		for name := range tm.sched.List(true, true) {
			names = append(names, name)
		}
		slices.Sort(names)
		return names
	}
	bad := &config.Master{
		Schedule:   map[string]any{"x": map[string]any{"function": "test.ping", "seconds": 1}},
		ScheduleAt: map[string]string{"x": "/etc/halite/master:7"},
	}
	if err := tm.Reload(bad); err == nil || !strings.Contains(err.Error(), "/etc/halite/master:7") {
		t.Errorf("Reload of a schedule naming an execution function: got %v, want an error at /etc/halite/master:7", err)
	}
	badEngines := &config.Master{Schedule: map[string]any{"list": map[string]any{"function": "jobs.list_jobs", "minutes": 5}}, Engines: []any{map[string]any{"a": 1, "b": 2}}}
	if err := tm.Reload(badEngines); err == nil {
		t.Error("Reload with a malformed engines list: got nil, want an error")
	}
	if got := jobs(); !slices.Equal(got, []string{"up"}) {
		t.Errorf("after refused reloads: jobs %v, want [up]", got)
	}
	good := &config.Master{Schedule: map[string]any{"list": map[string]any{"function": "jobs.list_jobs", "minutes": 5}}}
	if err := tm.Reload(good); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := jobs(); !slices.Equal(got, []string{"list"}) {
		t.Errorf("after Reload: jobs %v, want [list]", got)
	}
}
