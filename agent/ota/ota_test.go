package ota

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests run this test binary as the agent: copies of it, each with a
// version tag appended (an ELF runs with bytes after its end), are the
// builds A (B, installed) and B (B.new, fetched from src). The helper
// (TestHelperProcess) plays the agent's part: at a normal start it settles
// an earlier update (Recover, Finish) and writes down the result; with
// OTA_UPDATE it stages and watches an update to the build in OTA_SRC; on
// trial it "reaches the master" (commits) when OTA_GOOD is set, or never,
// or exits at once (OTA_CRASH). OTA_PAUSE_AT names a step at which the
// helper announces itself (a file "paused-STEP") and waits to be killed.

const tagLen = 12 // "\nOTAVERSION" + one byte

func tagged(t *testing.T, dst string, v byte) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, "\nOTAVERSION"...)
	b = append(b, v)
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// selfVersion reads the tag of the running copy.
func selfVersion() string {
	exe, err := os.Executable()
	if err != nil {
		return "?"
	}
	f, err := os.Open(exe)
	if err != nil {
		return "?"
	}
	defer f.Close()
	st, _ := f.Stat()
	buf := make([]byte, tagLen)
	if _, err := f.ReadAt(buf, st.Size()-tagLen); err != nil || !bytes.HasPrefix(buf, []byte("\nOTAVERSION")) {
		return "?"
	}
	return string(buf[tagLen-1:])
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv("OTA_HELPER") == "" {
		t.Skip("run by the other tests as a process")
	}
	os.Exit(helperMain())
}

func pauseAt(step string) {
	if os.Getenv("OTA_PAUSE_AT") != step {
		return
	}
	os.WriteFile(filepath.Join(os.Getenv("OTA_DIR"), "paused-"+step), nil, 0o644)
	time.Sleep(time.Hour)
}

