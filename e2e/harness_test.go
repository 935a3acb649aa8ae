package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/halite-fleet/halite/internal/testwait"
)

// binDir holds the binaries built once for the whole run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "halite-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	cmd := exec.Command("go", "build", "-o", dir+"/",
		"../cmd/halite-master", "../cmd/halite-agent", "../cmd/halite", "../cmd/halite-key", "../cmd/halite-run")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	// halite-call is the agent under another name, as make build and the
	// device installs have it (the agent binary is multi-call).
	if err := os.Symlink("halite-agent", dir+"/halite-call"); err != nil {
		fmt.Fprintln(os.Stderr, "link halite-call:", err)
		os.Exit(1)
	}
	// A relay that alters what it forwards (relay/tamper_hook.go), to show
	// as real processes that the ends refuse it.
	cmd = exec.Command("go", "build", "-tags", "halite_tamper", "-o", dir+"/tamper/", "../cmd/halite-agent")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the tampering relay:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeUDPPort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// proc is a daemon started by a test.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// lockedWriter lets the process write its output while a test reads it.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// cluster is a master and its agents under one temporary directory.
type cluster struct {
	t      *testing.T
	root   string
	port   int
	master *proc
	agents map[string]*proc
	extra  string // more master config
	iface  string // the master's interface; "" is 127.0.0.1
	netns  string // the network namespace the master runs in; "" is the test's
}

func newCluster(t *testing.T, masterExtra string) *cluster {
	t.Helper()
	c := &cluster{t: t, root: t.TempDir(), port: freeUDPPort(t), agents: map[string]*proc{}, extra: masterExtra}
	t.Cleanup(func() {
		for id, a := range c.agents {
			c.stop(a)
			if t.Failed() {
				t.Logf("agent %s output:\n%s", id, a.output())
			}
		}
		if c.master != nil {
			c.stop(c.master)
			if t.Failed() {
				t.Logf("master output:\n%s", c.master.output())
			}
		}
	})
	return c
}

func (c *cluster) masterDir() string { return filepath.Join(c.root, "etc", "master") }

