// Package testwait is what the tests of every package share to wait on a
// condition with a deadline instead of sleeping, and to make temporary
// directories short enough for unix sockets. It is imported by tests only.
package testwait

import (
	"os"
	"testing"
	"time"
)

// For polls cond every 10 ms until it holds, failing t once d has passed.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

// ShortDir is a temporary directory with a short path, removed when the
// test ends: a unix socket's path is limited to about 108 bytes, and
// t.TempDir holds the test's name.
func ShortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "hl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
