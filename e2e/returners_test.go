package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func uniq() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sh runs a backend's own client and returns its trimmed output, failing
// the test when it fails.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// The returners as a user sets them up: master_job_cache on MariaDB,
// event_return into PostgreSQL, --return redis and webhook, read back with
// redis-cli, mariadb and psql; then a master restart with returns still
// queued for a webhook that was failing.
func TestReturnersWithRealBackends(t *testing.T) {
	u := uniq()
	mydb, pgdb, prefix := "halite_e_"+u, "halite_e_"+u, "halite-e-"+u+":"
	sh(t, "mariadb", "-uroot", "-h127.0.0.1", "-e", "CREATE DATABASE "+mydb)
	defer exec.Command("mariadb", "-uroot", "-h127.0.0.1", "-e", "DROP DATABASE "+mydb).Run()
	sh(t, "psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", "CREATE DATABASE "+pgdb)
	defer exec.Command("psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", "DROP DATABASE "+pgdb+" WITH (FORCE)").Run()
	defer func() {
		keys := sh(t, "redis-cli", "--scan", "--pattern", prefix+"*")
		if keys != "" {
			exec.Command("redis-cli", append([]string{"DEL"}, strings.Fields(keys)...)...).Run()
		}
	}()

	var healthy atomic.Bool
	var mu sync.Mutex
	posted := map[string]bool{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var buf [4096]byte
		n, _ := r.Body.Read(buf[:])
		mu.Lock()
		posted[string(buf[:n])] = true
		mu.Unlock()
	}))
	defer hook.Close()

	c := newCluster(t, fmt.Sprintf(`auto_accept: True
master_job_cache: mysql
mysql.host: 127.0.0.1
mysql.user: root
mysql.pass: ''
mysql.db: %s
event_return: pgjsonb
event_return_whitelist:
  - salt/job/*
returner.pgjsonb.host: 127.0.0.1
returner.pgjsonb.user: postgres
returner.pgjsonb.pass: ''
returner.pgjsonb.db: %s
returner.pgjsonb.sslmode: disable
redis.host: 127.0.0.1
redis.key_prefix: '%s'
webhook.url: %s
`, mydb, pgdb, prefix, hook.URL))
	c.startMaster()
	c.startAgent("a1", "")
	c.waitUp("a1")

	rets, r := c.jsonOut("halite", "*", "test.ping", "--return", "redis,webhook")
	if r.code != 0 || rets["a1"] != true {
		t.Fatalf("test.ping --return redis,webhook: exit %d, %v\n%s", r.code, rets, r.stderr)
	}
	var jid string
	waitFor(t, 20*time.Second, "the job in MariaDB", func() bool {
		jid = strings.TrimSpace(sh(t, "mariadb", "-uroot", "-h127.0.0.1", "-N", mydb, "-e", "SELECT jid FROM jids WHERE `load` LIKE '%test.ping%'"))
		return len(jid) == 20
	})
	waitFor(t, 20*time.Second, "a1's return in MariaDB", func() bool {
		return sh(t, "mariadb", "-uroot", "-h127.0.0.1", "-N", mydb, "-e", "SELECT success FROM salt_returns WHERE jid='"+jid+"' AND id='a1'") == "1"
	})
	waitFor(t, 20*time.Second, "a1's return in Redis", func() bool {
		return strings.Contains(sh(t, "redis-cli", "HGET", prefix+"ret:"+jid, "a1"), `"return":true`)
	})
	if got := sh(t, "redis-cli", "GET", prefix+"a1:test.ping"); got != jid {
		t.Errorf("redis %sa1:test.ping = %q, want %s", prefix, got, jid)
	}
	waitFor(t, 20*time.Second, "the job's events in PostgreSQL", func() bool {
		return sh(t, "psql", "-h", "127.0.0.1", "-U", "postgres", "-d", pgdb, "-tAc",
			"SELECT count(*) FROM salt_events WHERE tag IN ('salt/job/"+jid+"/new', 'salt/job/"+jid+"/ret/a1')") == "2"
	})
	// The jobs runners read master_job_cache.
	looked, r := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
	if looked["a1"] != true {
		t.Fatalf("jobs.lookup_jid %s: %v\n%s", jid, looked, r.stderr)
	}
	jids, _ := c.jsonOut("halite-run", "ret.get_jids", "mysql")
	if _, ok := jids[jid]; !ok {
		t.Fatalf("ret.get_jids mysql lacks %s: %v", jid, jids)
	}

	// The webhook fails: its queue holds the return, the rest went on.
	st, _ := c.jsonOut("halite-run", "returners.status")
	wh, _ := st["webhook"].(map[string]any)
	if wh["queued"] != float64(1) {
		t.Fatalf("returners.status webhook = %v, want 1 queued", wh)
	}
	// A master restart with the queue not empty; the webhook heals.
	c.stop(c.master)
	healthy.Store(true)
	c.startMaster()
	waitFor(t, 30*time.Second, "the queued return posted after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for body := range posted {
			if strings.Contains(body, jid) && strings.Contains(body, `"id":"a1"`) {
				return true
			}
		}
		return false
	})
}

