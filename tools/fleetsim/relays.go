package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/relay"
	"github.com/halite-fleet/halite/tools/fleet"
)

// relayReport is what a relay measurement prints with -json.
type relayReport struct {
	Devices           int     `json:"devices"`
	Relays            int     `json:"relays"`
	Rounds            int     `json:"rounds"`
	Incomplete        int     `json:"incomplete_rounds"`
	ConnectS          float64 `json:"connect_all_s"`
	P50MS             float64 `json:"p50_ms"`
	P99MS             float64 `json:"p99_ms"`
	MinMS             float64 `json:"min_ms"`
	MaxMS             float64 `json:"max_ms"`
	RelayRSSMiB       float64 `json:"relays_rss_mib"`
	RelayKiBPerDevice float64 `json:"relay_kib_per_device"`
	// CPU time per round (all rounds, warm-up included), of this process
	// (the simulated devices), the master's and the relays': steadier
	// than wall times on a shared machine.
	// The master's VmRSS once all are connected, and its growth from
	// before, per device and per relay (a relay's link and its devices'
	// sessions).
	MasterRSSMiB float64 `json:"master_rss_mib"`
	// With -hold: the relays' and the master's memory per device at its
	// end, the connect burst settled (RelayKiBPerDevice and
	// MasterKiBPerDevice are at its start, the moment all are connected).
	HeldRelayKiBPerDevice  float64 `json:"held_relay_kib_per_device,omitempty"`
	HeldMasterKiBPerDevice float64 `json:"held_master_kib_per_device,omitempty"`
	MasterKiBPerDevice     float64 `json:"master_kib_per_device"`
	MasterKiBPerRelay      float64 `json:"master_kib_per_relay"`
	// CPU time per device connected, the same way.
	ConnSimCPUMS    float64 `json:"connect_sim_cpu_ms_per_device"`
	ConnMasterCPUMS float64 `json:"connect_master_cpu_ms_per_device"`
	ConnRelayCPUMS  float64 `json:"connect_relays_cpu_ms_per_device"`
	// UDP datagrams sent on this machine per device per round (every
	// process: devices, relays, master; a round's job, return, acks and
	// QUIC's own acks), from /proc/net/snmp.
	UDPPerDevice float64 `json:"udp_datagrams_per_device_round"`
	SimCPUMS     float64 `json:"sim_cpu_ms_per_round"`
	// The simulator's own process (the simulated devices): its VmRSS
	// once all are connected and its growth from before the devices
	// started, per device; its goroutines then; its CPU per device and
	// round (µs).
	SimRSSMiB        float64 `json:"sim_rss_mib"`
	SimKiBPerDevice  float64 `json:"sim_kib_per_device"`
	SimGoroutines    int     `json:"sim_goroutines"`
	SimCPUUSPerRound float64 `json:"sim_cpu_us_per_device_round"`
	MasterCPUMS      float64 `json:"master_cpu_ms_per_round"`
	RelayCPUMS       float64 `json:"relays_cpu_ms_per_round"`
	// The API client's process (apichild.go; 0 with FLEETSIM_API_INPROC=1,
	// when SimCPUMS holds it).
	ClientCPUMS float64 `json:"api_client_cpu_ms_per_round"`
	// GC: what each process (sim, relays, master, api_client) allocated
	// and collected per round (gcstats.go).
	GC map[string]gcDelta `json:"gc,omitempty"`
	// CPU time per device brought back by the storm (-storm): this
	// process and the master's from the relays' restart until every
	// device is back, the new relays' process from its start.
	StormSimCPUMS    float64 `json:"storm_sim_cpu_ms_per_device,omitempty"`
	StormMasterCPUMS float64 `json:"storm_master_cpu_ms_per_device,omitempty"`
	StormRelayCPUMS  float64 `json:"storm_relays_cpu_ms_per_device,omitempty"`
	Storm            string  `json:"storm,omitempty"`
	StormS           float64 `json:"storm_all_back_s,omitempty"`
	StormPingMS      float64 `json:"storm_first_ping_ms,omitempty"`
	AuthTimeoutS     int     `json:"auth_timeout_s,omitempty"` // -auth-timeout, when set
	// Connected: the three processes when every device was connected
	// (cores: over the last 10 s and since the devices started).
	Connected saturation `json:"connected"`
	// Cut says what -deadline left out.
	Cut string `json:"cut,omitempty"`
	// RoundsMS: each measured round's time (ms), in the order they ran,
	// to tell one slow round from a slow run.
	RoundsMS []float64 `json:"rounds_ms,omitempty"`
}

