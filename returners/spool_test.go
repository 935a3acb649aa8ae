package returners

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/internal/fulldisk"
)

// spoolIDs lists the "n" of the items waiting in q, oldest first.
func spoolIDs(t *testing.T, q *Spool) []string {
	t.Helper()
	es, err := q.Peek(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.Item == nil {
			t.Fatalf("item %d does not decode: %s", e.Seq, e.Raw)
		}
		out = append(out, fmt.Sprint(e.Item.Ret["n"]))
	}
	return out
}

func pushN(t *testing.T, q *Spool, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := q.Push(&Item{Kind: KindRet, Ret: map[string]any{"n": fmt.Sprintf("r%02d", i), "x": "<&>"}}); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
}

func names(from, to int, except ...int) []string {
	var out []string
next:
	for i := from; i <= to; i++ {
		for _, e := range except {
			if i == e {
				continue next
			}
		}
		out = append(out, fmt.Sprintf("r%02d", i))
	}
	return out
}

// TestSpoolFullDisk: a push that fails on a full disk, after writing part
// of its line, reports the failure and leaves nothing behind: what is
// pushed once there is room again survives a restart.
func TestSpoolFullDisk(t *testing.T) {
	disk := fulldisk.Mount(t, 256<<10)
	q, err := OpenSpool(disk.Dir, "q", 0)
	if err != nil {
		t.Fatal(err)
	}
	pushN(t, q, 1, 1)
	disk.Fill(4096)
	big := &Item{Kind: KindRet, Ret: map[string]any{"n": "big", "pad": strings.Repeat("x", 20<<10)}}
	if err := q.Push(big); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("push on a full disk: got %v, want ENOSPC", err)
	}
	disk.Free()
	pushN(t, q, 2, 11)
	q2, err := OpenSpool(disk.Dir, "q", 0) // q is not closed: as after a crash
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	q.Close()
	if d := cmp.Diff(names(1, 11), spoolIDs(t, q2)); d != "" {
		t.Errorf("after a failed push and a restart (-want +got):\n%s", d)
	}
	if dmg := q2.Damage; len(dmg) != 0 {
		t.Errorf("got damage %v, want none", dmg)
	}
}

// TestSpoolDamage: a damaged line costs that line, never what follows it;
// an acked item is not sent again, nor another acked in its place.
func TestSpoolDamage(t *testing.T) {
	// lineOf finds the line that holds s.
	lineOf := func(b []byte, s string) int {
		i := bytes.Index(b, []byte(s))
		if i < 0 {
			t.Fatalf("%q not in the log", s)
		}
		return i
	}
	tests := []struct {
		name   string
		damage func(b []byte) []byte
		want   []string
	}{
		{"bit in an item", func(b []byte) []byte { b[lineOf(b, "r07")+2] ^= 0x01; return b }, names(1, 12, 3, 5, 7)},
		// "a":3 would read "a":2: the wrong item acked.
		{"bit in an ack", func(b []byte) []byte { b[lineOf(b, `"a":3`)+4] ^= 0x01; return b }, names(1, 12, 5)},
		// "p":8 would read "p":9: two items 9.
		{"bit in a push's seq", func(b []byte) []byte { b[lineOf(b, `"p":8`)+4] ^= 0x01; return b }, names(1, 12, 3, 5, 8)},
		{"newline gone", func(b []byte) []byte { b[lineOf(b, `"p":10`)-2] = ' '; return b }, names(1, 12, 3, 5, 9, 10)},
		// The last line is the ack of 5: 5 is sent again.
		{"torn last line", func(b []byte) []byte { return b[:len(b)-4] }, names(1, 12, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			q, err := OpenSpool(dir, "q", 0)
			if err != nil {
				t.Fatal(err)
			}
			pushN(t, q, 1, 12)
			if err := q.Ack(3, 5); err != nil {
				t.Fatal(err)
			}
			q.Close()
			path := filepath.Join(dir, "q.spool")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			q2, err := OpenSpool(dir, "q", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer q2.Close()
			if d := cmp.Diff(tt.want, spoolIDs(t, q2)); d != "" {
				t.Errorf("after damage (-want +got):\n%s", d)
			}
			if len(q2.Damage) == 0 {
				t.Error("no damage reported")
			}
			es, _ := q2.Peek(1000)
			seen := map[uint64]bool{}
			for _, e := range es {
				if seen[e.Seq] {
					t.Errorf("seq %d twice", e.Seq)
				}
				seen[e.Seq] = true
			}
			pushN(t, q2, 13, 13)
			if es, _ := q2.Peek(1000); es[len(es)-1].Seq != 13 {
				t.Errorf("push after reopening: got seq %d, want 13", es[len(es)-1].Seq)
			}
		})
	}
}

// TestSpoolOldFormat: a log written before lines carried a CRC still
// loads, and is rewritten with them.
func TestSpoolOldFormat(t *testing.T) {
	dir := t.TempDir()
	old := `{"p":1,"i":{"k":"ret","ret":{"n":"r01","x":"\u003c\u0026\u003e"}}}
{"p":2,"i":{"k":"ret","ret":{"n":"r02"}}}
{"a":1}
{"p":3,"i":{"k":"ret","ret":{"n":"r03"}}}
`
	if err := os.WriteFile(filepath.Join(dir, "q.spool"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		q, err := OpenSpool(dir, "q", 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"r02", "r03"}, spoolIDs(t, q)); d != "" {
			t.Errorf("open %d (-want +got):\n%s", i, d)
		}
		if len(q.Damage) != 0 {
			t.Errorf("open %d: got damage %v, want none", i, q.Damage)
		}
		q.Close()
	}
	b, _ := os.ReadFile(filepath.Join(dir, "q.spool"))
	if bytes.Count(b, []byte(`"c":"`)) != 2 {
		t.Errorf("rewritten log %s: want a CRC on each line", b)
	}
}