func helperMain() int {
	dir := os.Getenv("OTA_DIR")
	p, err := Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	version := selfVersion()
	say := func(format string, a ...any) {
		f, _ := os.OpenFile(filepath.Join(dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		fmt.Fprintf(f, version+": "+format+"\n", a...)
		f.Close()
	}
	mode := Mode()
	if mode == ModeTrial {
		switch {
		case os.Getenv("OTA_CRASH") != "":
			say("trial: crash")
			return 3
		case os.Getenv("OTA_GOOD") == "":
			say("trial: never accepted")
			time.Sleep(time.Hour)
		}
		pauseAt("trial")
		testHookLinked = func() { pauseAt("linked") }
		if err := Commit(p); err != nil {
			say("commit: %v", err)
			return 1
		}
		say("trial: committed")
		pauseAt("committed")
		return 0
	}
	r, err := Recover(p, version)
	if err != nil {
		say("recover: %v", err)
		return 1
	}
	if r != nil {
		b, _ := json.Marshal(r)
		f, _ := os.OpenFile(filepath.Join(dir, "results"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		f.Write(append(b, '\n'))
		f.Close()
		pauseAt("reported")
		if err := Finish(p, r); err != nil {
			say("finish: %v", err)
			return 1
		}
	}
	say("started (mode %q)", mode)
	attempted := filepath.Join(dir, "attempted")
	if os.Getenv("OTA_UPDATE") == "" || exists(attempted) {
		return 0
	}
	os.WriteFile(attempted, nil, 0o644)
	src := os.Getenv("OTA_SRC")
	sum, size, err := FileSHA256(src)
	if err != nil {
		say("hash: %v", err)
		return 1
	}
	m := Marker{Version: "B", From: version, SHA256: sum, JID: "20261124000000000001", Timeout: 30}
	fetch := func(ctx context.Context, dst string) error { return copyFile(src, dst) }
	testHookStaged = func() { pauseAt("staged") }
	if err := Stage(context.Background(), p, m, size, fetch); err != nil {
		say("stage: %v", err)
		return 1
	}
	pauseAt("marked")
	timeout := 30 * time.Second
	if s := os.Getenv("OTA_TIMEOUT"); s != "" {
		timeout, _ = time.ParseDuration(s)
	}
	out, err := Watch(context.Background(), p, os.Args[0], os.Args[1:], os.Environ(), timeout, func(f string, a ...any) { say(f, a...) })
	if err != nil {
		say("watch: %v", err)
		return 1
	}
	say("watch: committed %v, %s", out.Committed, out.Reason)
	pauseAt("restart")
	err = Restart(p, os.Args, os.Environ())
	say("%v", err)
	return 1
}

// copyFile is the test's fetcher: dst.part, half of it, a pause point,
// the rest, fsync, rename (what the chunk fetcher does).
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.Create(dst + ".part")
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(b[:len(b)/2]); err != nil {
		return err
	}
	pauseAt("fetch")
	if _, err := f.Write(b[len(b)/2:]); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Rename(dst+".part", dst)
}

type rig struct {
	t        *testing.T
	dir, bin string
	p        Paths
}

func newRig(t *testing.T) *rig {
	dir := t.TempDir()
	r := &rig{t: t, dir: dir, bin: filepath.Join(dir, "halite-agent")}
	r.p = PathsFor(r.bin)
	tagged(t, r.bin, 'A')
	tagged(t, filepath.Join(dir, "src"), 'B')
	return r
}

// start runs B (what init runs) with env on top of the helper's.
func (r *rig) start(env ...string) *exec.Cmd {
	r.t.Helper()
	cmd := exec.Command(r.bin, "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "OTA_HELPER=1", "OTA_DIR="+r.dir, "OTA_SRC="+filepath.Join(r.dir, "src"))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd
}

func (r *rig) run(env ...string) {
	r.t.Helper()
	cmd := r.start(env...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			r.t.Fatalf("helper: %v\n%s", err, r.log())
		}
	case <-time.After(2 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		r.t.Fatalf("helper did not finish\n%s", r.log())
	}
}

func (r *rig) log() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "log"))
	return string(b)
}

func (r *rig) results() []Result {
	r.t.Helper()
	f, err := os.Open(filepath.Join(r.dir, "results"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var out []Result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var res Result
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, res)
	}
	return out
}

// installed says which build B is.
func (r *rig) installed() string {
	r.t.Helper()
	b, err := os.ReadFile(r.bin)
	if err != nil {
		r.t.Fatalf("B is gone: %v", err)
	}
	return string(b[len(b)-1:])
}

// check: B is want, nothing is left on trial, and the results end with
// result (none if "").
func (r *rig) check(want, result string) {
	r.t.Helper()
	if got := r.installed(); got != want {
		r.t.Errorf("B is build %s, want %s\n%s", got, want, r.log())
	}
	if exists(r.p.Trial) {
		r.t.Errorf("trial marker left behind")
	}
	res := r.results()
	switch {
	case result == "" && len(res) > 0:
		r.t.Errorf("results %+v, want none", res)
	case result != "" && len(res) == 0:
		r.t.Errorf("no result, want %s\n%s", result, r.log())
	case result != "" && res[len(res)-1].Result != result:
		r.t.Errorf("last result %+v, want %s\n%s", res[len(res)-1], result, r.log())
	}
	if result == RolledBack && exists(r.p.New) {
		r.t.Errorf("failed build left at %s", r.p.New)
	}
	if result == Updated && !exists(r.p.Prev) {
		r.t.Errorf("previous build not kept")
	}
}

func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !exists(path) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		want   string
		result string
		reason string
	}{
		{"accepted", []string{"OTA_GOOD=1"}, "B", Updated, ""},
		{"never accepted", []string{"OTA_TIMEOUT=1s"}, "A", RolledBack, "update_trial_timeout"},
		{"crashes", []string{"OTA_CRASH=1"}, "A", RolledBack, "exited before a master accepted it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.run(append([]string{"OTA_UPDATE=1"}, tc.env...)...)
			r.check(tc.want, tc.result)
			res := r.results()
			if len(res) != 1 {
				t.Fatalf("results %+v, want one", res)
			}
			if !strings.Contains(res[0].Reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", res[0].Reason, tc.reason)
			}
			if res[0].From != "A" || res[0].JID == "" {
				t.Errorf("result %+v: want from A with the jid", res[0])
			}
			// The next start has nothing to settle.
			r.run()
			if n := len(r.results()); n != 1 {
				t.Errorf("%d results after a plain restart, want 1", n)
			}
		})
	}
}

