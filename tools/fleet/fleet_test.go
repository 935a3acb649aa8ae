package fleet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// PreAccept derives the public keys without making certificates: they
// must be the keys the devices then present.
func TestPreAcceptMatchesIdentity(t *testing.T) {
	dir := t.TempDir()
	opts := Options{N: 3, Seed: "s", Prefix: "p-"}
	if err := PreAccept(dir, opts); err != nil {
		t.Fatal(err)
	}
	for i := range opts.N {
		name := agentID(opts, i)
		id, err := identity(opts, name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "minions", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(protocol.EncodePublicKey(id.Pub)) {
			t.Fatalf("%s: pre-accepted key is not the key the device presents", name)
		}
	}
}

// A ramped fleet with pre-accepted keys, against a real master over real
// QUIC: every device connects (keys made at the first dial, started by
// the ramp goroutine), and two rounds of test.ping get every return (the
// second decoded and verified from the frame cache).
func TestRampedFleetAnswersPing(t *testing.T) {
	root := t.TempDir()
	const n = 40
	opts := Options{N: n, Seed: "t", Ramp: 200, PerSocket: 16}
	if err := PreAccept(filepath.Join(root, "pki"), opts); err != nil {
		t.Fatal(err)
	}
	m, err := StartMaster(root, func(c *config.Master) { c.AutoAccept = false })
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	opts.MasterFP = m.Fingerprint()
	f, err := Start(m.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := len(f.transports); got != (n+15)/16 {
		t.Fatalf("%d UDP sockets for %d devices at 16 a socket", got, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := f.WaitConnected(ctx, n); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		c, err := api.Dial(ctx, m.Config.SocketPath(), &api.Request{Op: api.OpPublish, Tgt: "sim-*", Fun: "test.ping", Timeout: 30})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for {
			r, err := c.Next()
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind == api.KindError {
				t.Fatal(r.Error)
			}
			if r.Kind == api.KindReturn {
				id, _ := r.Data["id"].(string)
				if r.Data["return"] != true {
					t.Fatalf("round %d: %s returned %v", round, id, r.Data["return"])
				}
				got[id] = true
			}
			if r.Done {
				if len(r.Missing) > 0 {
					t.Fatalf("round %d: missing %v", round, r.Missing)
				}
				break
			}
		}
		c.Close()
		if len(got) != n {
			t.Fatalf("round %d: %d of %d returned", round, len(got), n)
		}
	}
	if j := f.Jobs(); j != 2*n {
		t.Fatalf("the fleet answered %d jobs, want %d", j, 2*n)
	}
}
