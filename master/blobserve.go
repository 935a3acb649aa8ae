package master

import (
	"errors"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/master/blobs"
	"github.com/halite-fleet/halite/protocol"
)

// Serving chunks by hash (protocol.BlobGet): an agent, or a relay for a
// device behind it, asks on the device's session for a chunk of a file
// the master indexed (Master.Blobs: salt:// files, agent builds); the
// master reads it from disk, checks it, and answers with a BlobData of the
// same Req. What a chunk costs the master is bounded twice: a session may
// have maxSessionBlobs BlobGets not yet answered (more are refused at
// once: the agent asks again), and blobSlots chunks, master-wide, may be
// read and not yet handed to QUIC (the rest wait for a slot). A slot is
// held until the chunk leaves the session's send queue, so a device that
// does not read its chunks holds slots, not the master's memory.

const (
	// maxSessionBlobs bounds the BlobGets of one session in flight. An
	// agent asks for a few chunks at a time, a relay for a few per device.
	maxSessionBlobs = 16
	// blobSlots bounds the chunks read and not yet written, master-wide:
	// 64 × 256 KiB = 16 MiB.
	blobSlots = 64
)

// answerBlobGet answers g on s in the background.
func (m *Master) answerBlobGet(s *session, g *protocol.BlobGet) {
	if s.blobPending.Add(1) > maxSessionBlobs {
		s.blobPending.Add(-1)
		m.sendBlob(s, &protocol.BlobData{Req: g.Req, Err: "busy: more than 16 chunks asked at once"}, nil)
		return
	}
	m.connWG.Add(1)
	go func() {
		defer m.connWG.Done()
		select {
		case m.blobSlots <- struct{}{}:
		case <-s.done:
			s.blobPending.Add(-1)
			return
		case <-m.closing:
			s.blobPending.Add(-1)
			return
		}
		release := func() {
			<-m.blobSlots
			s.blobPending.Add(-1)
		}
		reply := &protocol.BlobData{Req: g.Req}
		data, err := m.blobs.Read(g.Hash)
		switch {
		case errors.Is(err, blobs.ErrUnknown):
			reply.Err = protocol.BlobErrUnknown + ": the master serves no file that holds it"
		case err != nil:
			reply.Err = "chunk not read"
			s.log.Warn("read chunk", zap.Error(err))
		default:
			reply.Data = data
			m.metrics.blobBytes.Add(float64(len(data)))
		}
		m.sendBlob(s, reply, release)
	}()
}

// sendBlob sends d on s; release, if not nil, is called once the frame is
// handed to QUIC, or dropped with the session.
func (m *Master) sendBlob(s *session, d *protocol.BlobData, release func()) {
	b, err := protocol.Encode(d)
	if err != nil {
		s.log.Warn("encode chunk", zap.Error(err))
		if release != nil {
			release()
		}
		return
	}
	if release == nil {
		s.send(b)
		return
	}
	if !s.sendHeld(protocol.AppendFrame(make([]byte, 0, 4+len(b)), b), release) {
		release()
	}
}

// sendHeld is sendWire for a frame that holds release until it leaves the
// send queue (writeOut calls it then; dropQueuedBlobs when the session
// ends first). False: not sent, and release not called.
func (s *session) sendHeld(wire []byte, release func()) bool {
	s.sendMu.Lock()
	select {
	case <-s.done:
		s.sendMu.Unlock()
		return false
	default:
	}
	if s.queued == 0 {
		err := s.stream.TryWriteAll(wire)
		if err == nil {
			s.sendMu.Unlock()
			release()
			return true
		}
		if !errors.Is(err, quic.ErrWouldBlock) {
			s.sendMu.Unlock()
			s.close(protocol.KindOther, "write: "+err.Error())
			return false
		}
	}
	if !s.enqueue(wire) {
		s.sendMu.Unlock()
		s.close(protocol.KindRateLimited, "send queue full")
		return false
	}
	if s.blobQueued == nil {
		s.blobQueued = make(map[*byte]func())
	}
	s.blobQueued[&wire[0]] = release
	s.sendMu.Unlock()
	return true
}

// dropQueuedBlobs releases the chunks left in s's send queue when it ended
// (its writer has returned).
func (s *session) dropQueuedBlobs() {
	s.sendMu.Lock()
	q := s.blobQueued
	s.blobQueued = nil
	s.sendMu.Unlock()
	for _, release := range q {
		release()
	}
}