// measureRelays runs a master in a child process, r relays in another (so that
// their memory is their own) and n simulated devices spread over them,
// times rounds of test.ping to all, and with storm kills the relays' process
// and restarts it on the same ports, timing until every device is back.
func measureRelays(n, r, rounds, warmup int, storm string, ramp, admit int, asJSON bool) error {
	root, err := os.MkdirTemp("", "fleetsim")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	// The devices' keys are accepted beforehand: enrolment is bound by the
	// key store's fsyncs (about 70 keys/s here), the same with or without
	// relays, and is not what this measures.
	opts := fleet.Options{N: n, Seed: "fleetsim", Ramp: ramp}
	if err := fleet.PreAccept(filepath.Join(root, "pki"), opts); err != nil {
		return err
	}
	// The master runs in a process of its own, as it would on its own
	// machine: inside this one it would be one goroutine among the
	// simulated devices' tens of thousands and starve when they all
	// reconnect at once.
	os.Setenv(statsDirEnv, root) // the children's gcstats (gcstats.go)
	defer os.Unsetenv(statsDirEnv)
	m, err := startMasterChild(root, "")
	if err != nil {
		return err
	}
	defer stopChild(m.cmd)
	per := (n + r - 1) / r
	child, addrs, err := startRelayChild(root, m.Addr, r, per, admit, nil)
	if err != nil {
		return err
	}
	defer func() {
		if child != nil {
			stopChild(child)
		}
	}()
	watcher = newProcWatch()
	watcher.add("relays", child.Process.Pid)
	watcher.add("master", m.cmd.Process.Pid)
	defer func() { watcher = nil }()
	rss0, mrss0 := rssKiB(child.Process.Pid), rssKiB(m.cmd.Process.Pid)
	srss0 := rssKiB(os.Getpid())
	simCPU0, relayCPU0, masterCPU0 := cpuTime(os.Getpid()), cpuTime(child.Process.Pid), cpuTime(m.cmd.Process.Pid)
	start := time.Now()
	f, err := fleet.Start("", fleet.Options{N: n, MasterFP: m.Finger, Addrs: addrs, Ramp: ramp, Seed: opts.Seed,
		AuthTimeout: time.Duration(*authTimeout) * time.Second})
	if err != nil {
		return err
	}
	defer f.Close()
	// Each round is asked of the API client's process (apichild.go),
	// unless FLEETSIM_API_INPROC=1.
	var client *apiChild
	if os.Getenv("FLEETSIM_API_INPROC") != "1" {
		if client, err = startAPIChild(m.Socket); err != nil {
			return err
		}
		defer func() { client.stop() }()
	}
	pingRound := func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		var d time.Duration
		var tail []late
		var err error
		if client != nil {
			d, tail, err = client.ping(ctx, "sim-*", n)
		} else {
			d, tail, err = pingTail(ctx, m.Socket, "sim-*", n)
		}
		if *phases && len(tail) > 0 {
			printLate(f, tail, start)
		}
		return d, err
	}
	clientCPU := func() time.Duration {
		if client == nil {
			return 0
		}
		return cpuTime(client.pid())
	}
	ctx := context.Background()
	var until time.Time // -deadline
	if *deadline > 0 {
		until = start.Add(*deadline)
	}
	left := func(d time.Duration) time.Duration {
		if !until.IsZero() {
			d = min(d, time.Until(until))
		}
		return d
	}
	// A signal (make bench's timeout, Ctrl-C) ends the wait with a report
	// of how far it got, not silently.
	sigctx, sigstop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer sigstop()
	wctx, wcancel := context.WithTimeout(sigctx, left(*connectTimeout))
	err = waitConnected(wctx, f, n, start)
	wcancel()
	if err != nil {
		return failedRun("connect", n, r, f.Connected(), err, f, asJSON)
	}
	connect := time.Since(start)
	connSimCPU, connRelayCPU := cpuTime(os.Getpid())-simCPU0, cpuTime(child.Process.Pid)-relayCPU0
	connMasterCPU := cpuTime(m.cmd.Process.Pid) - masterCPU0
	rss1, mrss1 := rssKiB(child.Process.Pid), rssKiB(m.cmd.Process.Pid)
	srss1, sgor := rssKiB(os.Getpid()), runtime.NumGoroutine()
	atConnect := watcher.sample()
	var heldRelayKiB, heldMasterKiB float64
	if *hold > 0 {
		// The idle cost: what the connected devices cost while nothing
		// happens (keep-alives, timers), per process.
		fmt.Fprintf(os.Stderr, "fleetsim: %d devices connected; holding %s\n", n, *hold)
		s0, r0, m0, u0 := cpuTime(os.Getpid()), cpuTime(child.Process.Pid), cpuTime(m.cmd.Process.Pid), udpSent()
		f.Census()
		time.Sleep(*hold)
		secs := hold.Seconds()
		fmt.Fprintf(os.Stderr, "fleetsim: idle %s: cores sim %.3f relays %.3f master %.3f; %.3f datagrams a second per device\n", *hold,
			(cpuTime(os.Getpid())-s0).Seconds()/secs, (cpuTime(child.Process.Pid)-r0).Seconds()/secs,
			(cpuTime(m.cmd.Process.Pid)-m0).Seconds()/secs, float64(udpSent()-u0)/secs/float64(n))
		if c := f.Census(); c != "" {
			fmt.Fprintf(os.Stderr, "fleetsim: the devices' 1-RTT packets while idle, by frames:\n%s", c)
		}
		// Memory once the connect burst has settled: the relays' and the
		// master's collectors have run (Go's at least every 2 minutes),
		// shrinking the stacks the handshakes grew and returning the
		// heap their garbage took.
		heldRelayKiB = float64(rssKiB(child.Process.Pid)-rss0) / float64(n)
		heldMasterKiB = float64(rssKiB(m.cmd.Process.Pid)-mrss0) / float64(n)
		fmt.Fprintf(os.Stderr, "fleetsim: after %s idle: relay %.1f KiB per device (%.1f at connect), master %.1f (%.1f)\n", *hold,
			heldRelayKiB, float64(rss1-rss0)/float64(n), heldMasterKiB, float64(mrss1-mrss0)/float64(n))
	}
	// A round in which some device did not return (its session was being
	// re-established when the job went out) is counted, not timed.
	var times []time.Duration
	var inOrder []float64
	failed := 0
	simCPU0, relayCPU0, masterCPU0 = cpuTime(os.Getpid()), cpuTime(child.Process.Pid), cpuTime(m.cmd.Process.Pid)
	clientCPU0 := clientCPU()
	procs := map[string]int{"relays": child.Process.Pid, "master": m.cmd.Process.Pid}
	if client != nil {
		procs["api_client"] = client.pid()
	}
	gcBefore := map[string]gcStats{"sim": readGCStats()}
	for name, pid := range procs {
		if s, err := askGCStats(root, pid); err == nil {
			gcBefore[name] = s
		} else {
			fmt.Fprintf(os.Stderr, "fleetsim: %s: %v\n", name, err)
		}
	}
	udp0 := udpSent()
	f.Census() // from the rounds on
	cut := ""  // why rounds or the storm were left out
	for i := 0; i < warmup+rounds; i++ {
		if left(time.Hour) <= 0 {
			cut = fmt.Sprintf("-deadline passed after %d of %d rounds", i, warmup+rounds)
			break
		}
		d, err := pingRound(sigctx)
		if sigctx.Err() != nil {
			cut = fmt.Sprintf("a signal after %d of %d rounds", i, warmup+rounds)
			break
		}
		var inc *incomplete
		if errors.As(err, &inc) {
			// Why devices were away when the job went out: their
			// sessions that ended since the last report.
			fmt.Fprintf(os.Stderr, "fleetsim: round %d: %v%s\n", i, err, topErrors(f))
			if i >= warmup {
				failed++
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if i >= warmup {
			times = append(times, d)
			inOrder = append(inOrder, ms(d))
		}
	}
	if len(times) == 0 {
		err := fmt.Errorf("no round had every device return (%d incomplete)", failed)
		if cut != "" {
			err = fmt.Errorf("%s; %w", cut, err)
		}
		return failedRun("rounds", n, r, f.Connected(), err, f, asJSON)
	}
	all := float64(warmup + rounds)
	gcRounds := map[string]gcDelta{}
	for name, b := range gcBefore {
		a, err := readGCStats(), error(nil)
		if name != "sim" {
			a, err = askGCStats(root, procs[name])
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleetsim: %s: %v\n", name, err)
			continue
		}
		gcRounds[name] = b.per(a, all)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	udpPerDevice := float64(udpSent()-udp0) / all / float64(n)
	if c := f.Census(); c != "" {
		fmt.Fprintf(os.Stderr, "fleetsim: the devices' 1-RTT packets over %d rounds, by frames:\n%s", warmup+rounds, c)
	}
	simCPU, relayCPU := cpuTime(os.Getpid())-simCPU0, cpuTime(child.Process.Pid)-relayCPU0
	masterCPU := cpuTime(m.cmd.Process.Pid) - masterCPU0
	rep := relayReport{ClientCPUMS: ms(clientCPU()-clientCPU0) / all, GC: gcRounds, Connected: atConnect, SimCPUMS: ms(simCPU) / all, SimCPUUSPerRound: ms(simCPU) * 1000 / all / float64(n),
		SimRSSMiB: float64(srss1) / 1024, SimKiBPerDevice: float64(srss1-srss0) / float64(n), SimGoroutines: sgor, RelayCPUMS: ms(relayCPU) / all,
		MasterRSSMiB: float64(mrss1) / 1024, MasterKiBPerDevice: float64(mrss1-mrss0) / float64(n),
		MasterKiBPerRelay: float64(mrss1-mrss0) / float64(r),
		MasterCPUMS:       ms(masterCPU) / all, ConnMasterCPUMS: ms(connMasterCPU) / float64(n),
		UDPPerDevice: udpPerDevice, ConnSimCPUMS: ms(connSimCPU) / float64(n), ConnRelayCPUMS: ms(connRelayCPU) / float64(n), Devices: n, Relays: r, Rounds: len(times), Incomplete: failed, ConnectS: connect.Seconds(),
		RoundsMS: inOrder, P50MS: ms(pct(times, 50)), P99MS: ms(pct(times, 99)), MinMS: ms(times[0]), MaxMS: ms(times[len(times)-1]),
		RelayRSSMiB: float64(rss1) / 1024, RelayKiBPerDevice: float64(rss1-rss0) / float64(n),
		HeldRelayKiBPerDevice: heldRelayKiB, HeldMasterKiBPerDevice: heldMasterKiB}
	if storm != "" && (left(time.Hour) <= 0 || sigctx.Err() != nil) {
		cut += "; the storm left out (-deadline passed, or a signal)"
	} else if storm != "" {
		// term: a restart (SIGTERM: the relays close their devices'
		// connections, which come back at once, with jitter); kill: a
		// crash (SIGKILL: devices notice at their idle timeout).
		restart := time.Now()
		if storm == "kill" {
			child.Process.Kill()
			child.Wait()
		} else {
			stopChild(child)
		}
		fmt.Fprintf(os.Stderr, "fleetsim: storm: relays stopped after %s\n", round(time.Since(restart)))
		child, _, err = startRelayChild(root, m.Addr, r, per, admit, addrs)
		if err != nil {
			return fmt.Errorf("restart relays: %w", err)
		}
		watcher.add("relays", child.Process.Pid)
		fmt.Fprintf(os.Stderr, "fleetsim: storm: relays listening and linked after %s\n", round(time.Since(restart)))
		simCPU0, masterCPU0 := cpuTime(os.Getpid()), cpuTime(m.cmd.Process.Pid)
		sctx, scancel := context.WithTimeout(sigctx, max(left(5*time.Minute), 10*time.Second))
		err = waitBack(sctx, f, n, restart)
		scancel()
		if err != nil {
			return failedRun("storm", n, r, f.ReconnectedSince(restart), err, f, asJSON)
		}
		back := time.Since(restart)
		// The relays' process is new: its CPU from its start (linking
		// included, a few ms); the others' from the relays' restart.
		rep.StormSimCPUMS = ms(cpuTime(os.Getpid())-simCPU0) / float64(n)
		rep.StormMasterCPUMS = ms(cpuTime(m.cmd.Process.Pid)-masterCPU0) / float64(n)
		rep.StormRelayCPUMS = ms(cpuTime(child.Process.Pid)) / float64(n)
		d, err := pingRound(sigctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleetsim: ping after the storm: %v\n", err)
		}
		rep.Storm, rep.StormS, rep.StormPingMS = storm, back.Seconds(), ms(d)
		rep.AuthTimeoutS = *authTimeout
	}
	rep.Cut = strings.TrimPrefix(cut, "; ")
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Println(string(b))
		return nil
	}
	fmt.Printf("| %d | %d | %s | %s | %s | %s | %s | %.1f KiB | %.1f s |\n", n, r, round(connect),
		round(pct(times, 50)), round(pct(times, 99)), round(times[0]), round(times[len(times)-1]),
		rep.RelayKiBPerDevice, rep.StormS)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// waitBack waits until every device has had a session again since t (the
// fleet counts sessions: each device's goes down, then up).
func waitBack(ctx context.Context, f *fleet.Fleet, n int, t time.Time) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for f.ReconnectedSince(t) < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d devices back: %w", f.ReconnectedSince(t), n, ctx.Err())
		case <-tick.C:
		}
		if time.Since(last) >= 2*time.Second {
			if err := overMemory(); err != nil {
				return err
			}
			last = time.Now()
			fmt.Fprintf(os.Stderr, "fleetsim: storm: %d of %d devices back after %s%s%s\n", f.ReconnectedSince(t), n, round(time.Since(t)), topErrors(f), watchLine())
		}
	}
	return nil
}

