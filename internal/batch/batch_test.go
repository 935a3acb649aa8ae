package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSize pins salt/cli/batch.py get_bnum (Salt 3006).
func TestSize(t *testing.T) {
	tests := []struct {
		s       string
		minions int
		want    int
	}{
		{"3", 10, 3}, {"10%", 10, 1}, {"10%", 3, 1}, {"50%", 3, 1}, {"%50", 4, 2},
		{"100%", 7, 7}, {"25%", 10, 2}, {"0.5%", 10, 1}, {"200%", 3, 3}, {"99999999999999999999", 3, 3}, {"1e300%", 3, 3},
	}
	for _, tt := range tests {
		if err := Check(tt.s); err != nil {
			t.Errorf("Check(%q): %v", tt.s, err)
		}
		if got := Size(tt.s, tt.minions); got != tt.want {
			t.Errorf("Size(%q, %d): got %d, want %d", tt.s, tt.minions, got, tt.want)
		}
	}
	for _, bad := range []string{"", "x", "0", "-1", "1.5", "%", "0%", "Inf", "NaN%", "1e400%"} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q): got nil, want an error", bad)
		}
	}
}

func TestLimit(t *testing.T) {
	tests := []struct {
		s       string
		minions int
		want    int
	}{{"0", 10, 0}, {"0%", 10, 0}, {"3", 10, 3}, {"10%", 10, 1}, {"10%", 9, 0}, {"25%", 200, 50}, {"50", 3, 3}}
	for _, tt := range tests {
		if err := CheckLimit(tt.s); err != nil {
			t.Errorf("CheckLimit(%q): %v", tt.s, err)
		}
		if got := Limit(tt.s, tt.minions); got != tt.want {
			t.Errorf("Limit(%q, %d): got %d, want %d", tt.s, tt.minions, got, tt.want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5", "%"} {
		if err := CheckLimit(bad); err == nil {
			t.Errorf("CheckLimit(%q): got nil, want an error", bad)
		}
	}
}

// TestScheduler: at most Size minions run or cool down; a slot frees
// batch_wait after its minion returned (Batch.run's wait list).
func TestScheduler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &Scheduler{Size: 2, Wait: 5 * time.Second, ToRun: []string{"a", "b", "c", "d"}}
	if got := s.Next(t0); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first: got %q, want [a b]", got)
	}
	if got := s.Next(t0); got != nil {
		t.Fatalf("full window: got %q, want nothing", got)
	}
	s.Finished(t0.Add(time.Second)) // a returned at t0+1: its slot frees at t0+6
	if got := s.Next(t0.Add(2 * time.Second)); got != nil {
		t.Fatalf("cooling: got %q, want nothing", got)
	}
	if w, ok := s.Wake(); !ok || !w.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("wake: got %v %v, want t0+6s", w, ok)
	}
	if got := s.Next(t0.Add(6 * time.Second)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after wait: got %q, want [c]", got)
	}
	s.Wait = 0
	s.Finished(t0.Add(7 * time.Second))
	if got := s.Next(t0.Add(7 * time.Second)); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("no wait: got %q, want [d]", got)
	}
	if _, ok := s.Wake(); ok {
		t.Fatalf("wake with nothing left to run: got true, want false")
	}
}

// fleet runs a job on ids: each minion returns retcode rc[id] (0 when not
// set) at once, except those in silent, which never return.
type fleet struct {
	mu      sync.Mutex
	rc      map[string]int
	silent  map[string]bool
	jobErr  map[string]error
	started [][]string
}

func (f *fleet) start(ctx context.Context, ids []string, ret func(string, map[string]any)) error {
	f.mu.Lock()
	f.started = append(f.started, ids)
	f.mu.Unlock()
	for _, id := range ids {
		if err := f.jobErr[id]; err != nil {
			return err
		}
		if f.silent[id] {
			continue
		}
		ret(id, map[string]any{"id": id, "retcode": f.rc[id]})
	}
	return nil
}

