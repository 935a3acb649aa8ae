// Command procbench measures Halite as an operator meets it: real
// processes on loopback. It starts the halite-master and N halite-agent
// binaries that `make build` put in bin/, under a temporary root_dir, with
// auto_accept on, and waits until manage.up lists every agent. Then it
// times the real CLI, `halite -c DIR '*' test.ping`, from start to exit
// (warm-up runs first, then measured runs: p50, p90, min, max), lets the
// fleet sit idle and reads VmRSS from /proc/<pid>/status of every agent
// (median, max) and of the master.
//
//	procbench [-bin bin] [-n 100] [-runs 20] [-warmup 1] [-idle 10s] [-timeout 5m]
//	procbench -reactor 1000 [-fire 16] -n 10 -runs 5
//
// With -reactor E it measures the reactor as a user drives it instead
// (reactor.go): E events fired through the master's local socket, each
// driving local.test.ping on one agent, reactions per second until the
// last return, and every return looked up in the job cache afterwards.
//
// The daemons inherit procbench's environment: HALITE_CPUPROFILE=FILE
// makes the master write a CPU profile of the whole run to FILE when
// procbench stops it (`go tool pprof -top FILE`: the profile carries its
// function names, a stripped binary will do). The agents have no such
// switch (the profiler would grow the device binary): `perf record -g` on
// an unstripped build reads them.
//
// It is part of the benchmark harness (tools/bench.sh, `make bench`) and
// prints Markdown tables for docs/BENCHMARKS.md. Every process it starts is
// stopped when it exits, on error and on Ctrl-C too, and every wait has a
// deadline. Linux only: it reads /proc.
package main
