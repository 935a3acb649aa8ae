package master

import (
	"os"
	"path/filepath"
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
