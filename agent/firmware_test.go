package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/ota"
)

// otaAgent is a test agent whose "binary" is a file in a temporary folder.
func otaAgent(t *testing.T) *Agent {
	t.Helper()
	a := newTestAgent(t, "cam1", nil, nil)
	t.Cleanup(func() { a.closeForTest() })
	a.ota.paths = ota.PathsFor(filepath.Join(t.TempDir(), "halite-agent"))
	if err := os.WriteFile(a.ota.paths.Bin, []byte("old build"), 0o755); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *Agent) closeForTest() {
	for _, o := range a.outs {
		o.spool.close()
	}
	a.jobs.close()
}

func TestFirmwareStatus(t *testing.T) {
	a := otaAgent(t)
	res := a.exec.Run(context.Background(), exec.Request{Fun: "firmware.status"})
	st, _ := res.Return.(map[string]any)
	if !res.Success || st["version"] != Version || st["platform"] != ota.Platform() || st["trial"] != false || st["last"] != nil {
		t.Fatalf("firmware.status: %+v", res)
	}
	if g := a.grains.Get(); g[grainPlatform] != ota.Platform() || g[grainVersion] != Version {
		t.Errorf("grains %s=%v %s=%v", grainPlatform, g[grainPlatform], grainVersion, g[grainVersion])
	}
	os.WriteFile(a.ota.paths.Trial, []byte(`{"version":"2.0.0","from":"1.0.0","sha256":"ab","started":1,"timeout":120}`), 0o644)
	os.WriteFile(a.ota.paths.Last, []byte(`{"result":"rolled_back","version":"1.5.0","from":"1.0.0","reason":"timeout","at":1}`), 0o644)
	res = a.exec.Run(context.Background(), exec.Request{Fun: "firmware.status"})
	st, _ = res.Return.(map[string]any)
	trial, _ := st["trial"].(map[string]any)
	last, _ := st["last"].(map[string]any)
	if trial["version"] != "2.0.0" || last["result"] != "rolled_back" || last["reason"] != "timeout" {
		t.Errorf("firmware.status with a trial and a last result: %v", st)
	}
}

func TestFirmwareUpdateRefusals(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	fw := func(platform string, extra ...any) map[string]any {
		m := map[string]any{"version": "2.0.0", "platform": platform,
			"manifest": map[string]any{"size": uint64(10), "sha256": sum, "chunks": []any{sum}}}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		kw     map[string]any
		trial  bool
		want   string
		result string
	}{
		{"no build", map[string]any{"version": "2.0.0"}, false, "runs as a master's job", ""},
		{"other devices", map[string]any{"__for__": []any{"cam2"}, "__firmware__": fw(ota.Platform())}, false, "chosen for other devices", ""},
		{"no build on the master", map[string]any{"__firmware__": fw(ota.Platform(), "error", "the master has no build 2.0.0 for linux-armv7")}, false, "has no build", ""},
		{"other platform", map[string]any{"__firmware__": fw("linux-mipsle")}, false, "is for linux-mipsle", ""},
		{"bad manifest", map[string]any{"__firmware__": fw(ota.Platform(), "manifest", map[string]any{"size": "x"})}, false, "the job's build", ""},
		{"on trial", map[string]any{"__firmware__": fw(ota.Platform())}, true, "already", ""},
		{"current", map[string]any{"__firmware__": fw(ota.Platform(), "version", Version)}, false, "", "current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := otaAgent(t)
			if tc.trial {
				os.WriteFile(a.ota.paths.Trial, []byte(`{"version":"1.9"}`), 0o644)
			}
			res := a.exec.Run(context.Background(), exec.Request{JID: "20261124000000000001", Fun: "firmware.update", Kwargs: tc.kw})
			got := fmt.Sprint(res.Return)
			if tc.result != "" {
				if !res.Success || !strings.Contains(got, tc.result) {
					t.Fatalf("firmware.update: %+v, want success %q", res, tc.result)
				}
				return
			}
			if res.Success || !strings.Contains(got, tc.want) {
				t.Fatalf("firmware.update: %+v, want a failure saying %q", res, tc.want)
			}
			if a.Handoff() != nil {
				t.Error("a refused update handed over")
			}
			if _, err := os.Stat(a.ota.paths.New); err == nil {
				t.Error("a refused update left a build")
			}
		})
	}
}

// TestTrialAccepted: a build on trial whose session a master accepts is
// made the one that boots.
func TestTrialAccepted(t *testing.T) {
	a := otaAgent(t)
	p := a.ota.paths
	os.WriteFile(p.New, []byte("new build"), 0o755)
	os.WriteFile(p.Trial, []byte(`{"version":"2.0.0"}`), 0o644)
	a.trialAccepted("m") // not on trial: nothing
	if b, _ := os.ReadFile(p.Bin); string(b) != "old build" {
		t.Fatalf("an agent not on trial committed")
	}
	a.SetTrial()
	stopped := false
	a.ota.stop = func() { stopped = true }
	a.trialAccepted("m")
	if b, _ := os.ReadFile(p.Bin); string(b) != "new build" {
		t.Errorf("B is %q after the commit", b)
	}
	if b, _ := os.ReadFile(p.Prev); string(b) != "old build" {
		t.Errorf("B.prev is %q", b)
	}
	if !stopped {
		t.Error("the trial did not stop after its commit")
	}
	a.ota.trial = false
	a.settleUpdate()
	last, err := ota.ReadLast(p)
	// (This test binary is not 2.0.0: the result says what runs.)
	if err != nil || last == nil || last.Result != ota.Updated || last.Version != Version || !strings.Contains(last.Reason, "2.0.0") {
		t.Errorf("last result after the restart: %+v, %v", last, err)
	}
	if _, err := os.Stat(p.Trial); err == nil {
		t.Error("marker left after settling")
	}
}
