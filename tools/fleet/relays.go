package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/relay"
)

// Relays are R real relays (package relay) run in this process, each with
// its own identity (kept under root, so that a restart keeps it and the
// master's accepted key), in front of one master.
type Relays struct {
	Relays []*relay.Relay
	cancel context.CancelFunc
	done   chan error
}

// StartRelays starts n relays, named relay-00.., for the master at
// master, each for up to maxDevices devices and admitting admit devices a
// second (relay: admit; 0: the default); listen, if set, gives their
// addresses (a restart on the same ports), else they take free ports. It
// returns once they all listen.
func StartRelays(root, master string, n, maxDevices, admit int, listen []string) (*Relays, error) {
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	rs := &Relays{cancel: cancel, done: make(chan error, 1)}
	for i := range n {
		id := fmt.Sprintf("relay-%02d", i)
		pki := filepath.Join(root, id, "pki")
		ident, _, err := protocol.LoadOrCreateIdentity(pki, "minion")
		if err != nil {
			cancel()
			return nil, err
		}
		cfg := config.DefaultAgent()
		cfg.ID, cfg.Master, cfg.PkiDir, cfg.RootDir = id, []string{master}, pki, filepath.Join(root, id)
		cfg.CacheDir = filepath.Join(root, id, "cache") // each relay's own spool, not /var/cache
		cfg.Relay = config.DefaultRelay()
		cfg.Relay.MaxDevices = min(max(maxDevices, 1), config.MaxRelayDevices)
		cfg.Relay.Heartbeat = 0
		if admit > 0 {
			cfg.Relay.Admit = admit
		}
		addr := "127.0.0.1:0"
		if i < len(listen) {
			addr = listen[i]
		}
		r, err := relay.New(relay.Options{Config: cfg, Identity: ident, Version: agent.Version, Log: debugLog("FLEETSIM_RELAY_LOG").With(zap.String("relay", id)), Listen: addr})
		if err != nil {
			cancel()
			return nil, err
		}
		rs.Relays = append(rs.Relays, r)
		g.Go(func() error { return r.Run(gctx) })
	}
	go func() { rs.done <- g.Wait() }()
	for _, r := range rs.Relays {
		select {
		case <-r.Ready():
		case err := <-rs.done:
			cancel()
			if err == nil {
				err = errors.New("relays stopped")
			}
			return nil, err
		}
	}
	return rs, nil
}

// Addrs are the relays' listening addresses.
func (rs *Relays) Addrs() []string {
	out := make([]string, len(rs.Relays))
	for i, r := range rs.Relays {
		out[i] = r.Addr().(*net.UDPAddr).String()
	}
	return out
}

// Devices is how many devices the relays serve now (accepted).
func (rs *Relays) Devices() int {
	n := 0
	for _, r := range rs.Relays {
		n += r.Stats().Devices
	}
	return n
}

// Upstream is how many relays have their upstream link up.
func (rs *Relays) Upstream() int {
	n := 0
	for _, r := range rs.Relays {
		if r.Stats().Upstream {
			n++
		}
	}
	return n
}

// Stop stops the relays and waits for them.
func (rs *Relays) Stop() error {
	rs.cancel()
	return <-rs.done
}