// TestAgentReturnOption: an agent's `return:` option sends every return of
// that agent to those returners too (run on the master), and only that
// agent's.
func TestAgentReturnOption(t *testing.T) {
	out := filepath.Join(t.TempDir(), "returns.json")
	c := newCluster(t, "rawfile_json.filename: "+out+"\n")
	c.startMaster()
	c.startAgent("withret", "return: rawfile_json\n")
	c.startAgent("plain", "")
	c.acceptAll("withret", "plain")
	if rets, r := c.jsonOut("halite", "*", "test.echo", "hello"); len(rets) != 2 || r.code != 0 {
		t.Fatalf("test.echo: exit %d, %v", r.code, rets)
	}
	waitFor(t, 20*time.Second, "the return in the rawfile_json file", func() bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), `"withret"`)
	})
	b, _ := os.ReadFile(out)
	if strings.Contains(string(b), `"plain"`) {
		t.Errorf("a return of the agent without return: reached the returner:\n%s", b)
	}
}

// halite --return_config / --return_kwargs: the job's returner reads its
// options under the alternative prefix, with the kwargs over them.
func TestReturnConfigAndKwargs(t *testing.T) {
	dir := t.TempDir()
	plain, alt, kw := filepath.Join(dir, "plain.json"), filepath.Join(dir, "alt.json"), filepath.Join(dir, "kw.json")
	c := newCluster(t, "rawfile_json.filename: "+plain+"\nalternative.rawfile_json.filename: "+alt+"\n")
	c.startMaster()
	c.startAgent("web1", "")
	c.acceptAll("web1")
	if _, r := c.jsonOut("halite", "*", "test.ping", "--return", "rawfile_json", "--return_config", "alternative"); r.code != 0 {
		t.Fatalf("--return_config: exit %d", r.code)
	}
	if _, r := c.jsonOut("halite", "*", "test.ping", "--return", "rawfile_json", "--return_config", "alternative",
		"--return_kwargs", `{"filename": "`+kw+`"}`); r.code != 0 {
		t.Fatalf("--return_kwargs: exit %d", r.code)
	}
	for _, f := range []string{alt, kw} {
		waitFor(t, 20*time.Second, "a return in "+f, func() bool {
			b, _ := os.ReadFile(f)
			return strings.Count(string(b), "\n") == 1
		})
	}
	if _, err := os.Stat(plain); err == nil {
		t.Errorf("the plain rawfile_json.filename got a return; want none")
	}
}

// A masterless agent runs its return: returners itself: halite-call
// writes the rawfile_json line.
func TestMasterlessReturner(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "returns.json")
	dir := filepath.Join(root, "etc")
	os.MkdirAll(dir, 0o755)
	conf := "id: solo\nroot_dir: " + filepath.Join(root, "solo") + "\nmaster_type: disable\nfile_client: local\nlog_file: ''\nreturn: rawfile_json\nrawfile_json.filename: " + out + "\n"
	os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644)
	if r := runCmd(t, "halite-call", "-c", dir, "test.echo", "hello"); r.code != 0 {
		t.Fatalf("halite-call test.echo: exit %d", r.code)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), `"return":"hello"`) || !strings.Contains(string(b), `"id":"solo"`) {
		t.Fatalf("rawfile_json file: %s (%v); want a line with id solo and return hello", b, err)
	}
}
