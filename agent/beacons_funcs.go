package agent

import (
	"context"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/beacons"
	"github.com/halite-fleet/halite/agent/exec"
)

// Beacons on the agent: the beacons: option runs in a beacons.Manager
// (agent/beacons); its events go to the agent's own bus and, when the agent
// has a master, into the outbox spool, so that events made while the master
// is away reach it when it is back. The beacons.* execution functions
// change the running beacons.

// newBeacons makes the agent's beacon manager; bad options are an error
// naming the beacon and the option, which stops the agent at start.
func (a *Agent) newBeacons() (*beacons.Manager, error) {
	save := ""
	if a.cfg.ConfigDir != "" {
		save = filepath.Join(a.cfg.ConfigDir, "agent.d", "beacons.conf")
	}
	return beacons.New(beacons.Options{
		ID:           a.cfg.ID,
		Config:       a.cfg.Beacons,
		Fire:         a.fireBeacon,
		StateRunning: func() bool { return a.exec.Busy("state.") },
		SaveFile:     save,
		Log:          a.log.Named("beacons"),
	})
}

// fireBeacon publishes a beacon event: on the local bus only when
// masterless, else on the local bus and to the master through the spool.
func (a *Agent) fireBeacon(tag string, data map[string]any) {
	if a.masterless() {
		a.bus.Publish(tag, data)
		return
	}
	if err := a.SendEvent(tag, data); err != nil {
		a.log.Warn("beacon event not queued for the master", zap.String("tag", tag), zap.Error(err))
	}
}

// beaconHost returns the running agent's beacon manager.
func beaconHost(host any) (*beacons.Manager, error) {
	a, ok := host.(*Agent)
	if !ok || a.beacons == nil {
		return nil, exec.ErrNoHost
	}
	return a.beacons, nil
}

// nameArg returns the first positional argument or kwarg name.
func nameArg(req exec.Request, required bool) (string, error) {
	if len(req.Args) > 0 {
		return fmt.Sprint(req.Args[0]), nil
	}
	if v, ok := req.Kwargs["name"]; ok {
		return fmt.Sprint(v), nil
	}
	if required {
		return "", exec.Invalidf("a beacon name is required")
	}
	return "", nil
}

// dataArg returns the beacon configuration: the second positional argument
// or the beacon_data kwarg.
func dataArg(req exec.Request) (any, error) {
	if len(req.Args) > 1 {
		return req.Args[1], nil
	}
	if v, ok := req.Kwargs["beacon_data"]; ok {
		return v, nil
	}
	return nil, exec.Invalidf("beacon_data is required, e.g. \"[{'percent': '80%%'}, {'interval': 10}]\"")
}

// configure is beacons.add and beacons.modify: a beacon's name and its
// configuration, applied with change; done says what was done.
func configure(change func(m *beacons.Manager, name string, cfg any) error, done string) func(context.Context, any, exec.Request) (any, error) {
	return func(_ context.Context, host any, req exec.Request) (any, error) {
		m, err := beaconHost(host)
		if err != nil {
			return nil, err
		}
		name, err := nameArg(req, true)
		if err != nil {
			return nil, err
		}
		data, err := dataArg(req)
		if err != nil {
			return nil, err
		}
		if err := change(m, name, data); err != nil {
			return result(false, err.Error()), nil
		}
		return result(true, fmt.Sprintf("%s beacon: %s.", done, name)), nil
	}
}

func result(ok bool, comment string) map[string]any {
	return map[string]any{"result": ok, "comment": comment}
}

func init() {
	exec.Register("beacons.list", `List the beacons configured on the agent, as the beacons: option.

CLI Example:

    halite '*' beacons.list`, func(_ context.Context, host any, _ exec.Request) (any, error) {
		m, err := beaconHost(host)
		if err != nil {
			return nil, err
		}
		return m.List(), nil
	})
	exec.Register("beacons.list_available", `List the beacon modules this agent has.

CLI Example:

    halite '*' beacons.list_available`, func(context.Context, any, exec.Request) (any, error) {
		out := []any{}
		for _, n := range beacons.Modules() {
			out = append(out, n)
		}
		return out, nil
	})
	exec.Register("beacons.add", `Add a beacon: name and its configuration (Salt's list of one-key
dicts). Bad options are refused, naming the option.

CLI Example:

    halite '*' beacons.add memusage "[{'percent': '80%'}, {'interval': 10}]"`,
		configure((*beacons.Manager).Add, "Added"))
	exec.Register("beacons.modify", `Replace a beacon's configuration.

CLI Example:

    halite '*' beacons.modify memusage "[{'percent': '90%'}]"`,
		configure((*beacons.Manager).Modify, "Modified"))
	exec.Register("beacons.delete", `Delete a beacon.

CLI Example:

    halite '*' beacons.delete memusage`,
		func(_ context.Context, host any, req exec.Request) (any, error) {
			m, err := beaconHost(host)
			if err != nil {
				return nil, err
			}
			name, err := nameArg(req, true)
			if err != nil {
				return nil, err
			}
			if err := m.Delete(name); err != nil {
				return result(false, err.Error()), nil
			}
			return result(true, fmt.Sprintf("Deleted beacon: %s.", name)), nil
		})
	for _, f := range []struct {
		fun, doc string
		on, one  bool
	}{
		{"beacons.enable", "Enable every beacon.", true, false},
		{"beacons.disable", "Disable every beacon.", false, false},
		{"beacons.enable_beacon", "Enable one beacon.", true, true},
		{"beacons.disable_beacon", "Disable one beacon.", false, true},
	} {
		exec.Register(f.fun, f.doc+"\n\nCLI Example:\n\n    halite '*' "+f.fun, func(_ context.Context, host any, req exec.Request) (any, error) {
			m, err := beaconHost(host)
			if err != nil {
				return nil, err
			}
			name := ""
			if f.one {
				if name, err = nameArg(req, true); err != nil {
					return nil, err
				}
			}
			if err := m.SetEnabled(name, f.on); err != nil {
				return result(false, err.Error()), nil
			}
			what := "Beacons"
			if name != "" {
				what = "Beacon " + name
			}
			state := "disabled"
			if f.on {
				state = "enabled"
			}
			return result(true, fmt.Sprintf("%s %s.", what, state)), nil
		})
	}
	exec.Register("beacons.save", `Save the running beacons to CONFIG_DIR/agent.d/beacons.conf, so they
survive a restart.

CLI Example:

    halite '*' beacons.save`, func(_ context.Context, host any, _ exec.Request) (any, error) {
		m, err := beaconHost(host)
		if err != nil {
			return nil, err
		}
		file, err := m.Save()
		if err != nil {
			return result(false, err.Error()), nil
		}
		return result(true, "Beacons saved to "+file+"."), nil
	})
}
