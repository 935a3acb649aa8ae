package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procWatch samples the processes of a measurement (the simulator, the
// relays', the master's) for the progress lines and for the report of a
// run that could not finish: what saturated, CPU per process, memory,
// descriptors, UDP drops.
type procWatch struct {
	mu    sync.Mutex
	names []string // in the order printed
	pids  map[string]int
	t0    time.Time
	cpu0  map[string]time.Duration // at since
	since map[string]time.Time     // when the process was added
	lastT time.Time
	last  map[string]time.Duration // at lastT
	udp0  map[string]int64
}

// watcher, if set, adds its sample to waitConnected's and waitBack's
// progress lines.
var watcher *procWatch

func newProcWatch() *procWatch {
	w := &procWatch{pids: map[string]int{}, cpu0: map[string]time.Duration{}, since: map[string]time.Time{}, last: map[string]time.Duration{}}
	w.t0, w.lastT, w.udp0 = time.Now(), time.Now(), udpCounters()
	w.add("sim", os.Getpid())
	return w
}

// add watches process pid as name; after a restart, the new process
// (whose whole-run CPU then counts from its start).
func (w *procWatch) add(name string, pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pids[name]; !ok {
		w.names = append(w.names, name)
	}
	w.pids[name] = pid
	c := cpuTime(pid)
	w.cpu0[name], w.last[name], w.since[name] = c, c, time.Now()
}

// rss is every watched process's VmRSS now, MiB.
func (w *procWatch) rss() map[string]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]float64{}
	for name, pid := range w.pids {
		out[name] = float64(rssKiB(pid)) / 1024
	}
	return out
}

// saturation is a sample: per process, the CPU it used (cores, over the
// last interval and over the whole run), its VmRSS and open descriptors;
// the machine's UDP errors since the start and its load average.
type saturation struct {
	ElapsedS  float64            `json:"elapsed_s"`
	CoresLast map[string]float64 `json:"cores_last"`
	CoresRun  map[string]float64 `json:"cores_run"`
	RSSMiB    map[string]float64 `json:"rss_mib"`
	FDs       map[string]int     `json:"fds"`
	Threads   map[string]int     `json:"threads"`
	// The simulator's goroutines.
	SimGoroutines int `json:"sim_goroutines"`
	// UDP counters of the machine (/proc/net/snmp) since the start:
	// datagrams dropped for a full receive buffer, other receive errors,
	// sends failed for a full send buffer.
	UDPRcvbufErrors int64   `json:"udp_rcvbuf_errors"`
	UDPInErrors     int64   `json:"udp_in_errors"`
	UDPSndbufErrors int64   `json:"udp_sndbuf_errors"`
	Load1           float64 `json:"load_avg_1m"`
	NoFile          string  `json:"ulimit_nofile"`
}

// sample reads every watched process now and starts the next interval.
func (w *procWatch) sample() saturation {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	s := saturation{ElapsedS: now.Sub(w.t0).Seconds(), CoresLast: map[string]float64{}, CoresRun: map[string]float64{},
		RSSMiB: map[string]float64{}, FDs: map[string]int{}, Threads: map[string]int{}, SimGoroutines: runtime.NumGoroutine()}
	dt := now.Sub(w.lastT).Seconds()
	for _, name := range w.names {
		run := now.Sub(w.since[name]).Seconds()
		pid := w.pids[name]
		c := cpuTime(pid)
		if dt > 0 {
			s.CoresLast[name] = round2((c - w.last[name]).Seconds() / dt)
		}
		if run > 0 {
			s.CoresRun[name] = round2((c - w.cpu0[name]).Seconds() / run)
		}
		w.last[name] = c
		s.RSSMiB[name] = round2(float64(rssKiB(pid)) / 1024)
		s.FDs[name] = countFDs(pid)
		s.Threads[name] = procStatus(pid, "Threads:")
	}
	w.lastT = now
	u := udpCounters()
	s.UDPRcvbufErrors = u["RcvbufErrors"] - w.udp0["RcvbufErrors"]
	s.UDPInErrors = u["InErrors"] - w.udp0["InErrors"]
	s.UDPSndbufErrors = u["SndbufErrors"] - w.udp0["SndbufErrors"]
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			s.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	s.NoFile = noFile()
	return s
}

