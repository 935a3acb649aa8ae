package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halite-fleet/halite/internal/udphop"
)

// bigFileSize is the salt:// file of these tests: ten times the largest
// file a job carries inline (master/fileserver: 1 MiB a file).
const bigFileSize = 10 << 20

// bigFileRoots writes file_roots with big.bin (random bytes) and big.sls,
// a file.managed of it to each device's grain dest, and returns the master
// config and the file's bytes.
func bigFileRoots(t *testing.T) (string, []byte) {
	t.Helper()
	return bigFileRootsN(t, bigFileSize)
}

// bigFileRootsN is bigFileRoots with a big.bin of size bytes.
func bigFileRootsN(t *testing.T, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	roots := writeFileRoots(t, map[string]string{
		"big.sls": "big:\n  file.managed:\n    - name: {{ grains['dest'] }}\n    - source: salt://big.bin\n    - makedirs: True\n",
	})
	dir := strings.TrimSpace(roots[strings.LastIndex(roots, "- ")+2:])
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return roots, data
}

// chunkBeat is what a relay's heartbeat says of its chunks.
type chunkBeat struct {
	Upstream bool  `json:"upstream"`
	UpBytes  int64 `json:"chunk_up_bytes"`
	Misses   int64 `json:"chunk_misses"`
	Hits     int64 `json:"chunk_hits"`
	Shared   int64 `json:"chunk_shared"`
}

// chunkBeats follows relay id's heartbeats; last returns the latest.
func chunkBeats(t *testing.T, c *cluster, id string) (last func() chunkBeat) {
	t.Helper()
	lines := c.eventStream(t)
	var mu sync.Mutex
	var hb chunkBeat
	go func() {
		for l := range lines {
			tag, js, _ := strings.Cut(l, "\t")
			if tag != "halite/relay/"+id+"/heartbeat" {
				continue
			}
			var ev struct{ Data chunkBeat }
			if json.Unmarshal([]byte(js), &ev) == nil {
				mu.Lock()
				hb = ev.Data
				mu.Unlock()
			}
		}
	}()
	return func() chunkBeat {
		mu.Lock()
		defer mu.Unlock()
		return hb
	}
}

func (c *cluster) devicesWithDest(relayPort int, ids ...string) map[string]string {
	c.t.Helper()
	dests := map[string]string{}
	for _, id := range ids {
		dests[id] = filepath.Join(c.root, id, "files", "big.bin")
		c.startBehind(id, relayPort, "grains:\n  dest: "+dests[id]+"\n")
	}
	return dests
}

func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes (%v), want the %d bytes of salt://big.bin", path, len(got), err, len(want))
	}
}

