package main

import (
	"slices"
	"testing"
	"time"
)

// TestBatchSize pins salt/cli/batch.py get_bnum (Salt 3006).
func TestBatchSize(t *testing.T) {
	tests := []struct {
		s       string
		minions int
		want    int
	}{
		{"3", 10, 3}, {"10%", 10, 1}, {"10%", 3, 1}, {"50%", 3, 1}, {"%50", 4, 2},
		{"100%", 7, 7}, {"25%", 10, 2}, {"0.5%", 10, 1}, {"200%", 3, 3}, {"99999999999999999999", 3, 3}, {"1e300%", 3, 3},
	}
	for _, tt := range tests {
		if err := parseBatch(tt.s); err != nil {
			t.Errorf("parseBatch(%q): %v", tt.s, err)
		}
		if got := batchSize(tt.s, tt.minions); got != tt.want {
			t.Errorf("batchSize(%q, %d): got %d, want %d", tt.s, tt.minions, got, tt.want)
		}
	}
	for _, bad := range []string{"", "x", "0", "-1", "1.5", "%", "0%", "Inf", "NaN%", "1e400%"} {
		if err := parseBatch(bad); err == nil {
			t.Errorf("parseBatch(%q): got nil, want an error", bad)
		}
	}
}

// TestScheduler: at most bnum minions run or cool down; a slot frees
// batch_wait after its minion returned (Batch.run's wait list).
func TestScheduler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &scheduler{bnum: 2, bwait: 5 * time.Second, toRun: []string{"a", "b", "c", "d"}}
	if got := s.next(t0); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first: got %q, want [a b]", got)
	}
	if got := s.next(t0); got != nil {
		t.Fatalf("full window: got %q, want nothing", got)
	}
	s.finished(t0.Add(time.Second)) // a returned at t0+1: its slot frees at t0+6
	if got := s.next(t0.Add(2 * time.Second)); got != nil {
		t.Fatalf("cooling: got %q, want nothing", got)
	}
	if w, ok := s.wake(); !ok || !w.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("wake: got %v %v, want t0+6s", w, ok)
	}
	if got := s.next(t0.Add(6 * time.Second)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after wait: got %q, want [c]", got)
	}
	s.bwait = 0
	s.finished(t0.Add(7 * time.Second))
	if got := s.next(t0.Add(7 * time.Second)); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("no wait: got %q, want [d]", got)
	}
	if _, ok := s.wake(); ok {
		t.Fatalf("wake with nothing left to run: got true, want false")
	}
}
