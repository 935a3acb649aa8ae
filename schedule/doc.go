// Package schedule runs Salt's scheduler: the schedule: option of the agent
// (Salt's minion schedule, salt/utils/schedule.py), and of the master, jobs that call an
// execution function every interval or on a cron expression, with Salt's
// splay, range, maxrunning, run_on_start and enabled.
//
// It sits between the agent's configuration and its executor: the agent
// gives the Scheduler a Run function that runs one job through the
// executor and puts its return in the outbox spool, as for a job from the
// master, so that a device with no master in reach (an offline site) keeps
// its schedule and its returns reach the master when it is back. The
// schedule.* execution functions change the running schedule; Save writes
// it to CONFIG_DIR/agent.d/_schedule.conf as Salt writes
// minion.d/_schedule.conf. The cron parser is this package's own (a few
// hundred bytes of code), to keep the 32-bit agent small.
//
// The master runs its own schedule: of runner functions with the same
// package (master/schedule.go); it lives outside agent/ because the agent
// and the master never import each other.
package schedule
