package state

// A small zip reader for archive.extracted: the central directory, stored
// and deflated members, CRC-checked. archive/zip registers flate's
// compressor at init and so links it into the agent (about 130 KB on
// armv7 with bzip2); this reads what archive.extracted needs and refuses
// the rest (zip64, encryption, other methods) with a comment.

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"strings"
	"time"
)

const (
	zipEOCDSig  = 0x06054b50
	zipCDSig    = 0x02014b50
	zipLocalSig = 0x04034b50
)

// errZipEncrypted is Salt's password-protected archive case.
var errZipEncrypted = fmt.Errorf("the zip archive is password-protected")

func readZip(data []byte) ([]member, error) {
	le := binary.LittleEndian
	// The end of central directory record: 22 bytes and a comment of at
	// most 65535 bytes, at the end.
	start := len(data) - 22 - 65535
	if start < 0 {
		start = 0
	}
	eocd := -1
	for i := len(data) - 22; i >= start; i-- {
		if le.Uint32(data[i:]) == zipEOCDSig {
			eocd = i
			break
		}
	}
	if eocd < 0 {
		return nil, fmt.Errorf("not a zip archive (no end of central directory)")
	}
	n := int(le.Uint16(data[eocd+10:]))
	size := int64(le.Uint32(data[eocd+12:]))
	off := int64(le.Uint32(data[eocd+16:]))
	if n == 0xffff || size == 0xffffffff || off == 0xffffffff {
		return nil, fmt.Errorf("zip64 archives are not supported on this agent")
	}
	if off+size > int64(eocd) || off < 0 {
		return nil, fmt.Errorf("the zip central directory is out of bounds")
	}
	cd := data[off : off+size]
	var out []member
	var total int64
	for i := 0; i < n; i++ {
		if len(cd) < 46 || le.Uint32(cd) != zipCDSig {
			return nil, fmt.Errorf("the zip central directory is damaged")
		}
		made := cd[5]
		flags := le.Uint16(cd[8:])
		method := le.Uint16(cd[10:])
		dtime, ddate := le.Uint16(cd[12:]), le.Uint16(cd[14:])
		crc := le.Uint32(cd[16:])
		csize, usize := int64(le.Uint32(cd[20:])), int64(le.Uint32(cd[24:]))
		nl, el, cl := int(le.Uint16(cd[28:])), int(le.Uint16(cd[30:])), int(le.Uint16(cd[32:]))
		ext := le.Uint32(cd[38:])
		loff := int64(le.Uint32(cd[42:]))
		if len(cd) < 46+nl+el+cl {
			return nil, fmt.Errorf("the zip central directory is damaged")
		}
		name := string(cd[46 : 46+nl])
		cd = cd[46+nl+el+cl:]
		if flags&1 != 0 {
			return nil, errZipEncrypted
		}
		if csize == 0xffffffff || usize == 0xffffffff || loff == 0xffffffff {
			return nil, fmt.Errorf("zip64 archives are not supported on this agent")
		}
		m := member{raw: name, kind: 'f', mode: 0o644}
		if ddate != 0 {
			m.mtime = time.Date(int(ddate>>9)+1980, time.Month(ddate>>5&0xf), int(ddate&0x1f),
				int(dtime>>11), int(dtime>>5&0x3f), int(dtime&0x1f)*2, 0, time.Local)
		}
		unixMode := uint32(0)
		if made == 3 { // made on Unix: the mode is in the high bits
			unixMode = ext >> 16
			if p := fs.FileMode(unixMode & 0o777); p != 0 {
				m.mode = p
			}
		}
		switch {
		case unixMode&0o170000 == 0o120000:
			m.kind = 'l'
		case unixMode&0o170000 == 0o040000 || strings.HasSuffix(name, "/"):
			m.kind = 'd'
		}
		// The local header says where the data starts.
		if loff < 0 || loff+30 > int64(len(data)) || le.Uint32(data[loff:]) != zipLocalSig {
			return nil, fmt.Errorf("the zip member %s has no local header", name)
		}
		dstart := loff + 30 + int64(le.Uint16(data[loff+26:])) + int64(le.Uint16(data[loff+28:]))
		if dstart+csize > int64(len(data)) {
			return nil, fmt.Errorf("the zip member %s is truncated", name)
		}
		raw := data[dstart : dstart+csize]
		if method != 0 && method != 8 {
			return nil, fmt.Errorf("the zip member %s uses compression method %d (stored and deflated are supported)", name, method)
		}
		total += usize
		if total > maxArchiveBytes {
			return nil, fmt.Errorf("the archive would extract to more than %d bytes", maxArchiveBytes)
		}
		open := func() (io.Reader, error) {
			var r io.Reader = bytes.NewReader(raw)
			if method == 8 {
				r = flate.NewReader(r)
			}
			b, err := io.ReadAll(io.LimitReader(r, usize+1))
			if err != nil {
				return nil, fmt.Errorf("unable to inflate: %w", err)
			}
			if int64(len(b)) != usize || crc32.ChecksumIEEE(b) != crc {
				return nil, fmt.Errorf("size or checksum does not match the zip directory")
			}
			return bytes.NewReader(b), nil
		}
		switch m.kind {
		case 'l':
			r, err := open()
			if err != nil {
				return nil, fmt.Errorf("the zip member %s: %w", name, err)
			}
			b, _ := io.ReadAll(io.LimitReader(r, 4096))
			m.linkname = string(b)
		case 'f':
			m.open = open
		}
		out = append(out, m)
	}
	return out, nil
}
