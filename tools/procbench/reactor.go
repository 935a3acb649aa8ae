package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halite-fleet/halite/master/api"
)

// The reactor as a user drives it (-reactor E): the master's reactor maps
// the tag bench/ping to local.test.ping on the device the event names;
// E events are fired through the master's local socket (the event.send
// runner, what `halite-run event.send` does: one connection each, -fire
// connections at a time), and the returns are counted on a live event
// stream (state.event) opened before the first event. A reaction is done
// when its return's salt/job/<jid>/ret/<id> event is seen, which the
// master fires once the return is in the job cache; after the run every
// job is looked up in the cache (jobs.lookup_jid), so a return announced
// but not kept would be counted as lost.

// goalReactions is issue 20's goal for reactions per second through real
// processes.
const goalReactions = 2000

// reactorFile is the reactor file: one local.test.ping on the event's
// device.
const reactorFile = `ping_device:
  local.test.ping:
    - tgt: {{ data['id'] }}
    - tgt_type: list
`

// reactorConf is the master's reactor section for the file at path.
func reactorConf(path string) string {
	return fmt.Sprintf("reactor:\n  - 'bench/ping':\n    - %s\n", path)
}

// reactorRound is one round's figures.
type reactorRound struct {
	fired     time.Duration // first event sent → last event.send answered
	published time.Duration // first event sent → last salt/job/<jid>/new seen
	total     time.Duration // first event sent → last return seen
	returns   int
	kept      int // returns found in the job cache afterwards
	firstRet  time.Duration
	reactions float64 // events / total
	// CPU time per reaction of the master and of the agents together
	// (from /proc/<pid>/stat, 10 ms ticks).
	masterCPU, agentCPU time.Duration
}

// runReactor fires o.reactor events per round at the fleet ids through
// the master's socket sock and reports each round.
// cpu is a function returning the CPU time the master and the agents have
// used so far; each round reports what it took of both.
func runReactor(ctx context.Context, o options, sock string, ids []string, cpu func() (master, agents time.Duration)) ([]reactorRound, error) {
	var rounds []reactorRound
	for r := 0; r < o.warmup+o.runs; r++ {
		events := o.reactor
		if r < o.warmup {
			events = min(o.reactor, 100)
		}
		rr, err := reactorOnce(ctx, sock, ids, events, o.fire, r, cpu)
		if err != nil {
			return nil, fmt.Errorf("reactor round %d: %w", r, err)
		}
		if r >= o.warmup {
			rounds = append(rounds, rr)
		}
	}
	return rounds, nil
}

func reactorOnce(ctx context.Context, sock string, ids []string, events, fire, round int,
	cpu func() (master, agents time.Duration)) (reactorRound, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The stream of returns, live before the first event.
	stream, err := api.Dial(ctx, sock, &api.Request{Op: api.OpEvents, TagMatch: "salt/job/*"})
	if err != nil {
		return reactorRound{}, err
	}
	defer stream.Close()
	if r, err := stream.Next(); err != nil {
		return reactorRound{}, fmt.Errorf("open the event stream: %w", err)
	} else if r.Kind == api.KindError {
		return reactorRound{}, fmt.Errorf("open the event stream: %s", r.Error)
	}
	type ret struct {
		jid, id string
		at      time.Time
		isNew   bool // salt/job/<jid>/new, else a return
	}
	rets := make(chan ret, 2*events)
	streamErr := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Next()
			if err != nil {
				streamErr <- err
				return
			}
			if r.Kind != api.KindEvent {
				continue
			}
			jid, _ := r.Data["jid"].(string)
			id, _ := r.Data["id"].(string)
			isNew := strings.HasSuffix(r.Tag, "/new")
			if !isNew && !strings.Contains(r.Tag, "/ret/") {
				continue
			}
			select {
			case rets <- ret{jid, id, time.Now(), isNew}:
			default: // more returns than events: not ours
			}
		}
	}()

	m0, a0 := cpu()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var fireErr error
	var errOnce sync.Once
	var lastFired atomic.Int64
	for w := 0; w < fire; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= events || ctx.Err() != nil {
					return
				}
				_, err := api.Call(ctx, sock, &api.Request{Op: api.OpRunner, Fun: "event.send",
					Arg: []any{"bench/ping", map[string]any{"id": ids[i%len(ids)], "seq": i, "round": round}}})
				if err != nil {
					errOnce.Do(func() { fireErr = fmt.Errorf("event.send %d: %w", i, err) })
					cancel()
					return
				}
				lastFired.Store(int64(time.Since(start)))
			}
		}()
	}
	seen := make(map[string]string, events)
	var first, last, lastNew time.Duration
	for len(seen) < events {
		select {
		case rt := <-rets:
			if rt.isNew {
				lastNew = rt.at.Sub(start)
				continue
			}
			if _, dup := seen[rt.jid]; dup {
				continue
			}
			seen[rt.jid] = rt.id
			d := rt.at.Sub(start)
			if len(seen) == 1 {
				first = d
			}
			last = d
		case err := <-streamErr:
			wg.Wait()
			return reactorRound{}, fmt.Errorf("event stream after %d of %d returns: %w", len(seen), events, err)
		case <-ctx.Done():
			wg.Wait()
			if fireErr != nil {
				return reactorRound{}, fireErr
			}
			return reactorRound{}, fmt.Errorf("%d of %d returns: %w", len(seen), events, ctx.Err())
		}
	}
	wg.Wait()
	m1, a1 := cpu()
	if fireErr != nil {
		return reactorRound{}, fireErr
	}
	// Every return announced is in the job cache.
	kept, err := countKept(ctx, sock, seen, fire)
	if err != nil {
		return reactorRound{}, err
	}
	return reactorRound{fired: time.Duration(lastFired.Load()), published: lastNew, total: last, firstRet: first, returns: len(seen), kept: kept,
		reactions: float64(events) / last.Seconds(),
		masterCPU: (m1 - m0) / time.Duration(events), agentCPU: (a1 - a0) / time.Duration(events)}, nil
}

