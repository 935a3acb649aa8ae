package protocol

import (
	"bytes"
	"crypto/ed25519"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzKey signs the seed jobs, returns and events, so that the fuzzer starts
// from messages that open.
var fuzzKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))

// seedMessages returns a valid instance of every message type.
func seedMessages(tb testing.TB) []Message {
	tb.Helper()
	job, err := SignJob(fuzzKey, testJobBody())
	if err != nil {
		tb.Fatal(err)
	}
	compound, err := SignJob(fuzzKey, testCompoundJobBody())
	if err != nil {
		tb.Fatal(err)
	}
	ret, err := SignReturn(fuzzKey, testReturnBody())
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := SignEvent(fuzzKey, testEventBody())
	if err != nil {
		tb.Fatal(err)
	}
	return []Message{
		&Hello{ID: "web01", Version: "1.0", Caps: CapabilityVersion, Relay: true,
			Grains: map[string]any{"os": "Debian", "cpus": int64(4), "ip": []any{"10.0.0.1"}, "f": 1.5, "b": []byte{1}, "n": nil}},
		&KeyStatus{Status: KeyAccepted, MasterID: "master1", Caps: 1},
		job, compound, ret, ev,
		&Grains{Grains: map[string]any{"os": "Debian", "nested": map[string]any{"a": []any{true, false}}}},
		&Ping{Seq: 1}, &Pong{Seq: 1 << 40}, &Error{Kind: KindNotAccepted, Msg: "pending"}, &Ack{Seq: 3},
		&Hello{ID: "cam1", Caps: CapabilityVersion, Pub: fuzzKey.Public().(ed25519.PublicKey), KX: make([]byte, 32), KXSig: make([]byte, 64)},
		&KeyStatus{Status: KeyPending, Caps: CapabilityVersion, MasterKey: fuzzKey.Public().(ed25519.PublicKey)},
		&Job{Signed: job.Signed, IDs: []string{"cam1"}},
		testBatch(tb),
		&MineGet{Req: 7, Tgt: "web*", Fun: "network.ip_addrs,grains.items", TgtType: "glob"},
		&MineData{Req: 7, Data: map[string]any{"web1": []any{"10.0.0.1"}}},
		&MineData{Req: 8, Err: "no master"},
		&StateGet{Req: 9, Fun: "state.apply", Arg: []any{"web"}, Kwarg: map[string]any{"test": true}, Nonce: make([]byte, MinStateNonce)},
		&StateJob{Req: 9, Job: job.Signed},
		&StateJob{Req: 10, Err: "not compiled"},
		&BlobGet{Req: 11, Hash: bytes.Repeat([]byte{0xab}, BlobHashSize)},
		&BlobData{Req: 11, Data: []byte("a chunk of a file")},
		&BlobData{Req: 12, Err: "unknown chunk"},
		&PillarGet{Req: 11, Nonce: make([]byte, MinPillarNonce)},
		&PillarData{Req: 11, Sealed: make([]byte, SealOverhead+8)},
		&PillarData{Req: 12, Err: "pillar of web1 failed"},
		&FileQuery{Req: 13, Op: FileFind, Path: "salt://web/app.conf?saltenv=prod", Nonce: make([]byte, MinFileNonce)},
		&FileQuery{Req: 14, Op: FileTemplate, Path: "salt://t.j2", Nonce: make([]byte, MinFileNonce), Context: map[string]any{"port": 80}},
		&FileAnswer{Req: 13, Signed: seedFileAnswer(tb)},
		&FileAnswer{Req: 14, Err: "the relay cannot reach the master now"},
	}
}

// seedFileAnswer is a signed FileAnswerBody with a file by manifest.
func seedFileAnswer(tb testing.TB) Signed {
	tb.Helper()
	m, err := NewManifest(bytes.NewReader([]byte("hello")))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := SignFileAnswer(fuzzKey, &FileAnswerBody{ID: "cam1", Nonce: make([]byte, MinFileNonce), Op: FileDir,
		Path: "salt://web", Files: []FileEntry{{Path: "web/a", Manifest: &m}}, Dirs: []string{"web/empty"}})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// seedFrames returns frame bodies: valid, truncated, oversized and of the
// wrong type.
func seedFrames(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, m := range seedMessages(tb) {
		b, err := Encode(m)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b, b[:len(b)/2], b[:1])
		wrong := append([]byte(nil), b...)
		wrong[0] = byte(TypeHello) + (wrong[0] % 9) // another message's type
		out = append(out, wrong)
		// The signed bodies alone, behind each type byte.
		if s, ok := m.(interface{ signed() *Signed }); ok {
			out = append(out, append([]byte{b[0]}, s.signed().Body...))
		}
	}
	return append(out,
		nil,
		[]byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x61, 'a', 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		grainsFrame(append(cborHead(2, 1<<40), 1)),
		grainsFrame(nested(MaxNesting+1)),
		[]byte{byte(TypePing), 0xd9, 0xd9, 0xf7, 0xa1, 0x01, 0x01},
		[]byte{99, 0xa0},
	)
}

