package profile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfile: HALITE_CPUPROFILE makes the program write a CPU profile
// (pprof's gzip-compressed protobuf) when it stops; unset, nothing is
// written; a path that cannot be created is an error naming the variable.
func TestCPUProfile(t *testing.T) {
	dir := t.TempDir()
	t.Run("unset", func(t *testing.T) {
		t.Setenv(CPUEnv, "")
		stop, err := StartCPU()
		if err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("written", func(t *testing.T) {
		path := filepath.Join(dir, "master.pprof")
		t.Setenv(CPUEnv, path)
		stop, err := StartCPU()
		if err != nil {
			t.Fatal(err)
		}
		x := 0
		for i := range 10_000_000 {
			x += i % 7
		}
		_ = x
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Fatalf("profile is not gzip (pprof's format): % x", b[:min(len(b), 8)])
		}
	})
	t.Run("bad path", func(t *testing.T) {
		t.Setenv(CPUEnv, filepath.Join(dir, "no", "such", "dir", "p"))
		_, err := StartCPU()
		if err == nil || !strings.Contains(err.Error(), CPUEnv) {
			t.Fatalf("err = %v, want an error naming %s", err, CPUEnv)
		}
	})
}
