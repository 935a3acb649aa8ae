package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// openTestJobLog opens a job log in dir whose clock is now.
func openTestJobLog(t *testing.T, dir string, window time.Duration, now time.Time) *jobLog {
	t.Helper()
	l, err := openJobLog(dir, window)
	if err != nil {
		t.Fatalf("openJobLog: %v", err)
	}
	l.now = func() time.Time { return now }
	t.Cleanup(func() { l.close() })
	return l
}

// runningJobs is what a log opened on a dead agent's file reports killed.
func runningJobs(l *jobLog) []jobRecord {
	var out []jobRecord
	for _, r := range l.running {
		out = append(out, r)
	}
	return out
}

// jobAt is a job of master with jid n (a counter) issued at issued.
func jobAt(master string, n int, issued time.Time) *protocol.JobBody {
	b := &protocol.JobBody{JID: fmt.Sprintf("2026112401000000%04d", n), Master: master, Fun: "cmd.run"}
	if !issued.IsZero() {
		b.Issued = issued.Unix()
	}
	return b
}

// TestJobLogTake: which jobs may run, with the agent's clock set and
// without (a device booting at 1970 until NTP answers).
func TestJobLogTake(t *testing.T) {
	base := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	unset := time.Unix(0, 0).Add(5 * time.Minute)
	steps := []struct {
		name string
		now  time.Time
		job  *protocol.JobBody
		want bool
	}{
		{"first job", base, jobAt("m1", 1, base), true},
		{"the same again", base, jobAt("m1", 1, base), false},
		{"same jid, another master", base, jobAt("m2", 1, base), true},
		{"issued within the window", base, jobAt("m1", 2, base.Add(-50*time.Minute)), true},
		{"issued past the window by the clock", base, jobAt("m1", 3, base.Add(-61*time.Minute)), false},
		{"issued in the future", base, jobAt("m1", 4, base.Add(3*time.Hour)), true},
		// The newest of m1 is now base+1h (capped at the clock plus the
		// window), so jobs of m1 issued before base count as replays even
		// with the clock unset; m2's newest is base.
		{"clock unset, before m1's newest minus the window", unset, jobAt("m1", 5, base.Add(-time.Minute)), false},
		{"clock unset, within m2's window", unset, jobAt("m2", 5, base.Add(-59*time.Minute)), true},
		{"clock unset, past m2's window", unset, jobAt("m2", 6, base.Add(-61*time.Minute)), false},
		{"clock unset, a master never seen", unset, jobAt("m3", 1, base.Add(-48*time.Hour)), true},
		{"no issue time (older master)", base, jobAt("m4", 1, time.Time{}), true},
		{"no issue time, again", base, jobAt("m4", 1, time.Time{}), false},
	}
	l := openTestJobLog(t, t.TempDir(), time.Hour, base)
	for _, s := range steps {
		l.now = func() time.Time { return s.now }
		got, why, err := l.take(s.job, "")
		if err != nil {
			t.Fatalf("%s: take: %v", s.name, err)
		}
		if got != s.want {
			t.Errorf("%s: take = %v (%s), want %v", s.name, got, why, s.want)
		}
	}
}

// TestJobLogRestart: what the log knows survives a restart: jobs taken
// are refused again, the jobs that were running are reported killed, the
// masters' newest jobs still bound the window.
func TestJobLogRestart(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	l := openTestJobLog(t, dir, time.Hour, base)
	for n := 1; n <= 3; n++ {
		if ok, why, err := l.take(jobAt("m1", n, base), "127.0.0.1:4506"); !ok || err != nil {
			t.Fatalf("take %d: %v %s %v", n, ok, why, err)
		}
	}
	for _, n := range []int{1, 3} {
		if err := l.done(jobAt("m1", n, base)); err != nil {
			t.Fatal(err)
		}
	}
	// No close: the agent was killed (what was written is in the file).
	l2 := openTestJobLog(t, dir, time.Hour, time.Unix(0, 0))
	for n := 1; n <= 3; n++ {
		if ok, _, _ := l2.take(jobAt("m1", n, base), ""); ok {
			t.Errorf("after a restart: job %d taken again", n)
		}
	}
	if ok, _, _ := l2.take(jobAt("m1", 9, base.Add(-2*time.Hour)), ""); ok {
		t.Error("after a restart, clock unset: a job issued 2 h before the newest was taken")
	}
	killed := runningJobs(l2)
	if len(killed) != 1 || killed[0].JID != jobAt("m1", 2, base).JID || killed[0].Fun != "cmd.run" || killed[0].Link != "127.0.0.1:4506" {
		t.Fatalf("killed jobs after a restart: got %+v, want job 2 alone", killed)
	}
	if err := l2.finish(killed[0]); err != nil {
		t.Fatal(err)
	}
	l2.close()
	l3 := openTestJobLog(t, dir, time.Hour, base)
	if got := runningJobs(l3); len(got) != 0 {
		t.Errorf("killed jobs once reported: got %+v, want none", got)
	}
}

