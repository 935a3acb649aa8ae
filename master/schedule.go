package master

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/schedule"
)

// The master's schedule: the schedule: option of the master file (Salt's
// master schedule, salt/utils/schedule.py with __role master) runs runner
// functions (manage.up, jobs.list_jobs, ...) in a schedule.Scheduler, the
// agent's. Each firing runs as a CLI's runner call does, as user
// "Schedule": salt/run/<jid>/new, the runner, salt/run/<jid>/ret; and, as
// Salt's handle_func does with return_job left on, a __schedule_return
// event with the return's load (cmd _return, id, fun, fun_args, jid,
// schedule, return, success, retcode). A job whose function is no runner,
// or otherwise bad, stops the master at start, naming its file and line.

// ScheduleUser is the user of the runner calls the master's schedule makes.
const ScheduleUser = "Schedule"

// ScheduleReturnTag is the tag of the event Salt fires for each firing's
// return (salt/utils/schedule.py handle_func, fire_event(load,
// "__schedule_return")).
const ScheduleReturnTag = "__schedule_return"

// newSchedule makes the master's scheduler from its schedule: option.
func (m *Master) newSchedule() (*schedule.Scheduler, error) {
	at := m.cfg.ScheduleAt
	m.schedAt.Store(&at)
	s, err := schedule.New(schedule.Options{
		Config: m.cfg.Schedule,
		Where:  func(name string) string { return (*m.schedAt.Load())[name] },
		Known: func(fun string) bool {
			_, ok := m.runners()[fun]
			return ok
		},
		Returner: func(string) error { return fmt.Errorf("returner: is not supported in the master's schedule") },
		Run:      m.runScheduled,
		Log:      m.log.Named("schedule"),
	})
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	return s, nil
}

// runScheduled runs one firing of a scheduled runner.
func (m *Master) runScheduled(ctx context.Context, j *schedule.Job) {
	fn, ok := m.runners()[j.Function]
	if !ok { // checked at start; the runner tables do not change
		m.log.Error("scheduled runner is not available", zap.String("job", j.Name), zap.String("fun", j.Function))
		return
	}
	jid := m.jids.Next()
	if ce := m.log.Check(zap.DebugLevel, "running scheduled runner"); ce != nil {
		ce.Write(zap.String("job", j.Name), zap.String("fun", j.Function), zap.String("jid", jid))
	}
	req := &api.Request{Op: api.OpRunner, Fun: j.Function, Arg: j.Args, Kwarg: j.Kwargs, User: ScheduleUser}
	m.bus.Publish("salt/run/"+jid+"/new", callEvent("run", j.Function, jid, ScheduleUser, j.Args, j.Kwargs))
	res, err := safeCall(ctx, req, fn)
	if err != nil {
		m.log.Warn("scheduled runner failed", zap.String("job", j.Name), zap.String("fun", j.Function), zap.Error(err))
	}
	m.bus.Publish("salt/run/"+jid+"/ret", callRetEvent("run", j.Function, jid, ScheduleUser, j.Args, j.Kwargs, res, err))
	if !j.ReturnJob {
		return
	}
	funArgs := append([]any{}, j.Args...)
	if len(j.Kwargs) > 0 {
		funArgs = append(funArgs, j.Kwargs)
	}
	load := map[string]any{
		"cmd": "_return", "id": m.name, "fun": j.Function, "fun_args": funArgs, "jid": jid,
		"schedule": j.Name, "return": res, "success": err == nil, "retcode": 0,
	}
	if err != nil {
		load["return"], load["retcode"] = err.Error(), 1
	}
	m.bus.Publish(ScheduleReturnTag, load)
}
