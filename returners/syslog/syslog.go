// Package syslog is the syslog returner: each return as one JSON message to
// the local syslog daemon (or syslog.address). It registers itself as
// "syslog".
//
// Options, as Salt's syslog_return: syslog.level (LOG_INFO),
// syslog.facility (LOG_USER), syslog.tag (salt-minion); and Halite's
// syslog.network and syslog.address for a remote daemon ("udp",
// "host:514").
package syslog

import (
	"context"
	"fmt"
	"log/syslog"
	"strings"
	"sync"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("syslog", returners.Caps{Event: true}, New)
}

var levels = map[string]syslog.Priority{
	"LOG_EMERG": syslog.LOG_EMERG, "LOG_ALERT": syslog.LOG_ALERT, "LOG_CRIT": syslog.LOG_CRIT,
	"LOG_ERR": syslog.LOG_ERR, "LOG_WARNING": syslog.LOG_WARNING, "LOG_NOTICE": syslog.LOG_NOTICE,
	"LOG_INFO": syslog.LOG_INFO, "LOG_DEBUG": syslog.LOG_DEBUG,
}

var facilities = map[string]syslog.Priority{
	"LOG_KERN": syslog.LOG_KERN, "LOG_USER": syslog.LOG_USER, "LOG_MAIL": syslog.LOG_MAIL,
	"LOG_DAEMON": syslog.LOG_DAEMON, "LOG_AUTH": syslog.LOG_AUTH, "LOG_SYSLOG": syslog.LOG_SYSLOG,
	"LOG_LOCAL0": syslog.LOG_LOCAL0, "LOG_LOCAL1": syslog.LOG_LOCAL1, "LOG_LOCAL2": syslog.LOG_LOCAL2,
	"LOG_LOCAL3": syslog.LOG_LOCAL3, "LOG_LOCAL4": syslog.LOG_LOCAL4, "LOG_LOCAL5": syslog.LOG_LOCAL5,
	"LOG_LOCAL6": syslog.LOG_LOCAL6, "LOG_LOCAL7": syslog.LOG_LOCAL7,
}

// Returner writes to syslog, connecting at first use and again after an
// error.
type Returner struct {
	network, addr, tag string
	prio               syslog.Priority

	mu sync.Mutex
	w  *syslog.Writer
}

// New reads the options; a level or facility Salt does not name is an
// error.
func New(_ context.Context, cfg returners.Config) (returners.Returner, error) {
	o := cfg.Options("syslog")
	lv, ok := levels[strings.ToUpper(o.String("level", "LOG_INFO"))]
	if !ok {
		return nil, fmt.Errorf("syslog.level %q is not a syslog level (LOG_INFO, LOG_ERR ...)", o.String("level", ""))
	}
	fa, ok := facilities[strings.ToUpper(o.String("facility", "LOG_USER"))]
	if !ok {
		return nil, fmt.Errorf("syslog.facility %q is not a syslog facility (LOG_USER, LOG_LOCAL0 ...)", o.String("facility", ""))
	}
	return &Returner{network: o.String("network", ""), addr: o.String("address", ""),
		tag: o.String("tag", "salt-minion"), prio: lv | fa}, nil
}

// Close closes the connection.
func (r *Returner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		return r.w.Close()
	}
	return nil
}

func (r *Returner) send(msg []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		w, err := syslog.Dial(r.network, r.addr, r.prio, r.tag)
		if err != nil {
			return fmt.Errorf("syslog: %w", err)
		}
		r.w = w
	}
	if _, err := r.w.Write(msg); err != nil {
		r.w.Close()
		r.w = nil
		return fmt.Errorf("syslog: %w", err)
	}
	return nil
}

// Returner logs the return dict as JSON.
func (r *Returner) Returner(_ context.Context, ret map[string]any) error {
	b, err := returners.MarshalJSON(ret)
	if err != nil {
		return err
	}
	return r.send(b)
}

// EventReturn logs each event as JSON.
func (r *Returner) EventReturn(_ context.Context, events []returners.Event) error {
	for _, ev := range events {
		b, err := returners.MarshalJSON(ev)
		if err != nil {
			return err
		}
		if err := r.send(b); err != nil {
			return err
		}
	}
	return nil
}
