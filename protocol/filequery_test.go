package protocol

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFileQueryRoundTrip(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, MinFileNonce)
	for _, m := range []Message{
		&FileQuery{Req: 1, Op: FileFind, Path: "salt://a/b.conf", Nonce: nonce},
		&FileQuery{Req: 2, Op: FileList, Path: "web", Saltenv: "prod", Nonce: nonce},
		&FileQuery{Req: 3, Op: FileDirs, Nonce: nonce},
		&FileQuery{Req: 4, Op: FileDir, Path: "salt://web?saltenv=dev", Nonce: nonce},
		&FileQuery{Req: 5, Op: FileHash, Path: "salt://x", Nonce: nonce},
		&FileQuery{Req: 6, Op: FileTemplate, Path: "salt://t", Nonce: nonce, Context: map[string]any{"port": int64(80)}},
		&FileAnswer{Req: 1, Signed: Signed{Body: []byte{0xa0}, Sig: make([]byte, 64)}},
		&FileAnswer{Req: 2, Err: "the relay cannot reach the master now"},
	} {
		roundTrip(t, m)
	}
}

func TestFileQueryLimits(t *testing.T) {
	nonce := make([]byte, MinFileNonce)
	for _, tc := range []struct {
		name string
		m    Message
		kind Kind
	}{
		{"unknown op", &FileQuery{Req: 1, Op: "rm", Nonce: nonce}, KindMalformed},
		{"no op", &FileQuery{Req: 1, Nonce: nonce}, KindMalformed},
		{"short nonce", &FileQuery{Req: 1, Op: FileFind, Nonce: nonce[:MinFileNonce-1]}, KindMalformed},
		{"long nonce", &FileQuery{Req: 1, Op: FileFind, Nonce: make([]byte, MaxFileNonce+1)}, KindMalformed},
		{"long path", &FileQuery{Req: 1, Op: FileFind, Path: strings.Repeat("a", MaxFilePath+1), Nonce: nonce}, KindTooLarge},
		{"long saltenv", &FileQuery{Req: 1, Op: FileList, Saltenv: strings.Repeat("e", MaxFileEnv+1), Nonce: nonce}, KindTooLarge},
		{"context off a template", &FileQuery{Req: 1, Op: FileFind, Nonce: nonce, Context: map[string]any{"a": int64(1)}}, KindMalformed},
		{"large context", &FileQuery{Req: 1, Op: FileTemplate, Nonce: nonce,
			Context: map[string]any{"x": strings.Repeat("v", MaxFileContext)}}, KindTooLarge},
		{"empty answer", &FileAnswer{Req: 1}, KindMalformed},
		{"answer and error", &FileAnswer{Req: 1, Signed: Signed{Body: []byte{0xa0}, Sig: make([]byte, 64)}, Err: "x"}, KindMalformed},
		{"long error", &FileAnswer{Req: 1, Err: strings.Repeat("e", MaxFileErr+1)}, KindTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(b)
			if err == nil {
				t.Fatalf("Decode = %#v, want an error", m)
			}
			wantKind(t, err, tc.kind)
		})
	}
}

func TestFileAnswerSigned(t *testing.T) {
	m, err := NewManifest(bytes.NewReader(bytes.Repeat([]byte("x"), ChunkSize+10)))
	if err != nil {
		t.Fatal(err)
	}
	body := &FileAnswerBody{ID: "cam1", Nonce: bytes.Repeat([]byte{1}, MinFileNonce), Op: FileDir, Path: "salt://web",
		Env: "base", Files: []FileEntry{{Path: "web/big", Manifest: &m}}, Dirs: []string{"web/empty"}}
	s, err := SignFileAnswer(fuzzKey, body)
	if err != nil {
		t.Fatal(err)
	}
	pub := fuzzKey.Public().(ed25519.PublicKey)
	got, err := OpenFileAnswer(pub, s)
	if err != nil {
		t.Fatalf("OpenFileAnswer: %v", err)
	}
	if d := cmp.Diff(body, got); d != "" {
		t.Errorf("opened body differs (-want +got):\n%s", d)
	}

	// A relay that changes one byte of the body, or signs with its own
	// key, or swaps the signature for a MAC tag, is refused.
	bad := Signed{Body: bytes.Clone(s.Body), Sig: s.Sig}
	bad.Body[len(bad.Body)-1] ^= 1
	if _, err := OpenFileAnswer(pub, bad); err == nil {
		t.Error("a changed body opened")
	} else {
		wantKind(t, err, KindBadSig)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
	forged, err := SignFileAnswer(other, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileAnswer(pub, forged); err == nil {
		t.Error("an answer signed by another key opened")
	}
	if _, err := OpenFileAnswer(pub, Signed{Body: s.Body, Sig: make([]byte, 32)}); err == nil {
		t.Error("an answer with a MAC-sized tag opened")
	}
	// A job signature does not verify as a file answer (domains differ).
	job, err := SignJob(fuzzKey, &JobBody{JID: "20261127000000000000", Fun: "test.ping"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileAnswer(pub, job.Signed); err == nil {
		t.Error("a signed job opened as a file answer")
	}
}

func TestFileAnswerBodyBounds(t *testing.T) {
	good, err := NewManifest(bytes.NewReader([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	short := good
	short.Chunks = nil
	for _, tc := range []struct {
		name string
		b    FileAnswerBody
	}{
		{"unknown op", FileAnswerBody{Op: "x"}},
		{"bad manifest", FileAnswerBody{Op: FileFind, Files: []FileEntry{{Path: "a", Manifest: &short}}}},
		{"empty path", FileAnswerBody{Op: FileFind, Files: []FileEntry{{Manifest: &good}}}},
		{"short hash", FileAnswerBody{Op: FileHash, Files: []FileEntry{{Path: "a", SHA256: []byte{1}}}}},
		{"empty dir", FileAnswerBody{Op: FileDirs, Dirs: []string{""}}},
		{"too many", FileAnswerBody{Op: FileList, Dirs: make([]string, MaxFileEntries+1)}},
		{"large template", FileAnswerBody{Op: FileTemplate, Sealed: make([]byte, MaxTemplate+SealOverhead+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := SignFileAnswer(fuzzKey, &tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := OpenFileAnswer(fuzzKey.Public().(ed25519.PublicKey), s); err == nil {
				t.Error("opened, want an error")
			}
		})
	}
}

// FuzzFileAnswerBody opens arbitrary bytes signed as a file answer: the
// body's decoder and bounds never panic, and what opens is within bounds.
func FuzzFileAnswerBody(f *testing.F) {
	f.Add(seedFileAnswer(f).Body)
	f.Add([]byte{0xa0})
	f.Add([]byte{0xa1, 0x07, 0x9a, 0xff, 0xff, 0xff, 0xff}) // a huge array header
	pub := fuzzKey.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		s := Signed{Body: body, Sig: ed25519.Sign(fuzzKey, append([]byte(domainFile), body...))}
		b, err := OpenFileAnswer(pub, s)
		if err != nil {
			return
		}
		if len(b.Files) > MaxFileEntries || len(b.Dirs) > MaxFileEntries {
			t.Fatalf("opened %d files, %d dirs", len(b.Files), len(b.Dirs))
		}
	})
}
