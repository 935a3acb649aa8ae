package state

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// BenchmarkApplyManagedUnchanged is the issue's "agent applying 50
// unchanged file.managed states ≤ 50 ms" through the engine, as a
// highstate re-run applies them: the low state of 50 file.managed chunks
// (salt:// source inlined with its sha256, owner and mode given), each
// requiring the one before, run by Run on files that are already right.
// BenchmarkManagedUnchanged times the state function alone.
func BenchmarkApplyManagedUnchanged(b *testing.B) {
	const n = 50
	h := &fakeHost{cache: b.TempDir()}
	root := b.TempDir()
	low := make([]state.Chunk, n)
	for i := range low {
		name := filepath.Join(root, fmt.Sprintf("f%02d.conf", i))
		url := fmt.Sprintf("salt://conf/f%02d.conf", i)
		id := fmt.Sprintf("conf%02d", i)
		c := state.Chunk{"state": "file", "fun": "managed", "__id__": id, "name": name, "__sls__": "bench",
			"__env__": "base", "order": 10000 + i, "source": url, "mode": "0644", "user": "root", "group": "root",
			"__files__": files(url, strings.Repeat(fmt.Sprintf("setting_%d = value\n", i), 40))}
		if i > 0 {
			c["require"] = []any{map[string]any{"file": fmt.Sprintf("conf%02d", i-1)}}
		}
		low[i] = c
	}
	// The first run writes the files; the measured ones find them right.
	if ret, err := Run(context.Background(), h, low, Options{}); err != nil || !CheckResult(ret, low) {
		b.Fatalf("first run: %v %v", err, ret)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ret, err := Run(context.Background(), h, low, Options{})
		if err != nil || len(ret) != n {
			b.Fatalf("%d states, %v", len(ret), err)
		}
		for tag, v := range ret {
			if m := v.(map[string]any); m["result"] != true || len(m["changes"].(map[string]any)) != 0 {
				b.Fatalf("%s: %v", tag, m)
			}
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/50states")
}