// startRelayChild runs this program with -relay-child and reads the
// relays' addresses from its first line of output.
func startRelayChild(root, master string, r, per, admit int, listen []string) (*exec.Cmd, []string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, "-relay-child", "-master", master, "-relays", strconv.Itoa(r),
		"-per", strconv.Itoa(per), "-admit", strconv.Itoa(admit), "-root", filepath.Join(root, "relays"), "-listen", strings.Join(listen, ","))
	if *relayGOGC > 0 {
		cmd.Env = append(os.Environ(), "GOGC="+strconv.Itoa(*relayGOGC))
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	_ = stdin // closed when this process exits: the child stops then
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, errors.New("relay child exited before listening")
	}
	var hello struct{ Addrs []string }
	if err := json.Unmarshal(sc.Bytes(), &hello); err != nil {
		return nil, nil, fmt.Errorf("relay child: %w", err)
	}
	go func() {
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "relays:", sc.Text())
		}
	}()
	return cmd, hello.Addrs, nil
}

func stopChild(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// cpuTime is a process's user and system CPU time so far.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields count from after its ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// udpSent is the machine's count of UDP datagrams sent so far.
func udpSent() int64 { return udpCounters()["OutDatagrams"] }

// rssKiB is a process's resident set size.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// relayChild is -relay-child: run relays until stdin closes or a signal.
func relayChild(master, root, listen string, r, per, admit int) error {
	var addrs []string
	if listen != "" {
		addrs = strings.Split(listen, ",")
	}
	if a := os.Getenv("FLEETSIM_RELAY_PPROF"); a != "" {
		// Profiling the relays: go tool pprof http://<a>/debug/pprof/heap
		go http.ListenAndServe(a, nil)
	}
	// The relays' process runs at the relay's gc_percent, as halite-agent
	// does for its relay (GOGC in the environment, -relay-gogc, wins).
	relay.SetGCPercent(config.DefaultRelay())
	rs, err := fleet.StartRelays(root, master, r, per, admit, addrs)
	if err != nil {
		return err
	}
	// Ready once every relay's upstream link is up.
	for deadline := time.Now().Add(time.Minute); rs.Upstream() < r; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			rs.Stop()
			return fmt.Errorf("%d of %d relays reached the master", rs.Upstream(), r)
		}
	}
	b, _ := json.Marshal(map[string]any{"addrs": rs.Addrs()})
	fmt.Println(string(b))
	waitStop()
	return rs.Stop()
}

