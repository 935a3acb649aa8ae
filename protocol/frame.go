package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Framer reads and writes frames on one stream. A frame is a 4-byte
// big-endian length followed by that many bytes: a type byte and the
// message's CBOR. The length is checked against the limit before anything is
// allocated for the frame. Read is for one goroutine; Write may be called
// from many.
type Framer struct {
	r   io.Reader // a *bufio.Reader, or the stream itself (NewStreamFramer)
	max int

	mu sync.Mutex
	w  io.Writer
}

// readBuffer is a Framer's read buffer: one usual frame (a job, a return,
// an ack) in one read. A larger frame is read straight into its own
// buffer. A master holds one Framer per agent, so this is paid ten
// thousand times over (a relay's per-device Framers have none:
// NewStreamFramer).
const readBuffer = 1 << 10

// NewFramer returns a Framer on rw whose frames are at most maxFrame bytes
// (DefaultMaxFrame if maxFrame is 0).
func NewFramer(rw io.ReadWriter, maxFrame int) *Framer {
	return &Framer{r: bufio.NewReaderSize(rw, readBuffer), w: rw, max: frameLimit(maxFrame)}
}

func frameLimit(maxFrame int) int {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	return max(maxFrame, MinMaxFrameLimit)
}

// NewStreamFramer is NewFramer without a read buffer of its own, for a
// QUIC stream: the stream holds what arrived until it is read, so a buffer
// saves no system call, only a copy, and a frame costs two reads of it (the
// length, then the body) instead of one. A relay keeps two streams per
// device open for as long as the device is connected: that is readBuffer
// and a bufio.Reader, about 1.1 KiB, twice per device.
func NewStreamFramer(rw io.ReadWriter, maxFrame int) *Framer {
	return &Framer{r: rw, w: rw, max: frameLimit(maxFrame)}
}

// ReadFrame reads one frame body. A frame over the limit is a *ProtoError of
// KindTooLarge and the stream cannot be used after it.
func (f *Framer) ReadFrame() ([]byte, error) {
	return f.ReadFrameMax(f.max)
}

// ReadFrameMax is ReadFrame with a lower limit for this one frame (the
// Framer's limit if limit is larger): for the first message of a
// connection, which comes before the peer's key is checked (MaxHelloFrame).
func (f *Framer) ReadFrameMax(limit int) ([]byte, error) {
	limit = min(limit, f.max)
	var hdr [4]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil, Errorf(KindMalformed, "empty frame")
	}
	if uint64(n) > uint64(limit) {
		return nil, Errorf(KindTooLarge, "frame of %d bytes, limit %d", n, limit)
	}
	// The buffer grows with the bytes that actually arrive, so a peer that
	// announces a large frame and sends nothing more holds only frameChunk.
	buf := make([]byte, min(int(n), frameChunk))
	got := 0
	for {
		m, err := io.ReadFull(f.r, buf[got:])
		got += m
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read frame body: %w", err)
		}
		if got == int(n) {
			return buf, nil
		}
		buf = append(buf, make([]byte, min(int(n)-got, len(buf)))...)
	}
}

// frameChunk is the most ReadFrame allocates for a frame before its bytes arrive.
const frameChunk = 64 << 10

// Read reads and decodes one message.
func (f *Framer) Read() (Message, error) {
	b, err := f.ReadFrame()
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// WriteFrame writes one frame body.
func (f *Framer) WriteFrame(body []byte) error {
	if len(body) == 0 {
		return Errorf(KindMalformed, "empty frame")
	}
	if len(body) > f.max {
		return Errorf(KindTooLarge, "frame of %d bytes, limit %d", len(body), f.max)
	}
	// One Write per frame, so the transport can put a small frame in one
	// packet instead of a packet for the length and one for the body.
	buf := AppendFrame(make([]byte, 0, 4+len(body)), body)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.w.Write(buf)
	return err
}

// Write encodes and writes one message.
func (f *Framer) Write(m Message) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	return f.WriteFrame(b)
}

// AppendFrame appends body as a frame (its 4-byte length, then body) to
// dst: the bytes WriteFrame writes, for a sender that writes them itself.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}
