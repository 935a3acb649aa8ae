package master

import (
	"fmt"
	"testing"
	"time"
)

func TestLogEvery(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name string
		max  int
		key  string
		at   time.Duration
		want bool
	}{
		{"first", 3, "cam1", 0, true},
		{"again at once", 3, "cam1", time.Second, false},
		{"other key", 3, "cam2", time.Second, true},
		{"within the minute", 3, "cam1", 59 * time.Second, false},
		{"a minute on", 3, "cam1", time.Minute, true},
		{"and not again", 3, "cam1", time.Minute + time.Second, false},
	}
	l := newLogEvery(time.Minute, 3)
	for _, tt := range tests {
		if got := l.Allow(tt.key, t0.Add(tt.at)); got != tt.want {
			t.Errorf("%s: Allow(%s, +%v) got %v, want %v", tt.name, tt.key, tt.at, got, tt.want)
		}
	}
}

// TestLogEveryBounded: a flood of ids never grows the memory past max;
// fresh entries are forgotten only when none has expired.
func TestLogEveryBounded(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	l := newLogEvery(time.Minute, 100)
	for i := range 10_000 {
		l.Allow(fmt.Sprintf("hostile-%d", i), t0)
		if n := len(l.last); n > 100 {
			t.Fatalf("after %d ids: got %d remembered, want at most 100", i+1, n)
		}
	}
	l = newLogEvery(time.Minute, 3)
	l.Allow("old", t0)
	l.Allow("a", t0.Add(50*time.Second))
	l.Allow("b", t0.Add(50*time.Second))
	l.Allow("c", t0.Add(61*time.Second)) // full: "old" expired and goes
	if got := l.Allow("a", t0.Add(62*time.Second)); got {
		t.Errorf("a within its minute after a sweep: got true, want false (kept)")
	}
	if _, ok := l.last["old"]; ok {
		t.Errorf("expired key: got it kept, want it swept")
	}
}
