// Package reclog is the record framing of Halite's append-only logs: the
// agent's outbox spool and the relay's spool of returns and events. A
// record is its length and a CRC-32 (Castagnoli) of what follows, then a
// kind byte, a sequence number and a body. Scan reads a log back: where it
// holds no intact record (a torn write, a flipped bit, a zeroed page) it
// resynchronises on the next offset where an intact record starts, keeps
// every record after it and reports the bytes it dropped.
package reclog

import (
	"encoding/binary"
	"hash/crc32"

	"go.uber.org/zap"
)

// Layout of a record: length (of kind, seq and body) and CRC, both
// little-endian uint32, then kind (1 byte), seq (little-endian uint64) and
// body.
const (
	frameSize  = 8                      // length and CRC
	minPayload = 1 + 8                  // kind and seq
	HeaderSize = frameSize + minPayload // a record's size without its body
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Size is the size of a record whose body is n bytes long.
func Size(n int) int { return HeaderSize + n }

// Append appends a record to dst and returns the extended slice.
func Append(dst []byte, kind byte, seq uint64, body []byte) []byte {
	dst, start := Start(dst, kind, seq)
	return Finish(append(dst, body...), start)
}

// Start appends the head of a record to dst, for a caller that appends the
// body in parts (and so need not assemble it first); Finish, given the
// same start, completes the record.
func Start(dst []byte, kind byte, seq uint64) (out []byte, start int) {
	start = len(dst)
	dst = append(dst, make([]byte, frameSize)...)
	dst = append(dst, kind)
	return binary.LittleEndian.AppendUint64(dst, seq), start
}

// Finish fills in the length and CRC of the record that starts at start
// and runs to the end of dst, and returns dst.
func Finish(dst []byte, start int) []byte {
	rec := dst[start+frameSize:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(rec)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(rec, crcTable))
	return dst
}

// Record is one record read back. Body aliases the bytes it was read
// from.
type Record struct {
	Kind byte
	Seq  uint64
	Body []byte
}

// Next reads the record at the start of b, whose body may be at most
// maxBody bytes long, and returns it and its size. ok is false when b does
// not start with a whole, intact record: the end of the log, a torn write,
// or damage (a length past maxBody is damage, not an allocation to try).
func Next(b []byte, maxBody int) (r Record, size int, ok bool) {
	if len(b) < HeaderSize {
		return Record{}, 0, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < minPayload || n-minPayload > maxBody || n > len(b)-frameSize {
		return Record{}, 0, false
	}
	rec := b[frameSize : frameSize+n]
	if crc32.Checksum(rec, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return Record{}, 0, false
	}
	return Record{Kind: rec[0], Seq: binary.LittleEndian.Uint64(rec[1:]), Body: rec[minPayload:]}, frameSize + n, true
}

// Damage is a range [From, To) of a log's bytes that held no intact
// record.
type Damage struct{ From, To int }

// resyncBudget bounds, with 4 bytes per byte of the log, how many bytes
// Scan checksums while it looks for a record past damage: each offset
// whose length field fits costs a CRC of up to maxBody bytes, and a body
// (written by whoever sent the event) could make every offset look so.
const resyncBudget = 64 << 20

// Scan reads the log b: it calls fn with each intact record in order, its
// offset, its size and how many damaged bytes were skipped just before it
// (0 but after damage). fn returns false for a record it does not believe
// (a kind it does not know, a sequence number that cannot be), which is
// then damage too. Past damage, Scan looks for the next offset where an
// intact record starts that fn believes, and goes on from there; a record
// is at most maxBody bytes of body, so each offset tried costs at most
// that, and the work of the whole search is bounded (past the bound, the
// rest of the log is damage). Scan returns the end of the last record
// believed, where the log's next record belongs, and the ranges it
// dropped.
func Scan(b []byte, maxBody int, fn func(off, size int, r Record, skipped int) bool) (end int, damage []Damage) {
	budget := resyncBudget + 4*len(b)
	from := -1 // start of the damage being skipped
	for off := 0; off < len(b); {
		skipped := 0
		if from >= 0 {
			skipped = off - from
			// At most what Next checksums here.
			if len(b)-off >= HeaderSize {
				if n := int(binary.LittleEndian.Uint32(b[off:])); n <= maxBody+minPayload {
					budget -= n
				}
			}
			if budget < 0 {
				break
			}
		}
		if r, n, ok := Next(b[off:], maxBody); ok && fn(off, n, r, skipped) {
			if from >= 0 {
				damage = append(damage, Damage{from, off})
				from = -1
			}
			off += n
			end = off
			continue
		}
		if from < 0 {
			from = off
		}
		off++
	}
	if from >= 0 {
		damage = append(damage, Damage{from, len(b)})
	}
	return end, damage
}

// Bytes is how many bytes the ranges hold.
func Bytes(damage []Damage) int {
	n := 0
	for _, d := range damage {
		n += d.To - d.From
	}
	return n
}

// Warn logs the ranges of file dropped as damaged (the first few of
// them).
func Warn(log *zap.Logger, file string, damage []Damage) {
	if len(damage) > 0 {
		log.Warn("damage dropped", zap.String("file", file), zap.Reflect("ranges", damage[:min(len(damage), 8)]))
	}
}
