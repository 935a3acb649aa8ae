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

	"github.com/halite-fleet/halite/internal/profile"
)

// TestRelayProfiles checks that HALITE_HEAPPROFILE writes a heap profile
// on SIGUSR1 while the relay runs, and HALITE_CPUPROFILE a CPU profile
// when it stops; both gzipped pprof protobufs.
func TestRelayProfiles(t *testing.T) {
	dir := t.TempDir()
	heap, cpu := filepath.Join(dir, "heap.pprof"), filepath.Join(dir, "cpu.pprof")
	t.Setenv(profile.HeapEnv, heap)
	t.Setenv(profile.CPUEnv, cpu)
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
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(left) > 0 {
		t.Errorf("heap profile's temporary files left behind: %v", left)
	}
}

// TestRelayProfilesOff checks that with neither variable set nothing is
// started.
func TestRelayProfilesOff(t *testing.T) {
	t.Setenv(profile.HeapEnv, "")
	t.Setenv(profile.CPUEnv, "")
	stop, err := startRelayProfiles(context.Background(), zap.NewNop())
	if err != nil {
		t.Fatalf("startRelayProfiles: %v", err)
	}
	stop()
}
