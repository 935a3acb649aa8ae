package returners

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzSpoolLoad: whatever a returner spool's log holds, it opens; what it
// finds waiting, with an item pushed then, is what a restart finds again,
// with no seq twice.
func FuzzSpoolLoad(f *testing.F) {
	valid := marshalLines([]spoolLine{{P: 1, I: []byte(`{"k":"ret","ret":{"n":1}}`)},
		{P: 2, I: []byte(`{"k":"ret"}`)}, {A: 1}})
	old := []byte(`{"p":1,"i":{"k":"ret"}}` + "\n" + `{"a":1}` + "\n" + `{"p":2,"i":{"k":"ret"}}` + "\n")
	f.Add(valid)
	f.Add(old)
	f.Add(valid[:len(valid)-6])
	f.Add(bytes.Repeat([]byte("x"), 1<<16)) // one long line
	for _, i := range []int{3, 12, 20, 40, len(valid) - 2} {
		b := bytes.Clone(valid)
		b[i] ^= 0x01
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "q.spool"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		q, err := OpenSpool(dir, "q", 0)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if err := q.Push(&Item{Kind: KindRet}); err != nil {
			t.Fatalf("push: %v", err)
		}
		want, _ := q.Peek(1 << 20)
		seen := map[uint64]bool{}
		for _, e := range want {
			if seen[e.Seq] {
				t.Fatalf("seq %d twice in %v", e.Seq, want)
			}
			seen[e.Seq] = true
		}
		q.Close()
		q2, err := OpenSpool(dir, "q", 0)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer q2.Close()
		got, _ := q2.Peek(1 << 20)
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("reopened (-want +got):\n%s", d)
		}
		if len(q2.Damage) != 0 {
			t.Fatalf("reopened: damage %v, want none", q2.Damage)
		}
	})
}
