package reclog

import (
	"bytes"
	"testing"
)

// FuzzScan: whatever a log holds, Scan does not panic, the records it
// reads and the ranges it drops cover the log exactly, in order, and each
// record read is the record those bytes encode.
func FuzzScan(f *testing.F) {
	log, offs := testLog(6)
	f.Add(log)
	f.Add(log[:len(log)-3])                            // torn
	f.Add(log[:HeaderSize-1])                          // header only
	f.Add(append(bytes.Clone(log[:offs[2]]), 0xff))    // torn header
	f.Add(Append(nil, 'e', 1, make([]byte, 300)))      // oversized
	f.Add(append([]byte{9, 0, 0, 0, 1, 2, 3}, log...)) // garbage first
	for _, off := range []int{offs[1], offs[1] + 5, offs[3] + 9, len(log) - 1} {
		b := bytes.Clone(log)
		b[off] ^= 0x04 // flipped bits: length, CRC, kind, body
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		at := 0
		var records [][2]int
		end, damage := Scan(b, 200, func(off, size int, r Record, skipped int) bool {
			if off+size > len(b) || size != Size(len(r.Body)) {
				t.Fatalf("record at %d, size %d, body %d: past the log of %d", off, size, len(r.Body), len(b))
			}
			if got := Append(nil, r.Kind, r.Seq, r.Body); !bytes.Equal(got, b[off:off+size]) {
				t.Fatalf("record at %d reads back as %x, is %x", off, got, b[off:off+size])
			}
			records = append(records, [2]int{off, off + size})
			return r.Kind != 'x' // a kind the reader does not believe
		})
		ri, di := 0, 0
		for at < len(b) {
			switch {
			case di < len(damage) && damage[di].From == at && damage[di].To > at:
				at = damage[di].To
				di++
			case ri < len(records) && records[ri][0] == at:
				at = records[ri][1]
				ri++
				if at > end {
					t.Fatalf("record ends at %d, past end %d", at, end)
				}
			default:
				t.Fatalf("offset %d is neither a record nor damage: records %v, damage %v", at, records, damage)
			}
			// A refused record was passed to fn but is part of damage.
			for ri < len(records) && records[ri][0] < at {
				ri++
			}
		}
		if at != len(b) || di != len(damage) {
			t.Fatalf("covered %d of %d bytes, %d of %d damage ranges", at, len(b), di, len(damage))
		}
	})
}
