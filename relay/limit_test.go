package relay

import (
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBucket(10, 3)
	for i := 0; i < 3; i++ {
		if !b.take(now) {
			t.Fatalf("take %d of the burst: got false, want true", i)
		}
	}
	if b.take(now) {
		t.Fatalf("take past the burst: got true, want false")
	}
	if got, want := b.wait(now), 100*time.Millisecond; got != want {
		t.Errorf("wait with an empty bucket: got %v, want %v", got, want)
	}
	if got, want := b.wait(now), 200*time.Millisecond; got != want {
		t.Errorf("wait again: got %v, want %v (the first wait reserved a token)", got, want)
	}
	now = now.Add(350 * time.Millisecond) // 3.5 tokens, 2 of them reserved
	if !b.take(now) {
		t.Fatalf("take after refill: got false, want true")
	}
	if b.take(now) {
		t.Errorf("take a half token: got true, want false")
	}
	now = now.Add(time.Hour)
	n := 0
	for b.take(now) {
		n++
	}
	if n != 3 {
		t.Errorf("tokens after an hour: got %d, want the burst, 3", n)
	}
}