// TestStateBigFileThroughRelay: a salt:// file ten times larger than a job
// may carry goes to three devices behind a relay, applied by state.sls:
// the job carries its manifest, the devices fetch it by chunks, and the
// relay fetches each chunk from the master once (its WAN carries the file
// once, not three times).
func TestStateBigFileThroughRelay(t *testing.T) {
	roots, data := bigFileRoots(t)
	c := newCluster(t, relayAllow+roots)
	port := c.masterAndRelay("r1")
	devs := []string{"d1", "d2", "d3"}
	dests := c.devicesWithDest(port, devs...)
	c.waitPending(len(devs))
	c.acceptAll(append([]string{"r1"}, devs...)...)
	beat := chunkBeats(t, c, "r1")

	r := c.cli("halite", "-t", "60", "d*", "state.sls", "big")
	if r.code != 0 || strings.Count(r.stdout, "Succeeded: 1") != len(devs) {
		t.Fatalf("state.sls big: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, id := range devs {
		checkFile(t, dests[id], data)
	}
	var hb chunkBeat
	waitFor(t, 20*time.Second, "r1's heartbeat counting every chunk served", func() bool {
		hb = beat()
		return hb.Misses+hb.Hits+hb.Shared >= int64(len(devs)*bigFileSize/(256<<10))
	})
	if hb.UpBytes != bigFileSize {
		t.Errorf("r1 fetched %d bytes of chunks from the master, want the file once: %d (%+v)", hb.UpBytes, bigFileSize, hb)
	}
	// Applied again: the file is there, nothing changes.
	r = c.cli("halite", "-t", "60", "d1", "state.sls", "big")
	if r.code != 0 || !strings.Contains(r.stdout, "is in the correct state") {
		t.Errorf("state.sls big again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestStateBigFileUpstreamCuts: the WAN between the relay and the master
// (a udpHop, slowed to 1 MiB/s) goes silent twice during the transfer, each
// time for longer than QUIC's idle timeout, so the relay's link drops and
// comes back. The device's fetch asks again across the outages, keeps what
// it has, and the file arrives whole; the relay fetched each chunk once.
func TestStateBigFileUpstreamCuts(t *testing.T) {
	roots, data := bigFileRoots(t)
	c := newCluster(t, relayAllow+roots)
	c.startMaster()
	hop := udphop.Start(t, fmt.Sprintf("127.0.0.1:%d", c.port))
	rPort := freeUDPPort(t)
	relay := c.startAt("", "r1", fmt.Sprintf("127.0.0.1:%d", hop.Port()), relayConf(rPort))
	c.acceptAll("r1")
	dests := c.devicesWithDest(rPort, "d1")
	c.waitPending(1)
	c.acceptAll("r1", "d1")
	beat := chunkBeats(t, c, "r1")
	hop.SetRate(1 << 20)

	jid := asyncJob(t, c, "d1", "state.sls", "big")
	for cut := 1; cut <= 2; cut++ {
		before := beat().UpBytes
		waitFor(t, 60*time.Second, fmt.Sprintf("chunks moving before cut %d", cut), func() bool {
			return beat().UpBytes > before && beat().UpBytes < bigFileSize
		})
		ended := strings.Count(relay.output(), "upstream link ended")
		up := strings.Count(relay.output(), "upstream link up")
		hop.Cut(true)
		t.Logf("cut %d at %d bytes", cut, beat().UpBytes)
		waitFor(t, 40*time.Second, "r1 to see its upstream link end", func() bool {
			return strings.Count(relay.output(), "upstream link ended") > ended
		})
		hop.Cut(false)
		waitFor(t, 40*time.Second, "r1's upstream link back", func() bool {
			return strings.Count(relay.output(), "upstream link up") > up
		})
	}
	hop.SetRate(0)
	waitFor(t, 120*time.Second, "d1's return of "+jid, func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
		return m["d1"] != nil
	})
	checkFile(t, dests["d1"], data)
	waitFor(t, 20*time.Second, "r1's heartbeat with the whole file", func() bool { return beat().UpBytes >= bigFileSize })
	if hb := beat(); hb.UpBytes != bigFileSize {
		t.Errorf("r1 fetched %d bytes of chunks from the master, want each chunk once: %d (%+v)", hb.UpBytes, bigFileSize, hb)
	}
}

// TestStateBigFileTamperingRelay: a relay that alters every chunk it
// serves (the tampering build, HALITE_TEST_TAMPER=blob_data, a real
// process): the device refuses the chunks, the state fails saying so, and
// the destination is never written.
func TestStateBigFileTamperingRelay(t *testing.T) {
	roots, _ := bigFileRoots(t)
	c := newCluster(t, relayAllow+roots)
	c.startMaster()
	port := freeUDPPort(t)
	c.startTampering("r1", "blob_data", relayConf(port))
	c.acceptAll("r1")
	dests := c.devicesWithDest(port, "d1")
	c.waitPending(1)
	c.acceptAll("r1", "d1")

	r := c.cli("halite", "-t", "60", "d1", "state.sls", "big")
	if r.code == 0 || !strings.Contains(r.stdout, "does not match its hash") {
		t.Errorf("state.sls big through a tampering relay: exit %d, want a failure saying a chunk does not match its hash\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(dests["d1"]); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v): the altered file was written", dests["d1"], err)
	}
}

// TestStateRecurseBigFile: file.recurse of a directory holding a 3 MiB file
// (three times what a job carries inline) and small files, through a
// relay: the small files come inline, the big one by manifest and chunks,
// and every file arrives byte-exact.
func TestStateRecurseBigFile(t *testing.T) {
	big := make([]byte, 3<<20)
	rand.Read(big)
	small := map[string]string{"a.txt": "alpha\n", "sub/b.conf": "beta = 1\n", "sub/deeper/c": "gamma\n"}
	tree := map[string]string{
		"site.sls": "site:\n  file.recurse:\n    - name: {{ grains['dest'] }}\n    - source: salt://site\n",
	}
	for p, s := range small {
		tree["site/"+p] = s
	}
	roots := writeFileRoots(t, tree)
	dir := strings.TrimSpace(roots[strings.LastIndex(roots, "- ")+2:])
	if err := os.WriteFile(filepath.Join(dir, "site", "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, relayAllow+roots)
	port := c.masterAndRelay("r1")
	dest := filepath.Join(c.root, "d1", "site")
	c.startBehind("d1", port, "grains:\n  dest: "+dest+"\n")
	c.waitPending(1)
	c.acceptAll("r1", "d1")

	r := c.cli("halite", "-t", "60", "d1", "state.sls", "site")
	if r.code != 0 || !strings.Contains(r.stdout, "Succeeded: 1") {
		t.Fatalf("state.sls site: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got, err := os.ReadFile(filepath.Join(dest, "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("big.bin: %d bytes (%v), want the %d bytes of salt://site/big.bin", len(got), err, len(big))
	}
	for p, s := range small {
		if got, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(p))); err != nil || string(got) != s {
			t.Errorf("%s: %q (%v), want %q", p, got, err, s)
		}
	}
	r = c.cli("halite", "-t", "60", "d1", "state.sls", "site")
	if r.code != 0 || !strings.Contains(r.stdout, "is in the correct state") {
		t.Errorf("state.sls site again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestStateBigFileFlappingUpstream is issue 18's proof: a 50 MiB file
// (random bytes) applied with file.managed through a relay whose WAN to
// the master (a udpHop, 2 MiB/s) drops every 5 s for the whole transfer:
// 5 s up, then silent until the relay's link ends (master_alive_interval:
// 1 ends it after 2 s of silence), then back. The device's fetch asks
// again across the outages, the file arrives byte-exact (SHA-256
// checked), and the relay fetched each chunk from the master once:
// the chunks fetched before a cut were not fetched again. The bytes
// logged at each cut are the relay's last heartbeat, which comes through
// the relay's own agent session over the same WAN: after a cut they lag
// until that session is back (its reconnect backs off further than the
// link's), so two cuts may log the same figure.
func TestStateBigFileFlappingUpstream(t *testing.T) {
	const size = 50 << 20
	roots, data := bigFileRootsN(t, size)
	c := newCluster(t, relayAllow+roots)
	c.startMaster()
	hop := udphop.Start(t, fmt.Sprintf("127.0.0.1:%d", c.port))
	rPort := freeUDPPort(t)
	relay := c.startAt("", "r1", fmt.Sprintf("127.0.0.1:%d", hop.Port()), relayConf(rPort)+"master_alive_interval: 1\n")
	c.acceptAll("r1")
	dests := c.devicesWithDest(rPort, "d1")
	c.waitPending(1)
	c.acceptAll("r1", "d1")
	beat := chunkBeats(t, c, "r1")
	hop.SetRate(flapRate)

	start := time.Now()
	jid := asyncJob(t, c, "d1", "state.sls", "big")
	// Bounded: at most maxCuts cuts, and it stops once the relay has
	// every chunk.
	const up, maxCuts = 5 * time.Second, 30
	cuts := 0
	var cutAt []int64
	for cuts < maxCuts && !linkUpFor(up, func() bool { return beat().UpBytes >= size }) {
		ended := strings.Count(relay.output(), "upstream link ended")
		ups := strings.Count(relay.output(), "upstream link up")
		hop.Cut(true)
		cuts++
		cutAt = append(cutAt, beat().UpBytes)
		t.Logf("cut %d at %s, %d bytes", cuts, time.Since(start), beat().UpBytes)
		waitFor(t, 20*time.Second, "r1 to see its upstream link end", func() bool {
			return strings.Count(relay.output(), "upstream link ended") > ended
		})
		hop.Cut(false)
		waitFor(t, 20*time.Second, "r1's upstream link back", func() bool {
			return strings.Count(relay.output(), "upstream link up") > ups
		})
	}
	waitFor(t, 60*time.Second, "d1's return of "+jid, func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
		return m["d1"] != nil
	})
	took := time.Since(start)

	got, err := os.ReadFile(dests["d1"])
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("%s: %d bytes (%v), SHA-256 not the %d bytes of salt://big.bin", dests["d1"], len(got), err, size)
	}
	waitFor(t, 20*time.Second, "r1's heartbeat with the whole file", func() bool { return beat().UpBytes >= size })
	hb := beat()
	t.Logf("50 MiB in %s through %d cuts (upstream bytes at each cut: %v); r1 fetched %d bytes from the master (%+v)",
		took.Round(100*time.Millisecond), cuts, cutAt, hb.UpBytes, hb)
	if cuts < 3 {
		t.Errorf("only %d cuts during the transfer: the test did not show a transfer across repeated drops", cuts)
	}
	if hb.UpBytes != size {
		t.Errorf("r1 fetched %d bytes of chunks from the master, want each chunk once: %d", hb.UpBytes, size)
	}
}

// flapRate is the WAN's rate in TestStateBigFileFlappingUpstream: 25 s
// of link for 50 MiB, five cuts or so.
const flapRate = 2 << 20

// linkUpFor lets the link be for d (the 5 s between drops: the test's
// pace, not a wait for a condition), or until done says the transfer is
// over, and returns done's last answer.
func linkUpFor(d time.Duration, done func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if done() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return done()
}