func (c *cluster) writeMasterConfig() {
	c.t.Helper()
	dir := c.masterDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	iface := c.iface
	if iface == "" {
		iface = "127.0.0.1"
	}
	conf := fmt.Sprintf("root_dir: %s\ninterface: %s\nport: %d\nlog_file: ''\ntimeout: 10\n%s",
		filepath.Join(c.root, "master"), iface, c.port, c.extra)
	if err := os.WriteFile(filepath.Join(dir, "master"), []byte(conf), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) start(name string, args ...string) *proc {
	c.t.Helper()
	return c.startRaw(filepath.Join(binDir, name), args...)
}

// startRaw starts any program as a daemon of the cluster.
func (c *cluster) startRaw(path string, args ...string) *proc {
	c.t.Helper()
	return c.startRawEnv(nil, path, args...)
}

// startRawEnv is startRaw with more environment variables (KEY=value).
func (c *cluster) startRawEnv(env []string, path string, args ...string) *proc {
	c.t.Helper()
	name := filepath.Base(path)
	p := &proc{name: name, log: new(bytes.Buffer), mu: new(sync.Mutex), done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	w := lockedWriter{p.mu, p.log}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// startMaster starts (or restarts) the master and waits for its socket.
func (c *cluster) startMaster() {
	c.t.Helper()
	c.startMasterAt("info")
}

// startMasterAt is startMaster with the master's console log level.
func (c *cluster) startMasterAt(level string) {
	c.t.Helper()
	c.writeMasterConfig()
	sock := filepath.Join(c.root, "master", "var", "run", "halite", "master", "master.sock")
	if c.netns != "" {
		c.master = c.startRaw("/usr/sbin/ip", "netns", "exec", c.netns, filepath.Join(binDir, "halite-master"), "-c", c.masterDir(), "-l", level)
	} else {
		c.master = c.start("halite-master", "-c", c.masterDir(), "-l", level)
	}
	waitFor(c.t, 20*time.Second, "master socket", func() bool {
		select {
		case <-c.master.done:
			c.t.Fatalf("master exited:\n%s", c.master.output())
		default:
		}
		conn, err := net.Dial("unix", sock)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

func (c *cluster) agentDir(id string) string { return filepath.Join(c.root, "etc", id) }

// startAgent writes an agent's config (first time) and starts it.
func (c *cluster) startAgent(id string, extra string) *proc {
	c.t.Helper()
	c.writeAgentConfig(id, extra)
	p := c.start("halite-agent", "-c", c.agentDir(id), "-l", "info")
	c.agents[id] = p
	return p
}

// writeAgentConfig writes the config of an agent of the cluster's master,
// the first time.
func (c *cluster) writeAgentConfig(id, extra string) {
	c.t.Helper()
	dir := c.agentDir(id)
	if _, err := os.Stat(filepath.Join(dir, "agent")); err != nil {
		os.MkdirAll(dir, 0o755)
		conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: 127.0.0.1\nmaster_port: %d\nacceptance_wait_time: 1\nrandom_reauth_delay: 1\nlog_file: ''\n%s",
			id, filepath.Join(c.root, id), c.port, extra)
		if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
}

// startTampering starts agent id as startAgent does, but from the
// tampering build, altering every forwarded frame of type what ("job",
// "return").
func (c *cluster) startTampering(id, what, extra string) *proc {
	c.t.Helper()
	c.writeAgentConfig(id, extra)
	p := c.startRawEnv([]string{"HALITE_TEST_TAMPER=" + what}, filepath.Join(binDir, "tamper", "halite-agent"), "-c", c.agentDir(id), "-l", "info")
	c.agents[id] = p
	return p
}

// stop sends SIGTERM and waits, then SIGKILL.
func (c *cluster) stop(p *proc) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		c.t.Errorf("%s did not stop within 10s of SIGTERM", p.name)
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (c *cluster) kill(p *proc) {
	p.cmd.Process.Kill()
	<-p.done
}

// result of a CLI run.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs one of the operator CLIs against the cluster's master.
func (c *cluster) cli(name string, args ...string) result {
	c.t.Helper()
	return runCmd(c.t, name, append([]string{"-c", c.masterDir()}, args...)...)
}

func runCmd(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", name, args, err)
	}
	return result{out.String(), errb.String(), code}
}

// jsonOut runs a CLI with --out json and decodes its output.
func (c *cluster) jsonOut(name string, args ...string) (map[string]any, result) {
	c.t.Helper()
	r := c.cli(name, append(args, "--out", "json")...)
	m := map[string]any{}
	if r.code == 2 && strings.HasPrefix(r.stdout, "No minions matched the target.") {
		return m, r // salt prints this as text whatever --out says (salt/cli/salt.py)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var part map[string]any
		if err := dec.Decode(&part); err != nil {
			c.t.Fatalf("%s %v: output is not JSON: %v\n%s\nstderr: %s", name, args, err, r.stdout, r.stderr)
		}
		for k, v := range part {
			m[k] = v
		}
	}
	return m, r
}

// acceptAll accepts every pending key and waits until ids are all up.
func (c *cluster) acceptAll(ids ...string) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, "pending keys", func() bool {
		keys, _ := c.jsonOut("halite-key", "-L")
		pre, _ := keys["minions_pre"].([]any)
		acc, _ := keys["minions"].([]any)
		return len(pre)+len(acc) >= len(ids)
	})
	if r := c.cli("halite-key", "-A", "-y"); r.code != 0 {
		c.t.Fatalf("halite-key -A -y: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.waitUp(ids...)
}

// waitUp waits until manage.up lists every id.
func (c *cluster) waitUp(ids ...string) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, fmt.Sprintf("minions %v up", ids), func() bool {
		r := c.cli("halite-run", "manage.up", "--out", "json")
		var up []string
		if json.Unmarshal([]byte(r.stdout), &up) != nil {
			return false
		}
		have := map[string]bool{}
		for _, id := range up {
			have[id] = true
		}
		for _, id := range ids {
			if !have[id] {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

func fmtInt(n int) string { return fmt.Sprint(n) }
