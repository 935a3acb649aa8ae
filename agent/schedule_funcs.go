package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/schedule"
)

// The schedule on the agent: the schedule: option runs in a
// schedule.Scheduler; each firing runs through the executor like a job
// from the master, under a jid the agent makes, and its return (with
// Salt's "schedule": <job name>) goes into the outbox spool like any
// return, so the master stores it and fires salt/job/<jid>/ret/<id> when
// it has it: a device with no master in reach keeps its schedule and
// delivers later. A masterless agent gives the returns to its return:
// returners. A job's returner: names go to those returners on the agent.

// newSchedule makes the agent's scheduler; a bad job stops the agent at
// start, naming the file and line of the job.
func (a *Agent) newSchedule() (*schedule.Scheduler, error) {
	save := ""
	if a.cfg.ConfigDir != "" {
		save = filepath.Join(a.cfg.ConfigDir, "agent.d", "_schedule.conf")
	}
	at := a.cfg.ScheduleAt
	a.schedAt.Store(&at)
	return schedule.New(schedule.Options{
		Config: a.cfg.Schedule,
		Where: func(name string) string {
			if at := a.schedAt.Load(); at != nil {
				return (*at)[name]
			}
			return ""
		},
		Known:    a.scheduleKnown,
		Returner: checkReturner,
		Run:      a.runScheduled,
		SaveFile: save,
		Log:      a.log.Named("schedule"),
	})
}

// scheduleKnown is the check of a job's function.
func (a *Agent) scheduleKnown(fun string) bool {
	_, ok := a.exec.Doc(fun)
	return ok
}

// runScheduled runs one firing of a scheduled job.
func (a *Agent) runScheduled(ctx context.Context, j *schedule.Job) {
	jid := a.jids.Next()
	if ce := a.log.Check(zap.InfoLevel, "running scheduled job"); ce != nil {
		ce.Write(zap.String("job", j.Name), zap.String("fun", j.Function), zap.String("jid", jid))
	}
	res := a.exec.Run(ctx, exec.Request{JID: jid, Fun: j.Function, Args: j.Args, Kwargs: j.Kwargs, User: "schedule"})
	if ctx.Err() != nil && !res.Success {
		return // stopped with the agent: no return for a cut-short run
	}
	funArgs := append([]any{}, j.Args...)
	if len(j.Kwargs) > 0 {
		funArgs = append(funArgs, j.Kwargs)
	}
	if len(j.Returners) > 0 {
		a.schedRets.deliver(ctx, a, j.Returners, jid, j.Function, funArgs, res)
	}
	if a.masterless() {
		if a.rets != nil {
			a.rets.Return(jid, j.Function, funArgs, res)
		}
		return
	}
	if !j.ReturnJob {
		return
	}
	ret := &protocol.ReturnBody{
		ID: a.cfg.ID, JID: jid, Fun: j.Function, FunArgs: funArgs,
		Return: res.Return, Retcode: res.Retcode, Success: res.Success,
		Stamp: event.Stamp(time.Now()), Schedule: j.Name,
	}
	enc, err := encodeReturn(ret, a.log)
	if err != nil {
		return
	}
	for _, out := range a.outs {
		a.spoolItem(out, protocol.TypeReturn, enc, jid)
	}
}

// encodeReturn encodes a return; one too large for a frame becomes a
// failure saying so (as runJob does for a published job).
func encodeReturn(ret *protocol.ReturnBody, log *zap.Logger) ([]byte, error) {
	enc, err := protocol.Marshal(ret)
	if err == nil && len(enc) <= protocol.DefaultMaxFrame-4096 {
		return enc, nil
	}
	why := ""
	if err != nil {
		why = "return could not be encoded: " + err.Error()
	} else {
		why = fmt.Sprintf("return too large: %d bytes encoded, the limit is %d", len(enc), protocol.DefaultMaxFrame-4096)
	}
	ret.Return = why
	log.Error("scheduled job's return replaced", zap.String("jid", ret.JID), zap.String("why", why))
	ret.Retcode, ret.Success = 1, false
	enc, err = protocol.Marshal(ret)
	if err != nil {
		log.Error("encode return; dropped", zap.String("jid", ret.JID), zap.Error(err))
	}
	return enc, err
}

// schedReturners are the returners named by scheduled jobs' returner:
// option, opened on first use (cachedir/returners/schedule) and kept.
type schedReturners struct {
	mu   sync.Mutex
	open map[string]*Returners
	wg   sync.WaitGroup
}

func (s *schedReturners) deliver(ctx context.Context, a *Agent, names []string, jid, fun string, args []any, res exec.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = make(map[string]*Returners)
	}
	for _, name := range names {
		rs, ok := s.open[name]
		if !ok {
			cfg := *a.cfg
			cfg.Return = []string{name}
			var err error
			if rs, err = OpenReturners(ctx, &cfg, "schedule", a.log); err != nil {
				a.log.Error("scheduled job's returner not opened", zap.String("returner", name), zap.Error(err))
				continue
			}
			s.open[name] = rs
			s.wg.Add(1)
			go func() { defer s.wg.Done(); rs.Run(ctx) }()
		}
		rs.Return(jid, fun, args, res)
	}
}