// waitConnected is fleet.WaitConnected that reports progress every 10 s
// and gives up once no more devices have connected for -stall.
func waitConnected(ctx context.Context, f *fleet.Fleet, n int, start time.Time) error {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- f.WaitConnected(ctx, n) }()
	most := 0
	type point struct {
		t time.Time
		c int
	}
	hist := []point{{time.Now(), 0}}
	for {
		select {
		case err := <-done:
			if c := context.Cause(ctx); c != nil && err != nil {
				return fmt.Errorf("%w (%w)", err, c)
			}
			return err
		case <-tick.C:
			c := f.Connected()
			most = max(most, c)
			fmt.Fprintf(os.Stderr, "fleetsim: %d of %d devices connected after %s (most %d)%s%s\n", c, n, round(time.Since(start)), most, topErrors(f), watchLine())
			// Stalled: fewer than 1 % of the devices more than -stall ago.
			hist = append(hist, point{time.Now(), c})
			for len(hist) > 1 && time.Since(hist[1].t) >= *stall {
				hist = hist[1:]
			}
			if old := hist[0]; *stall > 0 && time.Since(old.t) >= *stall && c-old.c < max(n/100, 1) {
				cancel(fmt.Errorf("stalled: %d connected, %d %s before (most %d)", c, old.c, round(time.Since(old.t)), most))
			}
			if err := overMemory(); err != nil {
				cancel(err)
			}
		}
	}
}

