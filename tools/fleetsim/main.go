// Command fleetsim measures publish-to-last-return for test.ping over the
// real protocol and real QUIC: it starts a master in this process (with
// auto_accept, under a temporary root_dir), connects N simulated agents
// (package tools/fleet), then times rounds of `halite '*' test.ping`
// through the master's local socket, as the CLI does.
//
//	fleetsim [-n 100,1000,5000] [-rounds 10] [-warmup 1]
//	fleetsim -relays 10 -n 10000 [-storm term|kill] [-json]
//	fleetsim -relays 50 -n 50000 -ramp 200 -admit 8 [-stall 2m] [-deadline 15m] [-max-rss MiB] [-sim-gogc N] -json
//	fleetsim -states [-state-files] [-relays 2] -n 1000 [-rounds 5] [-json]
//	fleetsim -rollout BUILD [-relays 1] -n 1000 [-batch 10%] [-json]
//	fleetsim -orch [-relays 2] -n 200 [-rounds 5] [-json]
//	fleetsim -fetch 10 -relays 1 -n 1000 [-json]
//
// With -relays R the devices reach the master through R real relays
// (package relay), run in a child process of this program so that their
// memory (RSS) is measured alone; -storm then stops that process (term:
// SIGTERM, a restart; kill: SIGKILL, a crash), starts it again on the same
// ports, and times until every device is back.
// -json prints one JSON object per fleet size instead of a table row.
// Every 10 s while devices connect (or come back after the storm) a
// progress line gives each process's CPU (cores), RSS and descriptors, the
// machine's UDP drops and load; a run that cannot finish (-stall: fewer
// than 1 % of the devices more in that long; -deadline; -max-rss; a
// signal) prints, with -json, {"failed": stage, "reached": devices,
// "saturated": what, "sample": {...}} instead.
//
// -fetch M times N devices behind the relays fetching one M MiB file by
// chunks (fetch.go), and reports the bytes on the relays' upstream links.
// -rollout times firmware.rollout of BUILD to simulated devices behind
// relays, and counts the chunk bytes the relays fetched from the master
// (rollout.go).
//
// -states times `halite 'sim-*' state.apply` of a 20-file highstate
// instead of test.ping: compiled per device on the master, run by each
// simulated device with the agent's own state engine (states.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/tools/fleet"
)

var (
	connectTimeout = flag.Duration("connect-timeout", 10*time.Minute, "with -relays: give up when not every device is connected after this long")
	stall          = flag.Duration("stall", 0, "with -relays: give up when no more devices have connected for this long (0: never)")
	maxRSS         = flag.Int("max-rss", 0, "with -relays: give up when the simulator's, relays' and master's RSS add up to more than this many MiB (0: no limit)")
	deadline       = flag.Duration("deadline", 0, "with -relays: the whole measurement's time (0: none): connecting gets what is left of it, no round starts and the storm is left out once it has passed, and the report says so")
	authTimeout    = flag.Int("auth-timeout", 0, "with -relays: the devices' auth_timeout, seconds (0: the agent's default with one relay, 20)")
	hold           = flag.Duration("hold", 0, "with -relays: wait this long once every device is connected (after the connect figures are read) before the first round: time to profile the processes idle (FLEETSIM_RELAY_PPROF)")
	simGOGC        = flag.Int("sim-gogc", 0, "the simulator's own GOGC (its relays and master keep theirs; 0: GOGC's)")
	relayGOGC      = flag.Int("relay-gogc", 0, "with -relays: the relays' process's GOGC, as a user's GOGC in the relay's environment would set it (0: the relay's own choice)")
)

