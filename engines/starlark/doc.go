// Package starlark runs user engines written in Starlark (go.starlark.net),
// a small Python dialect, in-process and sandboxed: a script has no file
// system, no processes, no load() and no clock or network but through the
// API it is given (event, log, grains, config, sleep, http, call, json,
// time). The master links it; an agent only when built with -tags
// starlark (about 1 MiB on armv7, see docs/BENCHMARKS.md).
//
// An engine file NAME.star defines any of:
//
//	def init():              called once, before anything else
//	def on_event(tag, data): called for each event whose tag matches EVENTS
//	def on_tick():           called every INTERVAL seconds
//	def start():             a Salt-style loop (event.get, sleep), when the
//	                         script has neither on_event nor on_tick
//
// with the optional globals EVENTS (a list of tag globs, default ["*"]) and
// INTERVAL (seconds, default 10). Everything runs in one goroutine, one
// call at a time, so the script's globals are its state: a dict or list
// defined at top level can be changed by every callback.
//
// API:
//
//	opts                         the engine's options (a dict)
//	event.fire(tag, data)        an event on the daemon's own bus
//	event.send(tag, data)        an event to the master (an agent's goes through its spool)
//	event.get(timeout=None)      start(): the next matching event as {"tag", "data"}, or None
//	log.debug/info/warning/error(msg)
//	grains.get(key, default=None)  a grain ("a:b" for nested), grains.items()
//	config.get(key, default=None)  an engine option, else a daemon option
//	sleep(seconds)               interrupted when the engine stops
//	http.get(url, headers={}, timeout=10, check=True)
//	http.post(url, body=None, json=None, headers={}, timeout=10, check=True)
//	                             -> {"status": int, "body": str}; http and https only;
//	                             check=False: a network error is {"status": 0, "error": str}
//	                             instead of failing the engine
//	call(fun, *args, **kwargs)   an execution function on an agent; a runner on the master
//	json.encode/decode, time.now() and friends (go.starlark.net/lib)
package starlark
