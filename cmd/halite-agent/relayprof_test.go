//go:build !(arm || mips || mipsle)

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestRelayProfiles checks that HALITE_HEAPPROFILE writes a heap profile
// on SIGUSR1 while the relay runs, and HALITE_CPUPROFILE a CPU profile
// when it stops; both gzipped pprof protobufs.
func TestRelayProfiles(t *testing.T) {
	dir := t.TempDir()
	heap, cpu := filepath.Join(dir, "heap.pprof"), filepath.Join(dir, "cpu.pprof")
	t.Setenv(heapProfileEnv, heap)
	t.Setenv(cpuProfileEnv, cpu)
	stop, err := startRelayProfiles(context.Background(), zap.NewNop())
	if err != nil {
		t.Fatalf("startRelayProfiles: %v", err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		stop()
		t.Fatal(err)
	}
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); len(b) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no heap profile in %s 10 s after SIGUSR1", heap)
		}
		b, _ = os.ReadFile(heap)
	}
	stop()
	gz := []byte{0x1f, 0x8b}
	if !bytes.HasPrefix(b, gz) {
		t.Errorf("heap profile starts %x, want gzip (%x)", b[:min(len(b), 2)], gz)
	}
	c, err := os.ReadFile(cpu)
	if err != nil || !bytes.HasPrefix(c, gz) {
		t.Errorf("CPU profile after stop: %d bytes, %v; want a gzipped profile", len(c), err)
	}
	if _, err := os.Stat(heap + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("heap profile's temporary file left behind: %v", err)
	}
}

// TestRelayProfilesOff checks that with neither variable set nothing is
// started.
func TestRelayProfilesOff(t *testing.T) {
	t.Setenv(heapProfileEnv, "")
	t.Setenv(cpuProfileEnv, "")
	stop, err := startRelayProfiles(context.Background(), zap.NewNop())
	if err != nil {
		t.Fatalf("startRelayProfiles: %v", err)
	}
	stop()
}
