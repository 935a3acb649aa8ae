package relay

import (
	"testing"
	"time"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// TestRecentJobsBounded: the recent jobs a device taken in may get are
// bounded by count, bytes and age, and only those since shortly before its
// status that are for it are given.
func TestRecentJobsBounded(t *testing.T) {
	r := &Relay{devices: map[string]*device{}}
	t0 := time.Now()
	for i := range 100 {
		r.fanOutTo(recentJob{at: t0, wire: make([]byte, 1000)})
		if i == 99 && (len(r.recent) != recentMaxJobs || r.recentBytes != recentMaxJobs*1000) {
			t.Fatalf("%d jobs of 1000 bytes kept (%d bytes), want at most %d", len(r.recent), r.recentBytes, recentMaxJobs)
		}
	}
	r.fanOutTo(recentJob{at: t0, wire: make([]byte, recentMaxBytes-5000)})
	if r.recentBytes > recentMaxBytes {
		t.Fatalf("%d bytes kept, over %d", r.recentBytes, recentMaxBytes)
	}
	r.fanOutTo(recentJob{at: t0.Add(recentJobAge + time.Second), wire: []byte("late")})
	if len(r.recent) != 1 || r.recentBytes != 4 {
		t.Fatalf("after recentJobAge: %d jobs (%d bytes) kept, want only the last", len(r.recent), r.recentBytes)
	}

	m, err := targets.Compile("cam*", "glob", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r = &Relay{devices: map[string]*device{}}
	r.fanOutTo(recentJob{at: now.Add(-2 * recentSlack), wire: []byte("before the status")})
	r.fanOutTo(recentJob{at: now, wire: []byte("named cam1"), names: map[string]bool{"cam1": true}})
	r.fanOutTo(recentJob{at: now, wire: []byte("named cam2"), names: map[string]bool{"cam2": true}})
	r.fanOutTo(recentJob{at: now, wire: []byte("cam*"), match: m})
	d := &device{id: "cam1", hello: &protocol.Hello{ID: "cam1"}}
	old, missed := r.takeIn(d, now)
	if old != nil || r.devices["cam1"] != d {
		t.Fatalf("takeIn: old %v, devices %v", old, r.devices)
	}
	var got []string
	for _, w := range missed {
		got = append(got, string(w))
	}
	if len(got) != 2 || got[0] != "named cam1" || got[1] != "cam*" {
		t.Fatalf("cam1 was given %q, want the job naming it and the one its id matches", got)
	}
	if snap := r.fanOutTo(recentJob{at: now, wire: []byte("x")}); len(snap) != 1 {
		t.Fatalf("a job after the take-in goes to %d devices, want cam1", len(snap))
	}
}