func main() {
	ns := flag.String("n", "100,1000,5000", "comma-separated fleet sizes")
	rounds := flag.Int("rounds", 10, "measured rounds per fleet size")
	warmup := flag.Int("warmup", 1, "unmeasured rounds first")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured rounds to this file")
	flag.BoolVar(phases, "phases", false, "print when the job was published and when the 1st, 50%, 90% and last returns arrived")
	relays := flag.Int("relays", 0, "spread the devices over this many relays (0: devices connect to the master)")
	storm := flag.String("storm", "", "with -relays: restart the relays (term: SIGTERM, kill: SIGKILL) and time the reconnect storm")
	asJSON := flag.Bool("json", false, "print JSON objects")
	ramp := flag.Int("ramp", 0, "with -relays: devices started per second at first (0: all at once)")
	child := flag.Bool("relay-child", false, "internal: run relays for the parent fleetsim")
	masterChildFlag := flag.Bool("master-child", false, "internal: run the master for the parent fleetsim")
	apiChildFlag := flag.Bool("api-child", false, "internal: run the parent fleetsim's rounds of test.ping on the local API socket -root")
	master := flag.String("master", "", "internal: -relay-child's master address")
	per := flag.Int("per", 0, "internal: -relay-child's devices per relay")
	admit := flag.Int("admit", 0, "with -relays: each relay's admit rate, devices a second (0: the relays' share of what this machine's cores handshake, about 1500 a second over all)")
	root := flag.String("root", "", "internal: -relay-child's directory")
	fileRoots := flag.String("file-roots", "", "internal: -master-child's file_roots")
	states := flag.Bool("states", false, "time state.apply of a 20-file highstate (test states) instead of test.ping")
	writeStates := flag.String("write-states", "", "write the -states highstate (with -state-files: its file.managed too) into this directory and exit (tools/saltcompare.sh gives Salt the same SLS)")
	stateFiles := flag.Bool("state-files", false, "with -states: each SLS also manages a file in the device's own directory (every device a variant of its own)")
	flag.BoolVar(orchMode, "orch", false, "time halite-run state.orchestrate of three steps over every device (test.ping; state.sls of two of -states' SLS; test.echo) instead of state.apply")
	listen := flag.String("listen", "", "internal: -relay-child's addresses")
	fetchMiB := flag.Int("fetch", 0, "time the devices fetching one file of this many MiB by chunks through -relays (at least 1) instead of test.ping")
	rollout := flag.String("rollout", "", "time firmware.rollout of this build (a halite-agent file) to -n devices behind -relays relays (default 1)")
	batch := flag.String("batch", "10%", "with -rollout: the rollout's batch")
	flag.Parse()
	if *rollout != "" {
		n, err := strconv.Atoi(*ns)
		if err == nil {
			err = measureRollout(n, max(*relays, 1), *rollout, *batch, *asJSON)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim:", err)
			os.Exit(1)
		}
		return
	}
	if a := os.Getenv("FLEETSIM_PPROF"); a != "" && !*child && !*masterChildFlag {
		// Profiling the simulator and its master: go tool pprof http://<a>/debug/pprof/profile
		go http.ListenAndServe(a, nil)
	}
	if *writeStates != "" {
		if err := writeStateRoots(*writeStates, *stateFiles); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim:", err)
			os.Exit(1)
		}
		return
	}
	if *apiChildFlag || *masterChildFlag || *child {
		serveGCStats()
	}
	if *apiChildFlag {
		if err := runAPIChild(*root); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim api client:", err)
			os.Exit(1)
		}
		return
	}
	if *masterChildFlag {
		if err := runMasterChild(*root, *fileRoots); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim master:", err)
			os.Exit(1)
		}
		return
	}
	if *child {
		if err := relayChild(*master, *root, *listen, *relays, *per, *admit); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim relays:", err)
			os.Exit(1)
		}
		return
	}
	if *simGOGC > 0 {
		// The simulated devices' process only: a real device's heap is
		// one agent's, not tens of thousands', and its GC not theirs.
		debug.SetGCPercent(*simGOGC)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim:", err)
			os.Exit(1)
		}
		profileTo = f
	}
	if *fetchMiB > 0 {
		if !*asJSON {
			fmt.Printf("fleetsim: GOMAXPROCS=%d, devices fetching one file by chunks through relays\n", runtime.GOMAXPROCS(0))
			fmt.Println("| devices | relays | file | wall time, all devices | relay upstream (WAN) | served to devices | chunks: master / shared / cache |")
			fmt.Println("|---:|---:|---:|---:|---:|---:|---|")
		}
		for _, s := range strings.Split(*ns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err == nil && n > 0 {
				err = measureFetch(n, max(*relays, 1), *fetchMiB, *asJSON)
			} else {
				err = fmt.Errorf("bad fleet size %q", s)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "fleetsim:", err)
				os.Exit(1)
			}
		}
		return
	}
	if *states || *orchMode {
		if !*asJSON && *orchMode {
			orchHeader(*rounds, *warmup)
		} else if !*asJSON {
			stateHeader(*rounds, *warmup)
		}
		for _, s := range strings.Split(*ns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err == nil && n > 0 {
				err = measureStates(n, *relays, *rounds, *warmup, *stateFiles, *asJSON, *ramp, relayAdmit(*admit, max(*relays, 1)))
			} else {
				err = fmt.Errorf("bad fleet size %q", s)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "fleetsim:", err)
				os.Exit(1)
			}
		}
		return
	}
	if *relays > 0 {
		if !*asJSON {
			fmt.Printf("fleetsim: GOMAXPROCS=%d, %d rounds after %d warm-up, devices behind relays\n", runtime.GOMAXPROCS(0), *rounds, *warmup)
			fmt.Println("| devices | relays | connect all | p50 publish→last return | p99 | min | max | relay RSS per device | storm: all back |")
			fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		}
		for _, s := range strings.Split(*ns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err == nil && n > 0 {
				err = measureRelays(n, *relays, *rounds, *warmup, *storm, *ramp, relayAdmit(*admit, *relays), *asJSON)
			} else {
				err = fmt.Errorf("bad fleet size %q", s)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "fleetsim:", err)
				os.Exit(1)
			}
		}
		return
	}
	if err := run(*ns, *rounds, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(1)
	}
}

