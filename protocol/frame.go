package protocol

import (
	"bufio"
	"bytes"
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
	return f.readFrame(limit, 0)
}

// ReadWire is ReadFrame that returns the whole frame, its 4-byte length
// then its body (AppendFrame's bytes), in one allocation: for a reader
// that passes the frame on as it came (a relay forwarding a device's
// return), which would otherwise copy it to put the length back in front.
func (f *Framer) ReadWire() ([]byte, error) {
	return f.readFrame(f.max, 4)
}

// readFrame reads a frame of at most limit bytes into a new buffer that
// begins with head bytes of its length (0 or 4) and returns the buffer.
func (f *Framer) readFrame(limit, head int) ([]byte, error) {
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
	buf := make([]byte, head+min(int(n), frameChunk))
	copy(buf, hdr[:head])
	got := 0
	for {
		m, err := io.ReadFull(f.r, buf[head+got:])
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
		buf = append(buf, make([]byte, min(int(n)-got, len(buf)-head))...)
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
	buf := getWriteBuf()
	buf.Write(binary.BigEndian.AppendUint32(buf.AvailableBuffer(), uint32(len(body))))
	buf.Write(body)
	return f.writeBuf(buf)
}

// Write encodes and writes one message: encoded straight after the frame's
// length, in a pooled buffer, so that a message costs no allocation of
// its own (Encode's two, and WriteFrame's copy).
func (f *Framer) Write(m Message) error {
	buf := getWriteBuf()
	buf.Write([]byte{0, 0, 0, 0, byte(m.Type())})
	if err := encMode.MarshalToBuffer(m, buf); err != nil {
		putWriteBuf(buf)
		return Errorf(KindMalformed, "encode %s: %v", m.Type(), err)
	}
	n := buf.Len() - 4
	if n > f.max {
		putWriteBuf(buf)
		return Errorf(KindTooLarge, "frame of %d bytes, limit %d", n, f.max)
	}
	binary.BigEndian.PutUint32(buf.Bytes(), uint32(n))
	return f.writeBuf(buf)
}

// writeBuf writes a whole frame, then gives its buffer back to the pool,
// unless the write failed: an io.Writer does not keep what it was given
// once it returns (a QUIC stream has copied it into its frames by then),
// but one that failed may not have let go of it yet.
func (f *Framer) writeBuf(buf *bytes.Buffer) error {
	f.mu.Lock()
	_, err := f.w.Write(buf.Bytes())
	f.mu.Unlock()
	if err == nil {
		putWriteBuf(buf)
	}
	return err
}

// writeBufs are the buffers Write and WriteFrame build frames in. Ones
// that grew past maxPooledWrite (a large return, a file's chunk) are left
// to the collector: the pool keeps those for the jobs, returns and acks
// that go by the thousand, and for a relay's batches of them (64 KiB, its
// default batch_max).
var writeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledWrite = 128 << 10

func getWriteBuf() *bytes.Buffer {
	b := writeBufs.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putWriteBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledWrite {
		writeBufs.Put(b)
	}
}

// AppendFrame appends body as a frame (its 4-byte length, then body) to
// dst: the bytes WriteFrame writes, for a sender that writes them itself.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}
