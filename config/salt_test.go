package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSaltShippedFiles loads Salt's own conf/master and conf/minion (Salt
// 3006, see testdata/salt/README) with their options uncommented, as
// CONFIG_DIR/master and CONFIG_DIR/minion: both load; the options Halite
// honours land in their fields; every option of Salt's files is known (no
// "unknown option"); and each other line is warned about once, with its
// file and line.
func TestSaltShippedFiles(t *testing.T) {
	for _, role := range []string{"master", "minion"} {
		t.Run(role, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(filepath.Join("testdata", "salt", role))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, role), data, 0o644); err != nil {
				t.Fatal(err)
			}
			warn, got := collect(dir)
			switch role {
			case "master":
				m, err := LoadMaster(dir, warn)
				if err != nil {
					t.Fatalf("LoadMaster: %v", err)
				}
				// Salt's values, which are its defaults: interface 0.0.0.0,
				// ret_port 4506 (the port, as port is not set), timeout 5,
				// gather_job_timeout 10, keep_jobs 24, worker_threads 5.
				if m.Interface != "0.0.0.0" || m.Port != 4506 || m.RetPort != 4506 || m.Timeout != 5 ||
					m.GatherJobTimeout != 10 || m.KeepJobs != 24 || m.WorkerThreads != 5 || m.AutoAccept {
					t.Errorf("got %+v, want Salt's values", m)
				}
				if m.PkiDir != "/etc/salt/pki/master" || m.CacheDir != "/var/cache/salt/master" ||
					m.LogLevel != "warning" || m.MasterJobCache != "local_cache" {
					t.Errorf("paths and log: got pki_dir %s cachedir %s log_level %s master_job_cache %s, want Salt's",
						m.PkiDir, m.CacheDir, m.LogLevel, m.MasterJobCache)
				}
			case "minion":
				a, err := LoadAgent(dir, warn)
				if err != nil {
					t.Fatalf("LoadAgent: %v", err)
				}
				if strings.Join(a.Master, ",") != "salt" || a.MasterPort != 4506 || a.PkiDir != "/etc/salt/pki/minion" ||
					a.MasterType != "str" || a.RetryDNS != 30 || a.AcceptanceWaitTime != 10 {
					t.Errorf("got %+v, want Salt's values", a)
				}
			}
			lines := map[string]bool{}
			for _, w := range *got {
				if strings.Contains(w, "unknown option") {
					t.Errorf("Salt's own option unknown: %s", w)
				}
				at, _, _ := strings.Cut(w, ": ")
				if lines[at] {
					t.Errorf("two warnings for %s", at)
				}
				lines[at] = true
				if !strings.HasPrefix(at, role+":") {
					t.Errorf("warning %q does not name the file", w)
				}
			}
			if len(*got) < 100 {
				t.Errorf("got %d warnings, want one for each of the >100 options Halite does not use", len(*got))
			}
		})
	}
}