func failedRC(d map[string]any) bool { return d["retcode"].(int) > 0 }

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%02d", i)
	}
	return out
}

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		o        Options
		rc       map[string]int
		silent   map[string]bool
		jobErr   map[string]error
		returned int // Returned calls
		failed   int
		notRun   int
		stopped  bool
	}{
		{name: "all", n: 10, o: Options{Size: "3"}, returned: 10},
		{name: "percent", n: 10, o: Options{Size: "50%"}, rc: map[string]int{"m01": 1}, returned: 10, failed: 1},
		// salt/cli/batch.py: with failhard, the first retcode > 0 ends
		// the run; nothing after it starts.
		{name: "failhard", n: 10, o: Options{Size: "1", Failhard: true}, rc: map[string]int{"m02": 2}, returned: 3, failed: 1, notRun: 7, stopped: true},
		// A minion that does not return is a failure for failhard too
		// ("failed to respond").
		{name: "failhard-silent", n: 4, o: Options{Size: "1", Failhard: true}, silent: map[string]bool{"m00": true}, returned: 1, failed: 1, notRun: 3, stopped: true},
		{name: "no-failhard", n: 4, o: Options{Size: "1"}, rc: map[string]int{"m00": 1, "m01": 1}, returned: 4, failed: 2},
		// max_fail 20% of 10 is 2: the third failure stops the starts.
		{name: "max-fail", n: 10, o: Options{Size: "1", MaxFail: "20%"}, rc: map[string]int{"m00": 1, "m01": 1, "m02": 1}, returned: 3, failed: 3, notRun: 7, stopped: true},
		{name: "max-fail-not-reached", n: 10, o: Options{Size: "2", MaxFail: "2"}, rc: map[string]int{"m00": 1, "m05": 1}, returned: 10, failed: 2},
		{name: "job-error", n: 4, o: Options{Size: "2"}, jobErr: map[string]error{"m00": errors.New("boom")}, returned: 4, failed: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fleet{rc: tt.rc, silent: tt.silent, jobErr: tt.jobErr}
			var got []Return
			out, err := Run(context.Background(), ids(tt.n), tt.o, f.start, Hooks{
				Returned: func(r Return) error { got = append(got, r); return nil },
				Failed:   failedRC,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.returned {
				t.Errorf("returned: got %d, want %d", len(got), tt.returned)
			}
			if out.Failed != tt.failed {
				t.Errorf("failed: got %d, want %d", out.Failed, tt.failed)
			}
			if len(out.NotRun) != tt.notRun {
				t.Errorf("not run: got %q, want %d", out.NotRun, tt.notRun)
			}
			if (out.Stopped != "") != tt.stopped {
				t.Errorf("stopped: got %q, want stopped %v", out.Stopped, tt.stopped)
			}
			size := Size(tt.o.Size, tt.n)
			for _, b := range f.started {
				if len(b) > size {
					t.Errorf("a batch of %d, more than the size %d", len(b), size)
				}
			}
		})
	}
}

// TestRunWait: batch_wait holds a freed slot before the next start.
func TestRunWait(t *testing.T) {
	f := &fleet{}
	start := time.Now()
	if _, err := Run(context.Background(), ids(3), Options{Size: "1", Wait: 30 * time.Millisecond}, f.start, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("3 minions one at a time with 30ms batch_wait took %v, want at least 60ms", d)
	}
}

// TestRunCancel: a cancelled context ends the run, and Run returns after
// its goroutines.
func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	block := func(ctx context.Context, ids []string, ret func(string, map[string]any)) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}
	if _, err := Run(ctx, ids(3), Options{Size: "1"}, block, Hooks{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestRunBadOptions(t *testing.T) {
	for _, o := range []Options{{Size: "0"}, {Size: "1", MaxFail: "x"}} {
		if _, err := Run(context.Background(), ids(1), o, nil, Hooks{}); err == nil {
			t.Errorf("%+v: got nil, want an error", o)
		}
	}
}