// String is the sample as a progress line.
func (s saturation) String() string {
	var b strings.Builder
	names := make([]string, 0, len(s.CoresLast))
	for n := range s.CoresLast {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString("\n  cores (last, run):")
	for _, n := range names {
		fmt.Fprintf(&b, " %s %.2f/%.2f", n, s.CoresLast[n], s.CoresRun[n])
	}
	b.WriteString("; RSS MiB:")
	for _, n := range names {
		fmt.Fprintf(&b, " %s %.0f", n, s.RSSMiB[n])
	}
	b.WriteString("; fds:")
	for _, n := range names {
		fmt.Fprintf(&b, " %s %d", n, s.FDs[n])
	}
	fmt.Fprintf(&b, "; sim goroutines %d; UDP rcvbuf/in/sndbuf errors %d/%d/%d; load %.1f",
		s.SimGoroutines, s.UDPRcvbufErrors, s.UDPInErrors, s.UDPSndbufErrors, s.Load1)
	return b.String()
}

// verdict names what most likely saturated: the machine's CPU (the
// processes' cores add up to about all of them, or the load average is
// above the cores), a descriptor limit, UDP buffers, or none seen.
func (s saturation) verdict() string {
	var why []string
	total := 0.0
	busiest, bc := "", 0.0
	for n, c := range s.CoresLast {
		total += c
		if c > bc {
			busiest, bc = n, c
		}
	}
	cpus := float64(runtime.NumCPU())
	if total >= 0.8*cpus {
		why = append(why, fmt.Sprintf("CPU: the three processes used %.2f of %d cores (most: %s, %.2f)", total, int(cpus), busiest, bc))
	} else if s.Load1 > cpus {
		why = append(why, fmt.Sprintf("CPU: load average %.1f on %d cores (the processes got %.2f cores; %s the most, %.2f)", s.Load1, int(cpus), total, busiest, bc))
	}
	if lim, err := strconv.Atoi(s.NoFile); err == nil {
		for n, fds := range s.FDs {
			if fds > lim*9/10 {
				why = append(why, fmt.Sprintf("descriptors: %s has %d open of %d", n, fds, lim))
			}
		}
	}
	rss := 0.0
	for _, v := range s.RSSMiB {
		rss += v
	}
	if *maxRSS > 0 && rss > float64(*maxRSS)*0.9 {
		why = append(why, fmt.Sprintf("memory: the processes' RSS add up to %.0f MiB (-max-rss %d)", rss, *maxRSS))
	}
	if s.UDPRcvbufErrors > 0 || s.UDPSndbufErrors > 0 {
		why = append(why, fmt.Sprintf("UDP buffers: %d datagrams dropped on receive, %d sends failed", s.UDPRcvbufErrors, s.UDPSndbufErrors))
	}
	if len(why) == 0 {
		return "nothing seen saturated (CPU, descriptors, UDP buffers)"
	}
	return strings.Join(why, "; ")
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

// procStatus is a number field of /proc/pid/status.
func procStatus(pid int, field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(rest))
			return v
		}
	}
	return 0
}

// noFile is this process's soft limit of open descriptors.
func noFile() string {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			if f := strings.Fields(line); len(f) >= 5 {
				return f[3]
			}
		}
	}
	return ""
}

// udpCounters is the machine's Udp: line of /proc/net/snmp by name.
func udpCounters() map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return out
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if i > 0 && i < len(f) {
				out[name], _ = strconv.ParseInt(f[i], 10, 64)
			}
		}
	}
	return out
}