// close waits for the returners' workers (their ctx ended) and closes them.
func (s *schedReturners) close() {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range s.open {
		rs.Close()
	}
}

// checkReturner refuses a returner the agent does not have.
func checkReturner(name string) error { return returners.Check(name, returners.RoleReturn) }

// scheduleHost returns the running agent's scheduler.
func scheduleHost(host any) (*Agent, *schedule.Scheduler, error) {
	a, ok := host.(*Agent)
	if !ok || a.sched == nil {
		return nil, nil, exec.ErrNoHost
	}
	return a, a.sched, nil
}

// jobName is the name argument: the first positional or name=.
func jobName(req exec.Request) (string, error) {
	if len(req.Args) > 0 {
		return fmt.Sprint(req.Args[0]), nil
	}
	if v, ok := req.Kwargs["name"]; ok {
		return fmt.Sprint(v), nil
	}
	return "", exec.Invalidf("Job name is required.")
}

// jobOptions builds a job's options from schedule.add's kwargs, as Salt's
// build_schedule_item does (job_args, job_kwargs).
func jobOptions(req exec.Request) (map[string]any, error) {
	data := map[string]any{}
	for k, v := range req.Kwargs {
		if strings.HasPrefix(k, "__") || k == "name" || k == "persist" {
			continue
		}
		switch k {
		case "job_args":
			l, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("job_args is not a list. please correct and try again.")
			}
			data["args"] = l
		case "job_kwargs":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("job_kwargs is not a dict. please correct and try again.")
			}
			data["kwargs"] = m
		default:
			data[k] = v
		}
	}
	for _, k := range []string{"seconds", "minutes", "hours", "days"} {
		if _, ok := data[k]; ok {
			if _, cron := data["cron"]; cron {
				return nil, fmt.Errorf(`Unable to use "seconds", "minutes", "hours", or "days" with "when" or "cron" options.`)
			}
		}
	}
	if r, ok := data["returner"]; ok {
		names, _ := r.(string)
		for _, n := range strings.Split(names, ",") {
			if n = strings.TrimSpace(n); n != "" {
				if err := checkReturner(n); err != nil {
					return nil, err
				}
			}
		}
	}
	return data, nil
}

// saveIfPersist saves the schedule after a change unless persist=False
// (Salt persists by default).
func saveIfPersist(s *schedule.Scheduler, req exec.Request) {
	if p, ok := req.Kwargs["persist"]; ok {
		if b, ok := p.(bool); ok && !b {
			return
		}
		if str, ok := p.(string); ok && strings.EqualFold(str, "false") {
			return
		}
	}
	s.Save()
}

