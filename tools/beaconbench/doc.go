// Command beaconbench measures what beacons cost a device: it starts two
// real halite-agent processes (from bin/, masterless, under a temporary
// root_dir), one without beacons and one with five beacons at a 1 s
// interval whose thresholds make every check fire an event (memusage 0%,
// diskusage /: 0%, load with no ranges, service halite-agent, network_info
// lo), lets both
// warm up, then for each measured window reads each one's CPU time
// (utime+stime in /proc/<pid>/stat) and samples its VmRSS every second.
// It prints the CPU used as a percentage of one core and the median RSS of
// each agent, and their difference, against the goals (≤ 1% of a core,
// ≤ 2 MiB more RSS).
//
//	beaconbench [-bin bin] [-warmup 10s] [-window 60s] [-runs 3]
//
// It is part of the benchmark harness (tools/bench.sh, `make bench`).
// Linux only (/proc). Every process it starts is stopped when it returns.
package main
