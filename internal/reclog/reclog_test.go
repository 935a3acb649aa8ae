package reclog

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	var log []byte
	want := []Record{{'a', 1, nil}, {'b', 1 << 40, []byte("body")}, {'c', 7, bytes.Repeat([]byte{0xff}, 300)}}
	for _, r := range want {
		log = Append(log, r.Kind, r.Seq, r.Body)
	}
	if got, want := len(log), Size(0)+Size(4)+Size(300); got != want {
		t.Errorf("log size = %d, want %d", got, want)
	}
	for i, w := range want {
		r, n, ok := Next(log, 1024)
		if !ok {
			t.Fatalf("record %d: not read", i)
		}
		if r.Kind != w.Kind || r.Seq != w.Seq || !bytes.Equal(r.Body, w.Body) {
			t.Errorf("record %d = %c %d %q, want %c %d %q", i, r.Kind, r.Seq, r.Body, w.Kind, w.Seq, w.Body)
		}
		log = log[n:]
	}
	if _, _, ok := Next(log, 1024); ok {
		t.Error("read a record past the end")
	}
}

// TestParts: a record written in parts is the record of the whole body.
func TestParts(t *testing.T) {
	dst, start := Start([]byte("prefix"), 'w', 9)
	dst = append(dst, "he"...)
	dst = Finish(append(dst, "llo"...), start)
	if want := Append([]byte("prefix"), 'w', 9, []byte("hello")); !bytes.Equal(dst, want) {
		t.Errorf("record in parts = %x, want %x", dst, want)
	}
}

// TestDamage: a torn, corrupted or oversized record is not read.
func TestDamage(t *testing.T) {
	rec := Append(nil, 'r', 3, []byte("hello"))
	tests := []struct {
		name string
		b    []byte
		max  int
	}{
		{"torn", rec[:len(rec)-1], 100},
		{"header only", rec[:HeaderSize-1], 100},
		{"flipped bit", func() []byte { b := bytes.Clone(rec); b[len(b)-1] ^= 1; return b }(), 100},
		{"body past max", rec, 4},
		{"length below header", func() []byte { b := bytes.Clone(rec); b[0] = 3; return b }(), 100},
	}
	for _, tt := range tests {
		if _, _, ok := Next(tt.b, tt.max); ok {
			t.Errorf("%s: read as a record", tt.name)
		}
	}
	if _, _, ok := Next(rec, 5); !ok {
		t.Error("a body of exactly max was refused")
	}
}

// testLog is a log of n records, seq 1 to n, with bodies of 3 to 3+n-1
// bytes, and the offset of each record.
func testLog(n int) (log []byte, offs []int) {
	for i := 1; i <= n; i++ {
		offs = append(offs, len(log))
		log = Append(log, 'e', uint64(i), bytes.Repeat([]byte{byte(i)}, 2+i))
	}
	return log, offs
}

// seqs scans b, believing every record, and returns the seqs read.
func seqs(b []byte) (got []uint64, end int, damage []Damage) {
	end, damage = Scan(b, 100, func(_, _ int, r Record, _ int) bool {
		got = append(got, r.Seq)
		return true
	})
	return got, end, damage
}

// TestScan: past damage of any kind, every intact record after it is
// read, and the bytes dropped are reported.
func TestScan(t *testing.T) {
	log, offs := testLog(5)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(log)) }
	tests := []struct {
		name   string
		b      []byte
		want   []uint64
		end    int
		damage []Damage
	}{
		{"intact", log, []uint64{1, 2, 3, 4, 5}, len(log), nil},
		{"empty", nil, nil, 0, nil},
		{"torn last", log[:len(log)-2], []uint64{1, 2, 3, 4}, offs[4], []Damage{{offs[4], len(log) - 2}}},
		{"flipped bit in the body of 2", edit(func(b []byte) []byte { b[offs[2]-1] ^= 0x10; return b }),
			[]uint64{1, 3, 4, 5}, len(log), []Damage{{offs[1], offs[2]}}},
		{"flipped bit in the length of 3", edit(func(b []byte) []byte { b[offs[2]] ^= 0x01; return b }),
			[]uint64{1, 2, 4, 5}, len(log), []Damage{{offs[2], offs[3]}}},
		{"2 and 3 zeroed", edit(func(b []byte) []byte { clear(b[offs[1]:offs[3]]); return b }),
			[]uint64{1, 4, 5}, len(log), []Damage{{offs[1], offs[3]}}},
		{"garbage before", append([]byte("garbage"), log...), []uint64{1, 2, 3, 4, 5}, len(log) + 7, []Damage{{0, 7}}},
		{"torn record inside", append(bytes.Clone(log[:offs[3]-4]), log[offs[3]:]...),
			[]uint64{1, 2, 4, 5}, len(log) - 4, []Damage{{offs[2], offs[3] - 4}}},
		{"length past max", Append(bytes.Clone(log), 'e', 6, make([]byte, 101)), []uint64{1, 2, 3, 4, 5}, len(log),
			[]Damage{{len(log), len(log) + Size(101)}}},
	}
	for _, tt := range tests {
		got, end, damage := seqs(tt.b)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s: records read (-want +got):\n%s", tt.name, d)
		}
		if end != tt.end {
			t.Errorf("%s: got end %d, want %d", tt.name, end, tt.end)
		}
		if d := cmp.Diff(tt.damage, damage); d != "" {
			t.Errorf("%s: damage (-want +got):\n%s", tt.name, d)
		}
	}
}

// TestScanRefused: a record fn does not believe is damage, and the scan
// goes on past it.
func TestScanRefused(t *testing.T) {
	log, offs := testLog(4)
	var got []uint64
	var skips []int
	end, damage := Scan(log, 100, func(_, _ int, r Record, skipped int) bool {
		if r.Seq == 2 {
			return false
		}
		got, skips = append(got, r.Seq), append(skips, skipped)
		return true
	})
	if d := cmp.Diff([]uint64{1, 3, 4}, got); d != "" {
		t.Errorf("records read (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{0, offs[2] - offs[1], 0}, skips); d != "" {
		t.Errorf("skipped before each (-want +got):\n%s", d)
	}
	if want := [](Damage){{offs[1], offs[2]}}; !cmp.Equal(want, damage) || end != len(log) {
		t.Errorf("got damage %v, end %d; want %v, %d", damage, end, want, len(log))
	}
}

// TestScanBounded: a body that makes every offset look like the start of
// a long record costs a bounded search, not a CRC of up to maxBody bytes
// at each of its offsets.
func TestScanBounded(t *testing.T) {
	const max = 16 << 20
	// At every other offset the length field reads 2 MiB or 8 KiB: both fit,
	// and without a bound the search would checksum terabytes.
	body := bytes.Repeat([]byte{0, 0, 0x20, 0}, 8<<20/4)
	log := Append(nil, 'e', 1, body)
	log[10] ^= 1 // the record is damaged: every offset of its body is tried
	log = Append(log, 'e', 2, []byte("after"))
	n := 0
	_, damage := Scan(log, max, func(_, _ int, r Record, _ int) bool { n++; return true })
	if len(damage) != 1 || damage[0].From != 0 {
		t.Errorf("got damage %v, want one range from 0", damage)
	}
	if n > 1 {
		t.Errorf("got %d records, want at most 1", n)
	}
}