func init() {
	exec.Register("schedule.list", `List the jobs in the schedule, as Salt does: YAML under "schedule:".

show_all shows the jobs whose names start with "__"; show_disabled=False
hides the disabled ones; return_yaml=False returns the mapping.

CLI Example:

    halite '*' schedule.list`, func(_ context.Context, host any, req exec.Request) (any, error) {
		_, s, err := scheduleHost(host)
		if err != nil {
			return nil, err
		}
		flag := func(k string, def bool) bool {
			if v, ok := req.Kwargs[k]; ok {
				if b, ok := v.(bool); ok {
					return b
				}
			}
			return def
		}
		list := s.List(flag("show_all", false), flag("show_disabled", true))
		if !flag("return_yaml", true) {
			return list, nil
		}
		return schedule.YAML(list)
	})
	change := func(fun, doc string, do func(s *schedule.Scheduler, name string, req exec.Request) (string, error)) {
		exec.Register(fun, doc, func(_ context.Context, host any, req exec.Request) (any, error) {
			_, s, err := scheduleHost(host)
			if err != nil {
				return nil, err
			}
			name, err := jobName(req)
			if err != nil && fun != "schedule.enable" && fun != "schedule.disable" && fun != "schedule.save" && fun != "schedule.reload" {
				return result(false, "Job name is required."), nil
			}
			comment, err := do(s, name, req)
			if err != nil {
				return result(false, err.Error()), nil
			}
			return result(true, comment), nil
		})
	}
	change("schedule.add", `Add a job to the schedule: a name and Salt's job options as keyword
arguments (function, job_args, job_kwargs, seconds, minutes, hours, days,
cron, splay, range, returner, maxrunning, run_on_start, enabled,
jid_include). A bad option or an unknown function is refused with the reason.

CLI Example:

    halite '*' schedule.add job1 function='test.ping' seconds=3600`,
		func(s *schedule.Scheduler, name string, req exec.Request) (string, error) {
			data, err := jobOptions(req)
			if err != nil {
				return "", err
			}
			if err := s.Add(name, data); err != nil {
				return "", err
			}
			saveIfPersist(s, req)
			return fmt.Sprintf("Added job: %s to schedule.", name), nil
		})
	change("schedule.modify", `Modify a job: its options are replaced by the ones given.

CLI Example:

    halite '*' schedule.modify job1 function='test.ping' seconds=60`,
		func(s *schedule.Scheduler, name string, req exec.Request) (string, error) {
			data, err := jobOptions(req)
			if err != nil {
				return "", err
			}
			if err := s.Modify(name, data); err != nil {
				return "", fmt.Errorf("Job %s does not exist in schedule: %w", name, err)
			}
			saveIfPersist(s, req)
			return fmt.Sprintf("Modified job: %s in schedule.", name), nil
		})
	change("schedule.delete", `Delete a job from the schedule.

CLI Example:

    halite '*' schedule.delete job1`,
		func(s *schedule.Scheduler, name string, req exec.Request) (string, error) {
			if err := s.Delete(name); err != nil {
				return "", fmt.Errorf("Job %s does not exist.", name)
			}
			saveIfPersist(s, req)
			return fmt.Sprintf("Deleted Job %s from schedule.", name), nil
		})
	for _, f := range []struct {
		fun, doc string
		on, one  bool
	}{
		{"schedule.enable", "Enable the schedule.", true, false},
		{"schedule.disable", "Disable the schedule: no job runs until it is enabled.", false, false},
		{"schedule.enable_job", "Enable a job.", true, true},
		{"schedule.disable_job", "Disable a job.", false, true},
	} {
		change(f.fun, f.doc+"\n\nCLI Example:\n\n    halite '*' "+f.fun,
			func(s *schedule.Scheduler, name string, req exec.Request) (string, error) {
				if !f.one {
					name = ""
				}
				if err := s.SetEnabled(name, f.on); err != nil {
					return "", fmt.Errorf("Job %s does not exist.", name)
				}
				saveIfPersist(s, req)
				switch {
				case !f.one && f.on:
					return "Enabled schedule on minion.", nil
				case !f.one:
					return "Disabled schedule on minion.", nil
				case f.on:
					return fmt.Sprintf("Enabled Job %s in schedule.", name), nil
				}
				return fmt.Sprintf("Disabled Job %s in schedule.", name), nil
			})
	}
	change("schedule.run_job", `Run a job of the schedule now, once (force=True runs a disabled one).

CLI Example:

    halite '*' schedule.run_job job1`,
		func(s *schedule.Scheduler, name string, req exec.Request) (string, error) {
			force, _ := req.Kwargs["force"].(bool)
			if err := s.RunJob(name, force); err != nil {
				if strings.Contains(err.Error(), "disabled") {
					return "", fmt.Errorf("Job %s is disabled.", name)
				}
				return "", fmt.Errorf("Job %s does not exist.", name)
			}
			return fmt.Sprintf("Scheduling Job %s on minion.", name), nil
		})
	change("schedule.save", `Save the schedule to CONFIG_DIR/agent.d/_schedule.conf, so that it
survives a restart (Salt's minion.d/_schedule.conf).

CLI Example:

    halite '*' schedule.save`,
		func(s *schedule.Scheduler, _ string, _ exec.Request) (string, error) {
			file, err := s.Save()
			if err != nil {
				return "", fmt.Errorf("Failed to save schedule: %w", err)
			}
			return "Schedule (non-pillar items) saved to " + file + ".", nil
		})
	exec.Register("schedule.reload", `Reload the schedule from the agent's configuration files (the
schedule: option, agent.d/_schedule.conf included). A bad job keeps the
running schedule and is reported.

CLI Example:

    halite '*' schedule.reload`, func(_ context.Context, host any, _ exec.Request) (any, error) {
		a, s, err := scheduleHost(host)
		if err != nil {
			return nil, err
		}
		if err := a.reloadSchedule(s); err != nil {
			return result(false, err.Error()), nil
		}
		return result(true, "Reloaded schedule from the configuration."), nil
	})
	exec.Register("schedule.show_next_fire_time", `Show when a job runs next.

CLI Example:

    halite '*' schedule.show_next_fire_time job1`, func(_ context.Context, host any, req exec.Request) (any, error) {
		_, s, err := scheduleHost(host)
		if err != nil {
			return nil, err
		}
		name, err := jobName(req)
		if err != nil {
			return nil, err
		}
		t, ok := s.NextFire(name)
		if !ok {
			return result(false, "Job "+name+" does not exist."), nil
		}
		if t.IsZero() {
			return result(false, "next fire time not available."), nil
		}
		return map[string]any{"result": true, "next_fire_time": t.Format("2006-01-02T15:04:05")}, nil
	})
}

// reloadSchedule reads the configuration again and replaces the schedule.
func (a *Agent) reloadSchedule(s *schedule.Scheduler) error {
	if a.cfg.ConfigDir == "" {
		return fmt.Errorf("no configuration directory to reload from")
	}
	cfg, err := config.LoadAgent(a.cfg.ConfigDir, nil)
	if err != nil {
		return fmt.Errorf("reload schedule: %w", err)
	}
	a.schedAt.Store(&cfg.ScheduleAt)
	return s.Replace(cfg.Schedule)
}
