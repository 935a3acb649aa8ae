package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/grains"
	agentstate "github.com/halite-fleet/halite/agent/state"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/tools/fleet"
)

// -states: `halite 'sim-*' state.apply` of a 20-file highstate instead of
// test.ping. The master compiles it per device at publish (master/states.go)
// from file_roots this program writes; each simulated device runs the
// job as the agent does: the agent's executor runs state.apply, which runs
// the compiled low state with the agent's state engine and state modules
// (agent/state), and the device returns Salt's state return map.
//
// The highstate (writeStateRoots) is top.sls and 20 SLS files that branch
// on grains the devices share (os, role) with test.* states and a
// require; with -state-files, each SLS also has a file.managed into the
// device's own directory under this program's temporary root (its path
// names grains['id'], so every device is a variant of its own, compiled
// and signed for it alone: the master's worst case).

// stateSLS is how many SLS files the highstate has.
const stateSLS = 20

// writeStateRoots writes the highstate under dir.
func writeStateRoots(dir string, files bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var top strings.Builder
	top.WriteString("base:\n  '*':\n")
	for i := 0; i < stateSLS; i++ {
		fmt.Fprintf(&top, "    - app%d\n", i)
		sls := fmt.Sprintf(`{%% if grains['os'] == 'Debian' %%}
app%[1]d_conf:
  test.succeed_without_changes:
    - name: /etc/app%[1]d/debian.conf
{%% else %%}
app%[1]d_conf:
  test.succeed_without_changes:
    - name: /etc/app%[1]d/other.conf
{%% endif %%}
app%[1]d_role:
  test.nop:
    - name: {{ salt['grains.get']('role', 'none') }}
    - require:
      - test: app%[1]d_conf
`, i)
		if files {
			sls += fmt.Sprintf(`app%[1]d_file:
  file.managed:
    - name: {{ grains['fleetsim_dir'] }}/{{ grains['id'] }}/app%[1]d.conf
    - makedirs: True
    - contents: |
        # app%[1]d, managed by halite
        role={{ grains['role'] }}
    - require:
      - test: app%[1]d_role
`, i)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("app%d.sls", i)), []byte(sls), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "top.sls"), []byte(top.String()), 0o644)
}

// statesPerDevice is how many states each device's return holds.
func statesPerDevice(files bool) int {
	if files {
		return 3 * stateSLS
	}
	return 2 * stateSLS
}

// simGrains gives each simulated device grains of its own: its id, and an
// os and role that vary over the fleet (so the highstate compiles to a few
// variants when it does not name the id).
func simGrains(dir string) func(id string) map[string]any {
	oses := []string{"Debian", "Debian", "Debian", "OpenWrt", "Alpine"}
	return func(id string) map[string]any {
		var n int
		fmt.Sscanf(strings.TrimPrefix(id, "sim-"), "%d", &n)
		return map[string]any{"id": id, "os": oses[n%len(oses)], "role": []any{"camera", "gateway"}[n%2],
			"kernel": "Linux", "fleetsim_dir": dir}
	}
}

// simDevices are the simulated devices' agent sides: for each, an
// executor with every execution function of the agent (state.* among
// them) and a state Host.
type simDevices struct {
	grains func(string) map[string]any
	cache  string // a cachedir per device under it

	mu   sync.Mutex
	devs map[string]*simDevice
	runs []time.Duration // how long each device's job took, this round
	got  []time.Time     // when each device got the job, this round
}

// simDevice is one device's agent/state.Host.
type simDevice struct {
	id     string
	grains map[string]any
	cache  string
	opts   map[string]any
	ex     *exec.Executor
}

var _ agentstate.Host = (*simDevice)(nil)

func (d *simDevice) ID() string                { return d.id }
func (d *simDevice) Grains() map[string]any    { return d.grains }
func (d *simDevice) CacheDir() string          { os.MkdirAll(d.cache, 0o700); return d.cache }
func (d *simDevice) Opts() map[string]any      { return d.opts }
func (d *simDevice) Running() []map[string]any { return d.ex.Running() }

// Fire: the simulated devices send no events (state_events is off).
func (d *simDevice) Fire(string, map[string]any) error { return nil }

// Exec is the agent's: a job of the device's own executor.
func (d *simDevice) Exec(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	res := d.ex.Run(ctx, exec.Request{JID: fmt.Sprintf("%020d", time.Now().UnixMicro()), Fun: fun, Args: args, Kwargs: kwargs, User: "state"})
	if !res.Success {
		return res.Return, fmt.Errorf("%v", res.Return)
	}
	return res.Return, nil
}

