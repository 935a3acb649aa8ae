package beacons

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// service (Salt's service beacon): the running state of named services.
// A service runs when a process of that name (comm or argv[0] base name)
// exists, or, with pidfile, when the process the file names is alive.
// Fires {<name>: {running: bool}, service_name: <name>} tagged with the
// service name; per service, onchangeonly (default False) fires only when
// the state changes, emitatstartup (default True) fires the first state,
// and uncleanshutdown names a pid file whose presence while the service
// is down is reported as uncleanshutdown: True.
//
//	beacons:
//	  service:
//	    - services:
//	        nginx:
//	          onchangeonly: True
//	        camd:
//	          pidfile: /run/camd.pid
func init() {
	register("service", func(o *opts, e *env) (Beacon, error) {
		svcs, err := o.mapping("services", true)
		if err != nil {
			return nil, err
		}
		if len(svcs) == 0 {
			return nil, fmt.Errorf("option services: no services given")
		}
		b := &serviceBeacon{env: e, last: map[string]bool{}}
		for name, v := range svcs {
			s := serviceConf{name: name, emitAtStartup: true}
			if v != nil {
				m, err := toMap(v)
				if err != nil {
					return nil, fmt.Errorf("option services: %s: %w", name, err)
				}
				so := newOpts(m)
				if s.onChangeOnly, err = so.boolean("onchangeonly", false); err == nil {
					if s.emitAtStartup, err = so.boolean("emitatstartup", true); err == nil {
						if s.pidfile, err = so.str("pidfile", false); err == nil {
							if s.unclean, err = so.str("uncleanshutdown", false); err == nil {
								_, _ = so.take("delay") // Salt's delay: accepted, not used
								err = so.done()
							}
						}
					}
				}
				if err != nil {
					return nil, fmt.Errorf("option services: %s: %w", name, err)
				}
			}
			b.svcs = append(b.svcs, s)
		}
		sort.Slice(b.svcs, func(i, j int) bool { return b.svcs[i].name < b.svcs[j].name })
		return b, nil
	})
	// ps (Salt's ps beacon): for each process expected "running" that runs,
	// fires {<name>: Running}; for each expected "stopped" that does not,
	// fires {<name>: Stopped}.
	//
	//	beacons:
	//	  ps:
	//	    - processes:
	//	        camd: running
	//	        telnetd: stopped
	register("ps", func(o *opts, e *env) (Beacon, error) {
		procs, err := o.mapping("processes", true)
		if err != nil {
			return nil, err
		}
		want := map[string]bool{}
		for name, v := range procs {
			switch s, _ := v.(string); s {
			case "running":
				want[name] = true
			case "stopped":
				want[name] = false
			default:
				return nil, fmt.Errorf("option processes: %s: expected running or stopped, got %v", name, v)
			}
		}
		names := make([]string, 0, len(want))
		for n := range want {
			names = append(names, n)
		}
		sort.Strings(names)
		var buf []byte
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			running, err := procRunning(e, names, &buf)
			if err != nil {
				return nil, err
			}
			var out []map[string]any
			for _, n := range names {
				up := running[n]
				switch {
				case want[n] && up:
					out = append(out, map[string]any{n: "Running"})
				case !want[n] && !up:
					out = append(out, map[string]any{n: "Stopped"})
				}
			}
			return out, nil
		}), nil
	})
}

type serviceConf struct {
	name                        string
	onChangeOnly, emitAtStartup bool
	pidfile, unclean            string
}

type serviceBeacon struct {
	env  *env
	svcs []serviceConf
	buf  []byte
	last map[string]bool // only touched by Check, which the Manager serialises
	seen bool
}

func (b *serviceBeacon) Check(context.Context) ([]map[string]any, error) {
	var running map[string]bool
	var out []map[string]any
	for _, s := range b.svcs {
		var up bool
		if s.pidfile != "" {
			up = pidAlive(s.pidfile)
		} else {
			if running == nil {
				names := make([]string, 0, len(b.svcs))
				for _, s := range b.svcs {
					names = append(names, s.name)
				}
				var err error
				if running, err = procRunning(b.env, names, &b.buf); err != nil {
					return nil, err
				}
			}
			up = running[s.name]
		}
		prev, had := b.last[s.name]
		b.last[s.name] = up
		switch {
		case !b.seen && !s.emitAtStartup:
			continue
		case s.onChangeOnly && had && prev == up:
			continue
		}
		ev := map[string]any{s.name: map[string]any{"running": up}, "service_name": s.name, "tag": s.name}
		if !up && s.unclean != "" {
			if _, err := os.Stat(s.unclean); err == nil {
				ev[s.name].(map[string]any)["uncleanshutdown"] = true
			}
		}
		out = append(out, ev)
	}
	b.seen = true
	return out, nil
}

// pidAlive reports whether the pid in file names a live process.
func pidAlive(file string) bool {
	b, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
