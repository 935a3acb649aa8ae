// Package engines runs Salt's engines: long-running plugins started and
// stopped with the daemon (master or agent), each given the event bus (fire
// and listen), a logger, the daemon's grains and configuration and, on the
// agent, its execution modules.
//
// It is shared by master and agent. The core here parses Salt's engines:
// list, keeps the registry of engine modules, runs each configured engine
// in its own goroutine and restarts it with backoff when it fails or
// panics, and holds the engines that need nothing beyond the standard
// library's os/exec: script (a command whose JSON lines become events) and
// executable user engines speaking JSON lines on stdin/stdout. Engines that
// need net/http or message-bus clients live in subpackages
// (engines/httpengine, engines/forward), the sandboxed Starlark engines in
// engines/starlark, and the master-only stalekey engine in package master,
// so that the default agent binary links none of them.
package engines
