// Package retroute is the master's returner routing (Salt's returners on
// the master): it decides where each job's returns and each event go, and
// delivers them through a durable queue and a worker per returner
// (package returners/queue, returners.Worker).
//
// It sits under master/, between the session side and the returner
// backends: the master's publisher tells it each job's load (JobPublished:
// --return, --return_config, --return_kwargs, the external job cache), the
// return path each stored return (Returned), and it reads the master's
// event bus for event_return. The master builds one Router with New, from
// its options, bus, job cache and logger, and runs it with Run, which
// returns once every worker it started has exited.
//
// The returner backends the master offers are linked here, each
// registering itself with package returners.
package retroute
