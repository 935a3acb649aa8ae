package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// helloEngine is a JSON-lines user engine: it says hello with its version
// and then reads the events it is sent until it is stopped.
func helloEngine(version string) string {
	return `#!/bin/sh
echo "{\"tag\": \"myco/hello\", \"data\": {\"version\": \"` + version + `\", \"greeting\": $(echo "$HALITE_ENGINE_OPTS" | sed 's/.*"greeting":"\([^"]*\)".*/"\1"/')}}"
while read -r line; do :; done
`
}

// TestUserEngineSync: a user engine in the master's file_roots _engines/
// is synced to two agents by saltutil.sync_engines, started there (its
// events reach the master's reactor), and restarted on both when it is
// changed and synced again. A crashing script engine on the same agents
// is restarted with backoff and never takes the agent down.
func TestUserEngineSync(t *testing.T) {
	root := t.TempDir()
	srvRoot := filepath.Join(root, "srv")
	os.MkdirAll(filepath.Join(srvRoot, "_engines"), 0o755)
	os.MkdirAll(filepath.Join(srvRoot, "reactor"), 0o755)
	marker := filepath.Join(root, "hellos")
	os.WriteFile(filepath.Join(srvRoot, "reactor", "hello.sls"), []byte(`record:
  local.cmd.run:
    - tgt: {{ data['id'] }}
    - args:
      - cmd: echo {{ data['id'] }} {{ data['data']['version'] }} {{ data['data']['greeting'] }} >> `+marker+`
`), 0o644)
	write := func(version string) {
		if err := os.WriteFile(filepath.Join(srvRoot, "_engines", "hello.sh"), []byte(helloEngine(version)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("v1")
	c := newCluster(t, "file_roots:\n  base:\n    - "+srvRoot+"\nreactor:\n  - 'myco/hello':\n    - salt://reactor/hello.sls\n")
	c.startMaster()
	agentConf := "engines:\n  - hello:\n      greeting: hi\n  - crashy:\n      engine_module: script\n      cmd: 'exit 3'\n"
	c.startAgent("cam1", agentConf)
	c.startAgent("cam2", agentConf)
	c.acceptAll("cam1", "cam2")

	rets, r := c.jsonOut("halite", "*", "saltutil.sync_engines")
	for _, id := range []string{"cam1", "cam2"} {
		if got := jsonString(rets[id]); got != `["engines.hello"]` {
			t.Errorf("%s sync_engines = %s, want [\"engines.hello\"] (stderr %s)", id, got, r.stderr)
		}
	}
	has := func(line string) bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), line)
	}
	waitFor(t, 60*time.Second, "hello v1 from both agents through the reactor", func() bool {
		return has("cam1 v1 hi") && has("cam2 v1 hi")
	})
	// Nothing changed: nothing synced.
	if rets, _ := c.jsonOut("halite", "cam1", "saltutil.sync_all"); jsonString(rets["cam1"]) != `{"engines":[]}` {
		t.Errorf("sync_all with nothing new = %s", jsonString(rets["cam1"]))
	}
	write("v2")
	c.jsonOut("halite", "*", "saltutil.sync_engines")
	waitFor(t, 60*time.Second, "hello v2 from both agents after the change", func() bool {
		return has("cam1 v2 hi") && has("cam2 v2 hi")
	})
	// The crashing engine was restarted, and the agents still work.
	rets, _ = c.jsonOut("halite", "*", "test.ping")
	if rets["cam1"] != true || rets["cam2"] != true {
		t.Errorf("test.ping with a crashing engine = %v", rets)
	}
	if out := c.agents["cam1"].output(); !strings.Contains(out, "engine stopped; restarting it") || !strings.Contains(out, "exit status 3") {
		t.Errorf("cam1 log does not show the crashing engine restarted:\n%s", out)
	}
}