func (s *simDevices) device(id string) *simDevice {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.devs[id]; d != nil {
		return d
	}
	d := &simDevice{id: id, grains: s.grains(id), cache: filepath.Join(s.cache, id),
		opts: map[string]any{"id": id, "test": false, "failhard": false, "state_events": false}}
	// No grains collection per device: the state functions read the
	// Host's grains.
	d.ex = exec.New(exec.Options{ID: id, Version: "fleetsim", Grains: grains.NewSkipped(), Opts: d.opts, Host: d})
	s.devs[id] = d
	return d
}

// exec is fleet.Options.Exec: the agent's runJob (agent/session.go).
func (s *simDevices) exec(ctx context.Context, id string, b *protocol.JobBody) (any, int, bool) {
	start := time.Now()
	d := s.device(id)
	res := d.ex.Run(ctx, exec.Request{JID: b.JID, Fun: b.Fun, Args: b.Arg, Kwargs: b.Kwarg, Tgt: b.Tgt, TgtType: b.TgtType,
		User: b.User, Timeout: time.Duration(b.Timeout) * time.Second})
	took := time.Since(start)
	if os.Getenv("FLEETSIM_SIZES") != "" && id == "sim-00001" {
		jb, _ := protocol.Marshal(b)
		rb, _ := protocol.Marshal(&protocol.ReturnBody{Return: res.Return, FunArgs: []any{b.Kwarg}})
		fmt.Fprintf(os.Stderr, "fleetsim: job body %d bytes, return with fun_args %d bytes\n", len(jb), len(rb))
	}
	s.mu.Lock()
	s.runs = append(s.runs, took)
	s.got = append(s.got, start)
	s.mu.Unlock()
	return res.Return, res.Retcode, res.Success
}

// takeRuns returns the job times since the last call, sorted, and when
// the first and the last device got its job.
func (s *simDevices) takeRuns() (runs []time.Duration, first, last time.Time) {
	s.mu.Lock()
	r, got := s.runs, s.got
	s.runs, s.got = nil, nil
	s.mu.Unlock()
	sort.Slice(r, func(i, j int) bool { return r[i] < r[j] })
	for _, t := range got {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return r, first, last
}

// stateRound is one state.apply round's times, from the request on the
// master's local socket.
type stateRound struct {
	published time.Duration // compiled, signed and queued to every device (the api's job answer)
	first     time.Duration // first return
	last      time.Duration // last return
	device    time.Duration // the slowest device's state.apply, on the device
	deviceP50 time.Duration
	gotFirst  time.Duration // the first device got its job
	gotLast   time.Duration // the last device got its job
	start     time.Time
}

// applyAll publishes state.apply to tgt and waits for n returns, checking
// that each is Salt's state return with want states, every one of them
// true.
func applyAll(ctx context.Context, sock, tgt string, n, want int) (stateRound, error) {
	var r stateRound
	start := time.Now()
	r.start = start
	c, err := api.Dial(ctx, sock, &api.Request{Op: api.OpPublish, Tgt: tgt, Fun: "state.apply", Timeout: 120})
	if err != nil {
		return r, err
	}
	defer c.Close()
	got := 0
	var bad []string
	for {
		resp, err := c.Next()
		if err != nil {
			return r, err
		}
		switch resp.Kind {
		case api.KindError:
			return r, errors.New(resp.Error)
		case api.KindJob:
			r.published = time.Since(start)
		case api.KindReturn:
			got++
			if got == 1 {
				r.first = time.Since(start)
			}
			if why := checkStateReturn(resp.Data, want); why != "" && len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%v: %s", resp.Data["id"], why))
			}
		}
		if resp.Done {
			r.last = time.Since(start)
			if len(bad) > 0 {
				return r, fmt.Errorf("bad state returns: %s", strings.Join(bad, "; "))
			}
			if got != n || len(resp.Missing) > 0 {
				return r, &incomplete{got: got, n: n}
			}
			return r, nil
		}
	}
}

