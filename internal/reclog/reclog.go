// Package reclog is the record framing of Halite's append-only logs: the
// agent's outbox spool and the relay's spool of returns and events. A
// record is its length and a CRC-32 (Castagnoli) of what follows, then a
// kind byte, a sequence number and a body. A log is read from its start to
// its first record that is short or does not match its CRC: a crash in the
// middle of a write leaves a torn last record, which is simply not there.
package reclog

import (
	"encoding/binary"
	"hash/crc32"
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
