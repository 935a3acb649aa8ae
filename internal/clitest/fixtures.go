package clitest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master"
)

// fixtureWait bounds how long a fixture waits for a master or an agent.
const fixtureWait = 20 * time.Second

// masters are the masters the "master" command started, by script and
// configuration directory, for "agent" to find.
var masters sync.Map // key{ts, dir} -> *master.Master

type key struct {
	ts  *testscript.TestScript
	dir string
}

// Fixtures are script commands that run Halite's real master and agents
// in the test's process:
//
//	conf CONFIG_DIR      writes CONFIG_DIR/master: root_dir CONFIG_DIR as
//	                     an absolute path, interface 127.0.0.1, no log
//	                     file, then CONFIG_DIR/master.extra if there is one
//	master CONFIG_DIR    runs the master until the script ends (free port)
//	agent CONFIG_DIR ID  runs agent ID of that master until the script
//	                     ends, once it has connected (its key must be
//	                     accepted: auto_accept in master.extra)
func Fixtures() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"conf": conf, "master": runMaster, "agent": runAgent,
	}
}

func conf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: conf CONFIG_DIR")
	}
	dir := ts.MkAbs(args[0])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		ts.Fatalf("%v", err)
	}
	text := "root_dir: " + dir + "\ninterface: 127.0.0.1\nlog_file: ''\n"
	if extra, err := os.ReadFile(filepath.Join(dir, "master.extra")); err == nil {
		text += string(extra)
	}
	if err := os.WriteFile(filepath.Join(dir, "master"), []byte(text), 0o644); err != nil {
		ts.Fatalf("%v", err)
	}
}

// LoadMaster loads the master configuration under the script's dir.
func LoadMaster(ts *testscript.TestScript, dir string) *config.Master {
	cfg, err := config.LoadMaster(ts.MkAbs(dir), func(config.Warning) {})
	if err != nil {
		ts.Fatalf("load master config: %v", err)
	}
	return cfg
}

func runMaster(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: master CONFIG_DIR")
	}
	cfg := LoadMaster(ts, args[0])
	cfg.Interface, cfg.Port = "127.0.0.1", 0
	m, err := master.New(cfg, zap.NewNop())
	if err != nil {
		ts.Fatalf("master: %v", err)
	}
	m.SetLocalCall(exec.LocalCall(m.Name(), "test", zap.NewNop()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	k := key{ts, args[0]}
	ts.Defer(func() {
		masters.Delete(k)
		cancel()
		if err := <-done; err != nil {
			ts.Logf("master Run: %v", err)
		}
	})
	select {
	case <-m.Ready():
	case err := <-done:
		done <- err
		ts.Fatalf("master stopped before it was ready: %v", err)
	case <-time.After(fixtureWait):
		ts.Fatalf("master not ready after %v", fixtureWait)
	}
	masters.Store(k, m)
}

func runAgent(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: agent CONFIG_DIR ID")
	}
	v, ok := masters.Load(key{ts, args[0]})
	if !ok {
		ts.Fatalf("agent: no master running for %s", args[0])
	}
	m := v.(*master.Master)
	id := args[1]
	started := m.Bus().Subscribe("salt/minion/"+id+"/start", 4)
	defer started.Close()

	dir := ts.MkAbs(filepath.Join("agents", id))
	cfg := config.DefaultAgent()
	cfg.ID, cfg.RootDir = id, dir
	cfg.Master = []string{m.Addr().String()}
	cfg.PkiDir, cfg.CacheDir = filepath.Join(dir, "pki"), filepath.Join(dir, "cache")
	cfg.SockDir, cfg.LogFile = filepath.Join(dir, "run"), ""
	cfg.AcceptanceWaitTime = 1
	a, err := agent.New(cfg, zap.NewNop())
	if err != nil {
		ts.Fatalf("agent %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	ts.Defer(func() {
		cancel()
		if err := <-done; err != nil {
			ts.Logf("agent %s Run: %v", id, err)
		}
	})
	select {
	case <-started.C():
	case err := <-done:
		done <- err
		ts.Fatalf("agent %s stopped before it connected: %v", id, err)
	case <-time.After(fixtureWait):
		ts.Fatalf("agent %s not connected after %v", id, fixtureWait)
	}
}