// checkStateReturn says what is wrong with a device's state.apply return
// ("" if nothing).
func checkStateReturn(data map[string]any, want int) string {
	if rc, _ := data["retcode"].(uint64); rc != 0 {
		return fmt.Sprintf("retcode %d: %s", rc, short(data["return"]))
	}
	if rc, _ := data["retcode"].(int64); rc != 0 {
		return fmt.Sprintf("retcode %d: %s", rc, short(data["return"]))
	}
	ret, ok := data["return"].(map[string]any)
	if !ok {
		return "return is not a state map: " + short(data["return"])
	}
	if len(ret) != want {
		return fmt.Sprintf("%d states, want %d", len(ret), want)
	}
	for tag, v := range ret {
		m, ok := v.(map[string]any)
		if !ok || m["result"] != true {
			return fmt.Sprintf("%s: %s", tag, short(v))
		}
		for _, k := range []string{"__run_num__", "start_time", "duration", "comment", "changes", "__id__"} {
			if _, ok := m[k]; !ok {
				return fmt.Sprintf("%s has no %s", tag, k)
			}
		}
	}
	return ""
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		b = append(b[:300], "..."...)
	}
	return string(b)
}

// stateReport is a -states measurement, printed by -json.
type stateReport struct {
	Devices    int     `json:"devices"`
	Relays     int     `json:"relays"`
	Files      bool    `json:"file_managed"`
	States     int     `json:"states_per_device"`
	Rounds     int     `json:"rounds"`
	Incomplete int     `json:"incomplete_rounds"`
	ConnectS   float64 `json:"connect_all_s"`
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
	MinMS      float64 `json:"min_ms"`
	MaxMS      float64 `json:"max_ms"`
	// Medians over the rounds of: the publish request answered (the
	// master compiled for every device, signed and queued the variants'
	// jobs), the first return, and the devices' own state.apply times
	// (the median device and the slowest).
	PublishedMS  float64 `json:"published_p50_ms"`
	FirstMS      float64 `json:"first_return_p50_ms"`
	DeviceP50MS  float64 `json:"device_apply_p50_ms"`
	DeviceMaxMS  float64 `json:"device_apply_max_p50_ms"`
	FirstRoundMS float64 `json:"first_round_ms"` // the warm-up's first round: cold compile cache, files written
	MasterCPUMS  float64 `json:"master_cpu_ms_per_round,omitempty"`
	SimCPUMS     float64 `json:"sim_cpu_ms_per_round,omitempty"`
	RelayCPUMS   float64 `json:"relays_cpu_ms_per_round,omitempty"`
	// The machine's 1-minute load average during the rounds: on a
	// machine others share, wall times stretch with it; CPU times less.
	LoadAvg float64 `json:"load_avg"`
}

