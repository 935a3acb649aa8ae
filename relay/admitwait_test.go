package relay

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestAdmitWaitLetsWaitersThrough: once the admit burst is used, devices
// waiting for upstream admission get through at the admit rate, each
// taking one token. Before admitWait the wait took a token again each
// time it woke, found the bucket its own token had emptied and waited
// again, for ever: after a storm or a link's return had used the burst,
// no waiting device got a session upstream (fleetsim's 50,000 behind 50
// stalled with relays "full" of such waiters).
func TestAdmitWaitLetsWaitersThrough(t *testing.T) {
	b := newBucket(20, 1)
	b.wait(time.Now()) // the burst
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- admitWait(ctx, b, nil, nil)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a waiter was not admitted at 20 a second: %v (after %v)", err, time.Since(start))
		}
	}
	// Five tokens at 20 a second: about 250 ms; each waiter took one.
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("5 waiters admitted in %v, faster than the rate (20/s) allows", d)
	}
}

// TestAdmitWaitGivesBack: a device that leaves while it waits for
// admission, or whose link goes, ends the wait at once and gives its token
// back, so the devices still there are not kept to the rate for it.
func TestAdmitWaitGivesBack(t *testing.T) {
	for _, which := range []string{"device", "link"} {
		b := newBucket(1, 1)
		b.wait(time.Now()) // the burst: the next token is a second away
		gone := make(chan struct{})
		close(gone)
		var linkDone, devDone <-chan struct{} = nil, gone
		if which == "link" {
			linkDone, devDone = gone, nil
		}
		start := time.Now()
		if err := admitWait(context.Background(), b, linkDone, devDone); err == nil {
			t.Fatalf("%s gone: admitted", which)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("%s gone: the wait ended after %v, not at once", which, d)
		}
		b.mu.Lock()
		tokens := b.tokens
		b.mu.Unlock()
		if tokens < -0.5 {
			t.Errorf("%s gone: %.2f tokens left, want the token given back (about 0)", which, tokens)
		}
	}
}
