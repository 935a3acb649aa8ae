// Command schedbench measures what the scheduler costs a device: it starts
// two real halite-agent processes (from bin/, under a temporary root_dir),
// one without a schedule and one with -jobs jobs of test.ping every
// second, both with a master that is away (a closed port: an offline
// site, so every scheduled return goes into the outbox spool on disk), or
// masterless with -masterless. After a warm-up it reads each one's CPU
// time (utime+stime in /proc/<pid>/stat) over each window and prints the
// CPU used as a percentage of one core, and the difference, against the
// goal (≤ 1% of a core for 100 jobs at 1 s).
//
//	schedbench [-bin bin] [-jobs 100] [-warmup 10s] [-window 60s] [-runs 1] [-masterless]
//
// Linux only (/proc). Every process it starts is stopped when it returns.
package main