func run(ns string, rounds, warmup int) error {
	fmt.Printf("fleetsim: GOMAXPROCS=%d, %d rounds after %d warm-up\n", runtime.GOMAXPROCS(0), rounds, warmup)
	fmt.Println("| agents | connect all | p50 publish→last return | p99 | min | max |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	for _, s := range strings.Split(ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad fleet size %q", s)
		}
		if err := measure(n, rounds, warmup); err != nil {
			return fmt.Errorf("n=%d: %w", n, err)
		}
	}
	return nil
}

// phases is -phases.
var phases = new(bool)

// profileTo receives a CPU profile of the measured rounds (-cpuprofile).
var profileTo *os.File

func measure(n, rounds, warmup int) error {
	root, err := os.MkdirTemp("", "fleetsim")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	m, err := fleet.StartMaster(root, nil)
	if err != nil {
		return err
	}
	defer m.Stop()
	cfg := m.Config
	ctx := context.Background()
	start := time.Now()
	f, err := fleet.Start(m.Addr().String(), fleet.Options{N: n, MasterFP: m.Fingerprint()})
	if err != nil {
		return err
	}
	defer f.Close()
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	err = f.WaitConnected(wctx, n)
	wcancel()
	if err != nil {
		return err
	}
	connect := time.Since(start)
	var times []time.Duration
	for r := 0; r < warmup+rounds; r++ {
		if r == warmup && profileTo != nil {
			pprof.StartCPUProfile(profileTo)
			defer pprof.StopCPUProfile()
		}
		d, err := pingAll(ctx, cfg.SocketPath(), n)
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		if r >= warmup {
			times = append(times, d)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	fmt.Printf("| %d | %s | %s | %s | %s | %s |\n", n, round(connect), round(pct(times, 50)), round(pct(times, 99)),
		round(times[0]), round(times[len(times)-1]))
	return nil
}

// pingAll publishes test.ping to every minion and waits for every return,
// returning the time from the request to the last return.
func pingAll(ctx context.Context, sock string, n int) (time.Duration, error) {
	return ping(ctx, sock, "*", n)
}

// ping is pingAll for the minions tgt matches (behind relays: "sim-*", the
// devices, since the simulated relays run no agent of their own).
func ping(ctx context.Context, sock, tgt string, n int) (time.Duration, error) {
	d, _, err := pingTail(ctx, sock, tgt, n)
	return d, err
}

// pingTail is ping that also returns, with -phases, the last 1 % of the
// returns: which devices, and when they came.
func pingTail(ctx context.Context, sock, tgt string, n int) (time.Duration, []late, error) {
	start := time.Now()
	c, err := api.Dial(ctx, sock, &api.Request{Op: api.OpPublish, Tgt: tgt, Fun: "test.ping", Timeout: 60})
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	got := 0
	var tail []late
	for {
		r, err := c.Next()
		if err != nil {
			return 0, tail, err
		}
		switch r.Kind {
		case api.KindError:
			return 0, tail, errors.New(r.Error)
		case api.KindJob:
			if *phases {
				fmt.Fprintf(os.Stderr, "published after %s\n", time.Since(start))
			}
		case api.KindReturn:
			got++
			if *phases && (got == 1 || got == n/2 || got == n*9/10 || got == n*99/100 || got == n*999/1000 || got == n) {
				fmt.Fprintf(os.Stderr, "return %d after %s\n", got, time.Since(start))
			}
			if *phases && got > n*99/100 {
				id, _ := r.Data["id"].(string)
				tail = append(tail, late{id, time.Since(start)})
			}
		}
		if r.Done {
			if got != n || len(r.Missing) > 0 {
				return 0, tail, &incomplete{got: got, n: n}
			}
			return time.Since(start), tail, nil
		}
	}
}

// printLate prints, for the last few of a round's returns (-phases), when
// the device had the job and wrote its return, and when the API client
// had it: where the slowest devices' time went (the job's way down, the
// device, or the return's way up). start is when the round began.
func printLate(f *fleet.Fleet, tail []late, start time.Time) {
	for _, t := range tail[max(0, len(tail)-5):] {
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(t.ID, "sim-"), "%d", &i); err != nil {
			continue
		}
		g, s, ok := f.Timing(i)
		if !ok {
			continue
		}
		fmt.Fprintf(os.Stderr, "  late %s: job at device %s, return written %s, at the API %s\n", t.ID,
			time.Duration(g-start.UnixNano()), time.Duration(s-start.UnixNano()), t.At)
	}
}

// incomplete is a round in which not every minion returned in time.
type incomplete struct{ got, n int }

func (e *incomplete) Error() string { return fmt.Sprintf("%d of %d returned", e.got, e.n) }

// pct is the nearest-rank percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
}

// relayAdmit is the admit rate each of r relays gets: a, or by default
// their share of the handshakes this machine can complete in a second
// while it also runs the simulated devices and the master (about 1500 on
// two cores; a relay on a VM of its own does more: relay: admit defaults
// to 2000). Admitting more than the machine can finish makes handshakes
// time out and start again, which only adds work.
func relayAdmit(a, r int) int {
	if a > 0 {
		return a
	}
	return max(1500*runtime.NumCPU()/2/r, 50)
}