// TestKillPoints kills the agent (its whole process group, watchdog and
// child: a power cut as far as files go) at each step, then starts B as
// init would: B must boot, and the update must be settled as the step
// implies.
func TestKillPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tc := range []struct {
		step   string
		want   string // the build B is afterwards
		result string // what the restart reports
	}{
		{"fetch", "A", ""},
		{"staged", "A", ""},
		{"marked", "A", RolledBack},
		{"trial", "A", RolledBack},
		{"linked", "A", RolledBack},
		{"committed", "B", Updated},
		{"restart", "B", Updated},
		{"reported", "B", Updated},
	} {
		t.Run(tc.step, func(t *testing.T) {
			r := newRig(t)
			cmd := r.start("OTA_UPDATE=1", "OTA_GOOD=1", "OTA_PAUSE_AT="+tc.step)
			waitFile(t, filepath.Join(r.dir, "paused-"+tc.step), time.Minute)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			// The child on trial dies with its watchdog (its own
			// group is the same; Pdeathsig covers a lone kill).
			r.run()
			r.check(tc.want, tc.result)
			if tc.result == RolledBack {
				if res := r.results(); !strings.Contains(res[len(res)-1].Reason, "did not finish") {
					t.Errorf("reason %q", res[len(res)-1].Reason)
				}
			}
			// A new update from the settled state goes through.
			if tc.want == "A" {
				os.Remove(filepath.Join(r.dir, "attempted"))
				r.run("OTA_UPDATE=1", "OTA_GOOD=1")
				r.check("B", Updated)
			}
		})
	}
}

// TestKillWatchdogOnly kills only the old process while the new build is
// on trial: the child must die with it (no unwatched build on trial), and
// the next start rolls back.
func TestKillWatchdogOnly(t *testing.T) {
	r := newRig(t)
	cmd := r.start("OTA_UPDATE=1", "OTA_GOOD=1", "OTA_PAUSE_AT=trial")
	waitFile(t, filepath.Join(r.dir, "paused-trial"), time.Minute)
	child := findChild(t, cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(child, 0) == nil && !zombie(child) {
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("child %d outlived its watchdog", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.run()
	r.check("A", RolledBack)
}

func findChild(t *testing.T, ppid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", ppid, ppid))
	if err == nil && len(bytes.Fields(b)) == 0 {
		// The child may have been started by another thread.
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
		for _, e := range ents {
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", ppid, e.Name()))
			b = append(b, c...)
		}
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatalf("no child of %d: %v", ppid, err)
	}
	return pid
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

func TestStageRefusesBadBuild(t *testing.T) {
	dir := t.TempDir()
	p := PathsFor(filepath.Join(dir, "halite-agent"))
	os.WriteFile(p.Bin, []byte("old"), 0o755)
	fetch := func(_ context.Context, dst string) error { return os.WriteFile(dst, []byte("tampered"), 0o644) }
	err := Stage(context.Background(), p, Marker{Version: "2", SHA256: strings.Repeat("ab", 32)}, 8, fetch)
	if err == nil || !strings.Contains(err.Error(), "want 8 bytes") {
		t.Fatalf("Stage of a build with the wrong hash: %v", err)
	}
	if exists(p.Trial) || exists(p.New) {
		t.Errorf("a refused build left files")
	}
	err = Stage(context.Background(), p, Marker{Version: "2", SHA256: "xyz"}, 8, fetch)
	if err == nil {
		t.Fatal("Stage took a malformed sha256")
	}
	os.WriteFile(p.Trial, []byte("{}"), 0o644)
	if err := Stage(context.Background(), p, Marker{Version: "2", SHA256: strings.Repeat("ab", 32)}, 8, fetch); err != ErrBusy {
		t.Errorf("Stage during a trial: %v, want ErrBusy", err)
	}
}

func TestRecoverUnreadableMarker(t *testing.T) {
	dir := t.TempDir()
	p := PathsFor(filepath.Join(dir, "halite-agent"))
	os.WriteFile(p.Bin, []byte("old"), 0o755)
	os.WriteFile(p.New, []byte("new"), 0o755)
	os.WriteFile(p.Trial, []byte("{torn"), 0o644)
	r, err := Recover(p, "1")
	if err != nil || r == nil || r.Result != RolledBack {
		t.Fatalf("Recover: %+v, %v; want rolled back", r, err)
	}
	if err := Finish(p, r); err != nil {
		t.Fatal(err)
	}
	if exists(p.Trial) || exists(p.New) {
		t.Error("files left")
	}
	last, err := ReadLast(p)
	if err != nil || last == nil || last.Result != RolledBack {
		t.Errorf("last %+v, %v", last, err)
	}
	// A huge marker is refused, not read.
	os.WriteFile(p.Trial, bytes.Repeat([]byte(" "), maxMarker+10), 0o644)
	if _, err := ReadTrial(p); err == nil {
		t.Error("ReadTrial read a marker past its bound")
	}
}