// countKept looks every job of seen (jid → device) up in the job cache and
// returns how many hold their device's return.
func countKept(ctx context.Context, sock string, seen map[string]string, conc int) (int, error) {
	jids := make(chan string, len(seen))
	for jid := range seen {
		jids <- jid
	}
	close(jids)
	var kept atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < max(conc, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jid := range jids {
				res, err := api.Call(ctx, sock, &api.Request{Op: api.OpRunner, Fun: "jobs.lookup_jid", Arg: []any{jid}})
				if err != nil {
					mu.Lock()
					first = errors.Join(first, fmt.Errorf("jobs.lookup_jid %s: %w", jid, err))
					mu.Unlock()
					return
				}
				if m, ok := res.(map[string]any); ok && m[seen[jid]] == true {
					kept.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(kept.Load()), first
}

// writeReactorFile writes the reactor file under root and returns the
// master config lines that use it.
func writeReactorFile(root string) (string, error) {
	path := filepath.Join(root, "ping.sls")
	if err := os.WriteFile(path, []byte(reactorFile), 0o644); err != nil {
		return "", fmt.Errorf("write reactor file: %w", err)
	}
	return reactorConf(path), nil
}

// printReactor prints the rounds and their medians as Markdown.
func printReactor(o options, rounds []reactorRound) {
	fmt.Printf("The reactor through real processes: %d events per round fired with `event.send` on the master's socket "+
		"(one connection each, %d at a time), each driving local.test.ping on one of %d agents; %d rounds after %d warm-up; load average %s\n\n",
		o.reactor, o.fire, o.n, len(rounds), o.warmup, loadAvg())
	fmt.Println("| round | events fired in | last job published | first return | last return | returns | kept in the job cache | reactions/s | master CPU per reaction | agents' CPU per reaction |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var rates []float64
	lost := 0
	for i, r := range rounds {
		fmt.Printf("| %d | %s | %s | %s | %s | %d | %d | %.0f | %s | %s |\n", i+1, ms(r.fired), ms(r.published), ms(r.firstRet), ms(r.total),
			r.returns, r.kept, r.reactions, us(r.masterCPU), us(r.agentCPU))
		rates = append(rates, r.reactions)
		lost += r.returns - r.kept
	}
	med := median(rates)
	fmt.Println()
	fmt.Println("| agents | events | reactions/s (median) | min | max | returns lost | goal | status |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---|")
	sort.Float64s(rates)
	fmt.Printf("| %d | %d | %.0f | %.0f | %.0f | %d | ≥ %d/s, none lost | %s |\n", o.n, o.reactor, med, rates[0], rates[len(rates)-1], lost,
		goalReactions, status(med >= goalReactions && lost == 0))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// cpuTime is the user and system time pid has used (/proc/<pid>/stat).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu time of pid %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut) // utime: field 14 of the whole line
	fmt.Sscan(f[12], &st) // stime: field 15
	// USER_HZ is 100 on Linux.
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}