// overMemory is an error once the watched processes' RSS add up to more
// than -max-rss.
func overMemory() error {
	if watcher == nil || *maxRSS <= 0 {
		return nil
	}
	total := 0.0
	for _, v := range watcher.rss() {
		total += v
	}
	if total > float64(*maxRSS) {
		return fmt.Errorf("memory: the processes' RSS add up to %.0f MiB, over -max-rss %d MiB", total, *maxRSS)
	}
	return nil
}

// watchLine is the watcher's sample for a progress line ("" without one).
func watchLine() string {
	if watcher == nil {
		return ""
	}
	return watcher.sample().String()
}

// failedRun reports a measurement that could not finish: how far it got
// (reached devices of n, at which stage) and what saturated, as a JSON
// line with asJSON (so that make bench can show it) and on stderr; it
// returns the error.
func failedRun(stage string, n, r, reached int, err error, f *fleet.Fleet, asJSON bool) error {
	var sat saturation
	why := ""
	if watcher != nil {
		sat = watcher.sample()
		why = sat.verdict()
	}
	fmt.Fprintf(os.Stderr, "fleetsim: %s: %d of %d devices after %.0f s: %v\n  saturated: %s%s\n", stage, reached, n, sat.ElapsedS, err, why, sat)
	if asJSON {
		b, _ := json.Marshal(map[string]any{"devices": n, "relays": r, "failed": stage, "reached": reached,
			"error": err.Error(), "saturated": why, "sample": sat, "errors": f.Errors()})
		fmt.Println(string(b))
	}
	return fmt.Errorf("%s: %d of %d devices: %w", stage, reached, n, err)
}

