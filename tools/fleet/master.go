package fleet

import (
	"context"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master"
)

// Master is a master run in this process for a benchmark, under root,
// listening on a free loopback port with auto_accept on and no limit on
// new keys per address.
type Master struct {
	*master.Master
	Config *config.Master
	cancel context.CancelFunc
	done   chan error
}

// StartMaster starts a master under root; setup may change its
// configuration first. It returns once the master listens.
func StartMaster(root string, setup func(*config.Master)) (*Master, error) {
	cfg := config.DefaultMaster()
	cfg.RootDir, cfg.Interface, cfg.Port, cfg.AutoAccept, cfg.Timeout = root, "127.0.0.1", 0, true, 60
	cfg.PkiDir = filepath.Join(root, "pki")
	cfg.CacheDir = filepath.Join(root, "cache")
	cfg.SockDir = filepath.Join(root, "sock")
	// Every simulated agent comes from 127.0.0.1: no limit on new keys
	// per address.
	cfg.NewKeysPerAddress = 0
	if setup != nil {
		setup(cfg)
	}
	m, err := master.New(cfg, debugLog("FLEETSIM_MASTER_LOG"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	bm := &Master{Master: m, Config: cfg, cancel: cancel, done: make(chan error, 1)}
	go func() { bm.done <- m.Run(ctx) }()
	select {
	case <-m.Ready():
		return bm, nil
	case err := <-bm.done:
		cancel()
		return nil, err
	}
}

// Stop stops the master and waits for it.
func (m *Master) Stop() error {
	m.cancel()
	return <-m.done
}

// debugLog is a logger to standard error at the level the environment
// variable env names (debug, info, warn, error), for finding out what a
// simulation does; none if it is not set.
func debugLog(env string) *zap.Logger {
	lvl, err := zapcore.ParseLevel(os.Getenv(env))
	if os.Getenv(env) == "" || err != nil {
		return zap.NewNop()
	}
	c := zap.NewDevelopmentConfig()
	c.Level = zap.NewAtomicLevelAt(lvl)
	l, err := c.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}