func (s *Signed) signed() *Signed { return s }

// checkStable re-encodes v (already decoded from fuzz input), decodes it again
// into a fresh value made by fresh and checks the two decodings are equal
// and that the encoding is stable.
func checkStable[T any](t *testing.T, v *T) {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(decoded %T): %v", v, err)
	}
	w := new(T)
	if err := Unmarshal(b, w); err != nil {
		t.Fatalf("Unmarshal(Marshal(decoded %T)) = %v, input %x", v, err, b)
	}
	if diff := cmp.Diff(v, w, sameValue); diff != "" {
		t.Fatalf("decode(encode(decoded %T)) differs (-first +second):\n%s", v, diff)
	}
	b2, err := Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("encoding of %T not stable:\n%x\n%x", v, b, b2)
	}
}

func FuzzDecode(f *testing.F) {
	for _, b := range seedFrames(f) {
		f.Add(b)
	}
	pub := fuzzKey.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeLink(data) // every message, Batch too
		if err == nil {
			b, err := Encode(m)
			if err != nil {
				t.Fatalf("Encode(Decode(%x)): %v", data, err)
			}
			m2, err := DecodeLink(b)
			if err != nil {
				t.Fatalf("Decode(Encode(Decode(%x))) = %v, re-encoded %x", data, err, b)
			}
			if diff := cmp.Diff(m, m2, sameValue); diff != "" {
				t.Fatalf("Decode(Encode(m)) differs from m (-m +again):\n%s", diff)
			}
			b2, err := Encode(m2)
			if err != nil || !bytes.Equal(b, b2) {
				t.Fatalf("encoding not stable: %x then %x (%v)", b, b2, err)
			}
			// Opening must not panic whatever the body; checkStable below
			// covers the bodies' decoding.
			switch m := m.(type) {
			case *Job:
				m.Open(pub)
			case *Return:
				m.Open(pub, "web01")
			case *Event:
				m.Open(pub, "web01")
			case *Batch:
				for _, it := range m.Items {
					Decode(it.Frame) // must not panic
				}
			}
		} else if KindOf(err) == KindOther {
			t.Fatalf("Decode(%x): error %v has no kind", data, err)
		}
		// The fuzz input also stands for a signed body, and for the
		// Unmarshal of any value.
		if len(data) == 0 {
			return
		}
		body := data[1:]
		var jb JobBody
		if Unmarshal(body, &jb) == nil {
			checkStable(t, &jb)
		}
		var rb ReturnBody
		if Unmarshal(body, &rb) == nil {
			checkStable(t, &rb)
		}
		var eb EventBody
		if Unmarshal(body, &eb) == nil {
			checkStable(t, &eb)
		}
		var v any
		if Unmarshal(body, &v) == nil {
			checkStable(t, &v)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	for _, b := range seedFrames(f) {
		var buf bytes.Buffer
		w := NewFramer(&buf, 0)
		if len(b) > 0 {
			w.WriteFrame(b)
			w.WriteFrame(b)
		}
		f.Add(buf.Bytes())
		f.Add(buf.Bytes()[:buf.Len()/2])
	}
	f.Add(header(0))
	f.Add(header(MinMaxFrameLimit + 1))
	f.Add(append(header(1<<32-1), 1, 2, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewFramer(rw{bytes.NewReader(data), io.Discard}, MinMaxFrameLimit)
		var again bytes.Buffer
		w := NewFramer(&again, MinMaxFrameLimit)
		for {
			b, err := r.ReadFrame()
			if err != nil {
				break
			}
			if len(b) == 0 || len(b) > MinMaxFrameLimit {
				t.Fatalf("ReadFrame returned %d bytes, limit %d", len(b), MinMaxFrameLimit)
			}
			Decode(b) // must not panic
			if err := w.WriteFrame(b); err != nil {
				t.Fatalf("WriteFrame(frame just read): %v", err)
			}
		}
		// The frames read, written again, are the start of the input.
		if !bytes.HasPrefix(data, again.Bytes()) {
			t.Fatalf("frames written again are not a prefix of the input:\n%x\n%x", again.Bytes(), data)
		}
	})
}