// topErrors tells the commonest reasons sessions failed since it was
// last called, for the progress lines.
func topErrors(f *fleet.Fleet) string {
	errs := f.Errors()
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range errs {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	var b strings.Builder
	for i, e := range all {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, "\n  %6d× %s", e.n, e.k)
	}
	return b.String()
}

// masterChild is a master run by startMasterChild.
type masterChild struct {
	cmd                  *exec.Cmd
	Addr, Socket, Finger string
}

// startMasterChild runs this program with -master-child and reads the
// master's address, local API socket and key fingerprint from its first
// line of output. fileRoots, if set, is its file_roots' base directory.
func startMasterChild(root, fileRoots string) (*masterChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-master-child", "-root", root, "-file-roots", fileRoots)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if _, err := cmd.StdinPipe(); err != nil { // closed when this process exits: the child stops then
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, errors.New("master child exited before listening")
	}
	m := &masterChild{cmd: cmd}
	if err := json.Unmarshal(sc.Bytes(), m); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("master child: %w", err)
	}
	go func() {
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "master:", sc.Text())
		}
	}()
	return m, nil
}

// runMasterChild is -master-child: run a master under root (with
// fileRoots as file_roots' base, if set) until stdin closes or a signal.
func runMasterChild(root, fileRoots string) error {
	if a := os.Getenv("FLEETSIM_MASTER_PPROF"); a != "" {
		go http.ListenAndServe(a, nil)
	}
	// fleet.StartRelays names its relays relay-00, relay-01...
	m, err := fleet.StartMaster(root, func(c *config.Master) {
		c.RelayAllow = []string{"relay-*"}
		if fileRoots != "" {
			c.FileRoots = map[string][]string{"base": {fileRoots}}
		}
	})
	if err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]string{"Addr": m.Addr().String(), "Socket": m.Config.SocketPath(), "Finger": m.Fingerprint()})
	fmt.Println(string(b))
	waitStop()
	return m.Stop()
}

// waitStop returns on SIGTERM or SIGINT, or when standard input closes
// (the parent exited).
func waitStop() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString(0)
		close(eof)
	}()
	select {
	case <-sig:
	case <-eof:
	}
}