// stateRounds runs warmup+rounds state.apply rounds and fills rep.
func stateRounds(ctx context.Context, sock string, n, rounds, warmup int, sim *simDevices, rep *stateReport) error {
	var rs []stateRound
	for i := 0; i < warmup+rounds; i++ {
		if i == warmup && profileTo != nil {
			pprof.StartCPUProfile(profileTo)
			defer pprof.StopCPUProfile()
		}
		sim.takeRuns()
		r, err := applyAll(ctx, sock, "sim-*", n, rep.States)
		var inc *incomplete
		if errors.As(err, &inc) {
			fmt.Fprintf(os.Stderr, "fleetsim: round %d: %v\n", i, err)
			if i >= warmup {
				rep.Incomplete++
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		runs, got0, got1 := sim.takeRuns()
		if len(runs) > 0 {
			r.device, r.deviceP50 = runs[len(runs)-1], pct(runs, 50)
			r.gotFirst, r.gotLast = got0.Sub(r.start), got1.Sub(r.start)
		}
		if i == 0 {
			rep.FirstRoundMS = ms(r.last)
		}
		if *phases {
			fmt.Fprintf(os.Stderr, "fleetsim: round %d: published %s, first device got it %s, last %s; first return %s, last %s; on the devices: p50 %s, slowest %s\n",
				i, round(r.published), round(r.gotFirst), round(r.gotLast), round(r.first), round(r.last), round(r.deviceP50), round(r.device))
		}
		if i >= warmup {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return fmt.Errorf("no round had every device return (%d incomplete)", rep.Incomplete)
	}
	med := func(f func(stateRound) time.Duration) []time.Duration {
		d := make([]time.Duration, len(rs))
		for i, r := range rs {
			d[i] = f(r)
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d
	}
	last := med(func(r stateRound) time.Duration { return r.last })
	rep.Rounds = len(rs)
	rep.P50MS, rep.P99MS, rep.MinMS, rep.MaxMS = ms(pct(last, 50)), ms(pct(last, 99)), ms(last[0]), ms(last[len(last)-1])
	rep.PublishedMS = ms(pct(med(func(r stateRound) time.Duration { return r.published }), 50))
	rep.FirstMS = ms(pct(med(func(r stateRound) time.Duration { return r.first }), 50))
	rep.DeviceP50MS = ms(pct(med(func(r stateRound) time.Duration { return r.deviceP50 }), 50))
	rep.DeviceMaxMS = ms(pct(med(func(r stateRound) time.Duration { return r.device }), 50))
	return nil
}

// measureStates is -states: n devices, directly connected (relays 0) or
// behind relays, state.apply rounds.
func measureStates(n, relays, rounds, warmup int, files, asJSON bool, ramp, admit int) error {
	root, err := os.MkdirTemp("", "fleetsim")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	srv := filepath.Join(root, "srv", "salt")
	if err := writeStateRoots(srv, files); err != nil {
		return err
	}
	if *orchMode {
		if err := writeOrch(srv); err != nil {
			return err
		}
	}
	sim := &simDevices{grains: simGrains(filepath.Join(root, "devices")), cache: filepath.Join(root, "devcache"),
		devs: map[string]*simDevice{}}
	rep := &stateReport{Devices: n, Relays: relays, Files: files, States: statesPerDevice(files)}
	ctx := context.Background()
	opts := fleet.Options{N: n, GrainsFor: sim.grains, Exec: sim.exec, Seed: "fleetsim"}
	// The master runs in a process of its own, as in relay mode: its CPU
	// time is then its own, and the simulator's is the devices' (and the
	// local API client's, which reads every return as the CLI does).
	if err := fleet.PreAccept(filepath.Join(root, "pki"), opts); err != nil {
		return err
	}
	m, err := startMasterChild(root, srv)
	if err != nil {
		return err
	}
	defer stopChild(m.cmd)
	masterPID, sock := m.cmd.Process.Pid, m.Socket
	opts.MasterFP = m.Finger
	addr, relayPID := m.Addr, 0
	if relays > 0 {
		child, addrs, err := startRelayChild(root, m.Addr, relays, (n+relays-1)/relays, admit, nil)
		if err != nil {
			return err
		}
		defer stopChild(child)
		relayPID = child.Process.Pid
		opts.Addrs, opts.Ramp, addr = addrs, ramp, ""
	}
	start := time.Now()
	f, err := fleet.Start(addr, opts)
	if err != nil {
		return err
	}
	defer f.Close()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	err = waitConnected(wctx, f, n, start)
	wcancel()
	if err != nil {
		return err
	}
	rep.ConnectS = time.Since(start).Seconds()
	simCPU0, masterCPU0, relayCPU0 := cpuTime(os.Getpid()), cpuTime(masterPID), cpuTime(relayPID)
	load0 := loadAvg()
	if *orchMode {
		err = orchRounds(ctx, sock, n, rounds, warmup, rep)
	} else {
		err = stateRounds(ctx, sock, n, rounds, warmup, sim, rep)
	}
	if err != nil {
		return err
	}
	all := float64(warmup + rounds)
	rep.SimCPUMS = ms(cpuTime(os.Getpid())-simCPU0) / all
	rep.MasterCPUMS = ms(cpuTime(masterPID)-masterCPU0) / all
	if relayPID != 0 {
		rep.RelayCPUMS = ms(cpuTime(relayPID)-relayCPU0) / all
	}
	rep.LoadAvg = (load0 + loadAvg()) / 2
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Println(string(b))
		return nil
	}
	if *orchMode {
		orchRow(rep)
		return nil
	}
	fmt.Printf("| %d | %d | %d%s | %.1f s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f |\n", n, relays, rep.States,
		map[bool]string{true: " (file.managed)", false: ""}[files], rep.ConnectS,
		fmtMS(rep.P50MS), fmtMS(rep.P99MS), fmtMS(rep.MinMS), fmtMS(rep.MaxMS),
		fmtMS(rep.PublishedMS), fmtMS(rep.FirstMS), fmtMS(rep.DeviceP50MS), fmtMS(rep.DeviceMaxMS),
		fmtMS(rep.MasterCPUMS), fmtMS(rep.RelayCPUMS), fmtMS(rep.SimCPUMS), rep.LoadAvg)
	return nil
}

// stateHeader is the table -states prints under.
func stateHeader(rounds, warmup int) {
	fmt.Printf("fleetsim -states: %d rounds after %d warm-up; state.apply of a %d-file highstate\n", rounds, warmup, stateSLS)
	fmt.Println("| devices | relays | states each | connect all | p50 publish→last return | p99 | min | max | published (compiled, signed, sent) p50 | first return p50 | state.apply on a device p50 | slowest device p50 | CPU per round: master | relays | devices + API client | load avg |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	var l float64
	fmt.Sscanf(string(b), "%f", &l)
	return l
}

func fmtMS(v float64) string { return round(time.Duration(v * float64(time.Millisecond))) }