// TestJobLogBounded: a job storm (more jobs within the window than the
// log keeps) keeps the log bounded in memory and on disk, and a job it
// forgot is refused all the same; jobs past the window are forgotten
// without a floor.
func TestJobLogBounded(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	l := openTestJobLog(t, dir, time.Hour, base)
	total := 3*jobLogKeep + 17
	for n := 1; n <= total; n++ {
		b := jobAt("m1", n, base)
		if ok, why, err := l.take(b, ""); !ok || err != nil {
			t.Fatalf("take %d: %v %s %v", n, ok, why, err)
		}
		if err := l.done(b); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(l.seen); got != jobLogKeep {
		t.Errorf("jobs remembered: got %d, want %d", got, jobLogKeep)
	}
	st, err := os.Stat(filepath.Join(dir, jobLogFile))
	if err != nil {
		t.Fatal(err)
	}
	// Two records a job, at most 3*jobLogKeep records between rewrites,
	// each well under 100 bytes.
	if max := int64(3*jobLogKeep+2) * 100; st.Size() > max {
		t.Errorf("log size after %d jobs: %d bytes, want at most %d", total, st.Size(), max)
	}
	l.close()
	l2 := openTestJobLog(t, dir, time.Hour, base)
	for _, n := range []int{1, total - jobLogKeep, total} {
		if ok, _, _ := l2.take(jobAt("m1", n, base), ""); ok {
			t.Errorf("after a restart: job %d of the storm taken again", n)
		}
	}
	if ok, why, _ := l2.take(jobAt("m2", 1, base), ""); !ok {
		t.Errorf("a job of another master refused by m1's floor: %s", why)
	}

	// Jobs spread over hours: the forgotten ones are past the window of
	// the newest, and need no floor.
	l3 := openTestJobLog(t, t.TempDir(), time.Hour, time.Unix(0, 0))
	for n := 1; n <= jobLogKeep+1; n++ {
		if ok, why, _ := l3.take(jobAt("m1", n, base.Add(time.Duration(n)*time.Hour)), ""); !ok {
			t.Fatalf("take %d: %s", n, why)
		}
	}
	if f := l3.masters["m1"].Floor; f != "" {
		t.Errorf("floor after forgetting a job past the window: got %s, want none", f)
	}
	if ok, _, _ := l3.take(jobAt("m1", 1, base.Add(time.Hour)), ""); ok {
		t.Error("the forgotten job was taken again")
	}
}

// TestJobLogDamage: a torn last record (the agent died mid-write) or
// garbage at the end loses only that record; what follows is written
// after what was kept.
func TestJobLogDamage(t *testing.T) {
	base := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"torn last record", func(b []byte) []byte { return b[:len(b)-3] }},
		{"garbage appended", func(b []byte) []byte { return append(b, "\xff\xff\xff\x7fgarbage"...) }},
		{"flipped bit in the last record", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"empty file", func([]byte) []byte { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestJobLog(t, dir, time.Hour, base)
			for n := 1; n <= 2; n++ {
				l.take(jobAt("m1", n, base), "")
			}
			l.close()
			path := filepath.Join(dir, jobLogFile)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			l2 := openTestJobLog(t, dir, time.Hour, base)
			if tt.name != "empty file" {
				if ok, _, _ := l2.take(jobAt("m1", 1, base), ""); ok {
					t.Error("the job before the damage was taken again")
				}
			}
			if ok, why, err := l2.take(jobAt("m1", 3, base), ""); !ok || err != nil {
				t.Fatalf("a new job after the damage: %v %s %v", ok, why, err)
			}
			l2.close()
			l3 := openTestJobLog(t, dir, time.Hour, base)
			if ok, _, _ := l3.take(jobAt("m1", 3, base), ""); ok {
				t.Error("the job written after the damage was lost")
			}
		})
	}
}

// TestKilledJobReturn: an agent that starts with a job recorded as
// running (it died while the job ran) sends a failed return for it, once.
func TestKilledJobReturn(t *testing.T) {
	cache := t.TempDir()
	setup := func(c *config.Agent) { c.CacheDir = cache }
	a := newTestAgent(t, "cam-01", nil, setup)
	job := &protocol.JobBody{JID: "20261124010000000001", Fun: "cmd.run", Issued: time.Now().Unix()}
	if ok, why, err := a.jobs.take(job, ""); !ok || err != nil {
		t.Fatalf("take: %v %s %v", ok, why, err)
	}
	// The agent dies here: no return, no close.

	a2 := newTestAgent(t, "cam-01", nil, setup)
	var rets []protocol.ReturnBody
	for _, it := range a2.out.spool.items {
		var b protocol.ReturnBody
		if it.kind == protocol.TypeReturn && protocol.Unmarshal(it.body, &b) == nil {
			rets = append(rets, b)
		}
	}
	if len(rets) != 1 {
		t.Fatalf("returns queued after the restart: got %d, want 1", len(rets))
	}
	r := rets[0]
	if r.JID != job.JID || r.Fun != "cmd.run" || r.Success || r.Retcode == 0 || !strings.Contains(fmt.Sprint(r.Return), "was killed: the agent stopped while it ran") {
		t.Errorf("return of the killed job: got %+v, want a failure saying it was killed", r)
	}
	if ok, _, _ := a2.jobs.take(job, ""); ok {
		t.Error("the killed job was taken again")
	}
	a2.jobs.close()
	for _, o := range a2.outs {
		o.spool.close()
	}
	a3 := newTestAgent(t, "cam-01", nil, setup)
	if n := a3.out.spool.len(); n != 1 {
		t.Errorf("outbox after a second restart: got %d items, want the 1 return (not reported twice)", n)
	}
}