// TestMasterEngines: the webhook engine turns a POST into an event, a
// Starlark user engine from _engines/ reacts to it, calls a runner
// (manage.up) and fires its own event, which the reactor turns into a job
// on a device.
func TestMasterEngines(t *testing.T) {
	root := t.TempDir()
	srvRoot := filepath.Join(root, "srv")
	os.MkdirAll(filepath.Join(srvRoot, "_engines"), 0o755)
	os.MkdirAll(filepath.Join(srvRoot, "reactor"), 0o755)
	marker := filepath.Join(root, "deployed")
	os.WriteFile(filepath.Join(srvRoot, "_engines", "deployer.star"), []byte(`
EVENTS = ["salt/engines/hook/deploy/*"]
seen = {"n": 0}
def on_event(tag, data):
    seen["n"] += 1
    app = data["post"]["app"]
    log.info("deploy requested", app)
    up = call("manage.up")
    event.fire("myco/deploy/" + app, {"app": app, "count": seen["n"], "target": opts["target"], "up": len(up)})
`), 0o644)
	os.WriteFile(filepath.Join(srvRoot, "reactor", "deploy.sls"), []byte(`deploy:
  local.cmd.run:
    - tgt: {{ data['target'] }}
    - args:
      - cmd: echo {{ data['app'] }} {{ data['count'] }} up={{ data['up'] }} >> `+marker+`
`), 0o644)
	port := freeTCPPort(t)
	c := newCluster(t, fmt.Sprintf(`file_roots:
  base:
    - %s
reactor:
  - 'myco/deploy/*':
    - salt://reactor/deploy.sls
engines:
  - webhook:
      address: 127.0.0.1
      port: %d
  - deployer:
      target: cam1
`, srvRoot, port))
	c.startMaster()
	c.startAgent("cam1", "")
	c.acceptAll("cam1")
	url := fmt.Sprintf("http://127.0.0.1:%d/deploy/web", port)
	waitFor(t, 20*time.Second, "the webhook", func() bool {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"app": "web"}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	waitFor(t, 60*time.Second, "the deploy job on cam1", func() bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), "web 1 up=1")
	})
}

// TestBadEngineRefusedAtStart: the master does not start with an engine
// whose options are wrong, and names the engine and the option.
func TestBadEngineRefusedAtStart(t *testing.T) {
	c := newCluster(t, "engines:\n  - hook:\n      engine_module: webhook\n      prot: 8080\n")
	c.writeMasterConfig()
	p := c.start("halite-master", "-c", c.masterDir())
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		c.stop(p)
		t.Fatal("the master kept running with a bad engine")
	}
	out := p.output()
	if !strings.Contains(out, "engine hook: option port is required") && !strings.Contains(out, "engine hook: unknown option prot") {
		t.Errorf("master output does not name the engine and option:\n%s", out)
	}
	if p.cmd.ProcessState.ExitCode() == 0 {
		t.Error("exit status 0")
	}
}

// TestStarlarkEngineOnAgents: agents built with -tags starlark run a
// Starlark engine synced from the master; it reads grains, calls an
// execution function and sends events that drive the master's reactor.
func TestStarlarkEngineOnAgents(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "halite-agent")
	build := exec.Command("go", "build", "-tags", "starlark", "-o", bin, "../cmd/halite-agent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags starlark: %v\n%s", err, out)
	}
	root := t.TempDir()
	srvRoot := filepath.Join(root, "srv")
	os.MkdirAll(filepath.Join(srvRoot, "_engines"), 0o755)
	os.MkdirAll(filepath.Join(srvRoot, "reactor"), 0o755)
	marker := filepath.Join(root, "stars")
	os.WriteFile(filepath.Join(srvRoot, "_engines", "heartbeat.star"), []byte(`
INTERVAL = 0.2
state = {"n": 0}
def on_tick():
    state["n"] += 1
    if state["n"] == 3:
        echoed = call("test.echo", opts["word"])
        event.send("myco/heartbeat", {"site": grains.get("site", "?"), "echo": echoed})
`), 0o644)
	os.WriteFile(filepath.Join(srvRoot, "reactor", "hb.sls"), []byte(`record:
  local.cmd.run:
    - tgt: {{ data['id'] }}
    - args:
      - cmd: echo {{ data['id'] }} {{ data['data']['site'] }} {{ data['data']['echo'] }} >> `+marker+`
`), 0o644)
	c := newCluster(t, "file_roots:\n  base:\n    - "+srvRoot+"\nreactor:\n  - 'myco/heartbeat':\n    - salt://reactor/hb.sls\n")
	c.startMaster()
	for _, id := range []string{"cam1", "cam2"} {
		dir := c.agentDir(id)
		os.MkdirAll(dir, 0o755)
		conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: 127.0.0.1\nmaster_port: %d\nacceptance_wait_time: 1\nlog_file: ''\ngrains:\n  site: north\nengines:\n  - heartbeat:\n      word: tick\n",
			id, filepath.Join(c.root, id), c.port)
		os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644)
		c.agents[id] = c.startRaw(bin, "-c", dir, "-l", "info")
	}
	c.acceptAll("cam1", "cam2")
	rets, _ := c.jsonOut("halite", "*", "saltutil.sync_engines")
	if jsonString(rets["cam1"]) != `["engines.heartbeat"]` || jsonString(rets["cam2"]) != `["engines.heartbeat"]` {
		t.Errorf("sync_engines = %v", rets)
	}
	waitFor(t, 60*time.Second, "the Starlark engine's events from both agents through the reactor", func() bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), "cam1 north tick") && strings.Contains(string(b), "cam2 north tick")
	})
}
