package state

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/halite-fleet/halite/agent/blob"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/state"
)

// chunkHost is a Host that fetches files by manifest as the agent does
// (blob.Client), from chunks held in memory by hash: what a relay's cache
// or the master's index would answer. tamper alters every chunk served.
type chunkHost struct {
	Host
	mu     sync.Mutex
	chunks map[string][]byte
	asked  int
	tamper bool
}

func newChunkHost(t *testing.T) *chunkHost {
	return &chunkHost{Host: newHost(t), chunks: map[string][]byte{}}
}

func (h *chunkHost) Fetcher() blob.Fetcher {
	return &blob.Client{Get: func(ctx context.Context, hash []byte) ([]byte, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.asked++
		b, ok := h.chunks[hex.EncodeToString(hash)]
		if !ok {
			return nil, blob.ErrNotServed
		}
		if h.tamper {
			b = append([]byte{b[0] ^ 1}, b[1:]...)
		}
		return b, nil
	}, Retry: 1}
}

// serve makes data servable and returns its "__files__" entry, as the
// master's fileserver.Inline writes one for a file too large for the job.
func (h *chunkHost) serve(t *testing.T, data []byte) map[string]any {
	t.Helper()
	m, err := protocol.NewManifest(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range m.Chunks {
		off := i * protocol.ChunkSize
		h.chunks[hex.EncodeToString(m.Chunks[i])] = data[off : off+m.ChunkLen(i)]
	}
	return map[string]any{"manifest": m.Any(), "sha256": hex.EncodeToString(m.SHA256)}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestRecurseByManifest: file.recurse of a directory whose big file came
// as a manifest (over the master's 1 MiB inline limit) fetches it by
// chunks beside the inline files; without a fetching host, with a relay
// that alters chunks, or for a file the master could not offer at all,
// the state fails naming the file.
func TestRecurseByManifest(t *testing.T) {
	h := newChunkHost(t)
	big := randomBytes(3<<20 + 12345)
	fs := map[string]any{"salt://site/big/blob.bin": h.serve(t, big)}
	for k, v := range files("salt://site/a.txt", "a\n") {
		fs[k] = v
	}
	args := map[string]any{"source": "salt://site", "__files__": fs, "__dirs__": []any{"salt://site", "salt://site/big"}}
	dst := filepath.Join(t.TempDir(), "site")
	r := apply(t, h, "file.recurse", dst, false, args)
	if r.Result != state.True || r.Comment != "Recursively updated "+dst {
		t.Fatalf("file.recurse: %v %q", r.Result.Value(), r.Comment)
	}
	if got := readFile(t, filepath.Join(dst, "big", "blob.bin")); got != string(big) {
		t.Errorf("big/blob.bin: %d bytes, want the %d fetched", len(got), len(big))
	}
	if got := readFile(t, filepath.Join(dst, "a.txt")); got != "a\n" {
		t.Errorf("a.txt %q", got)
	}
	if want := (len(big) + protocol.ChunkSize - 1) / protocol.ChunkSize; h.asked != want {
		t.Errorf("asked for %d chunks, want %d", h.asked, want)
	}
	if r := apply(t, h, "file.recurse", dst, false, args); r.Comment != "The directory "+dst+" is in the correct state" {
		t.Errorf("again: %q", r.Comment)
	}

	for _, tc := range []struct {
		name string
		host Host
		args map[string]any
		want string
	}{
		{"no fetcher", newHost(t), args,
			"Source file salt://site/big/blob.bin is too large to come with the job (1 MiB a file, 3 MiB a job), and this host cannot fetch it from the master"},
		{"tampering", &chunkHost{Host: newHost(t), chunks: h.chunks, tamper: true}, args,
			"Unable to fetch salt://site/big/blob.bin from the master: fetch "},
		{"not served", newChunkHost(t), args,
			"Unable to fetch salt://site/big/blob.bin from the master: fetch "},
		{"too large", h, map[string]any{"source": "salt://site", "__files__": files("salt://site/a.txt", "a\n"),
			"__files_too_large__": []any{"salt://site/t.bin"}, "__dirs__": []any{"salt://site"}},
			"Source file salt://site/t.bin is too large to come with the job (1 MiB a file, 3 MiB a job)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "site")
			r := apply(t, tc.host, "file.recurse", d, false, tc.args)
			if r.Result != state.False || !strings.Contains(r.Comment, tc.want) {
				t.Errorf("got %v %q, want a failure saying %q", r.Result.Value(), r.Comment, tc.want)
			}
			if tc.name == "tampering" && !strings.Contains(r.Comment, blob.ErrTampered.Error()) {
				t.Errorf("comment %q does not say the chunks were altered", r.Comment)
			}
			if lexists(filepath.Join(d, "big", "blob.bin")) {
				t.Error("the file was written")
			}
		})
	}
}

// TestManagedTooLarge: file.managed of a file the master could neither
// inline nor offer by chunks fails saying so, not "not found"; one the
// master does not have still says "not found".
func TestManagedTooLarge(t *testing.T) {
	h := newHost(t)
	dst := filepath.Join(t.TempDir(), "f")
	r := apply(t, h, "file.managed", dst, false, map[string]any{"source": "salt://big.conf", "__files_too_large__": []any{"salt://big.conf"}})
	if r.Result != state.False || r.Comment != tooLargeComment("salt://big.conf") {
		t.Errorf("too large: %v %q", r.Result.Value(), r.Comment)
	}
	r = apply(t, h, "file.managed", dst, false, map[string]any{"source": []any{"salt://gone", "salt://big.conf"},
		"__files_missing__": []any{"salt://gone"}, "__files_too_large__": []any{"salt://big.conf"}})
	if r.Result != state.False || r.Comment != tooLargeComment("salt://big.conf") {
		t.Errorf("source list: %v %q", r.Result.Value(), r.Comment)
	}
	r = apply(t, h, "file.managed", dst, false, map[string]any{"source": "salt://gone", "__files_missing__": []any{"salt://gone"}})
	if r.Comment != "Source file salt://gone not found in saltenv 'base'" {
		t.Errorf("missing: %q", r.Comment)
	}
}

// TestCmdScriptByManifest: a script over the inline limit comes by
// manifest and runs; one too large for either fails with cache_error.
func TestCmdScriptByManifest(t *testing.T) {
	h := &chunkHost{Host: newSysHost(t), chunks: map[string][]byte{}}
	script := []byte("#!/bin/sh\necho \"big $1\"\nexit 0\n# " + strings.Repeat("x", 1<<20+100) + "\n")
	fs := map[string]any{"salt://scripts/big.sh": h.serve(t, script)}
	r := apply(t, h, "cmd.script", "salt://scripts/big.sh arg1", false, map[string]any{"__files__": fs})
	if r.Result != state.True || r.Changes["stdout"] != "big arg1" {
		t.Fatalf("cmd.script by manifest: %v %q %v", r.Result.Value(), r.Comment, r.Changes)
	}
	r = apply(t, newSysHost(t), "cmd.script", "salt://scripts/big.sh", false, map[string]any{"__files__": fs})
	if r.Result != state.False || r.Changes["cache_error"] != true || !strings.Contains(r.Comment, "salt://scripts/big.sh is too large to come with the job (1 MiB a file") {
		t.Errorf("no fetcher: %v %q %v", r.Result.Value(), r.Comment, r.Changes)
	}
	r = apply(t, h, "cmd.script", "run", false, map[string]any{"source": "salt://t.sh", "__files_too_large__": []any{"salt://t.sh"}})
	if r.Result != state.False || r.Comment != tooLargeComment("salt://t.sh") {
		t.Errorf("too large: %v %q", r.Result.Value(), r.Comment)
	}
}

// TestArchiveByManifest: archive.extracted of an archive that came by
// manifest.
func TestArchiveByManifest(t *testing.T) {
	h := newChunkHost(t)
	body := hex.EncodeToString(randomBytes(1 << 20)) // 2 MiB, does not compress to nothing
	data := tarGz(t, []entry{{name: "app/", dir: true}, {name: "app/data", body: body}})
	if len(data) <= 1<<20 {
		t.Fatalf("archive of %d bytes: want one over the inline limit", len(data))
	}
	dst := filepath.Join(t.TempDir(), "opt")
	args := map[string]any{"source": "salt://app.tar.gz", "__files__": map[string]any{"salt://app.tar.gz": h.serve(t, data)}}
	r := apply(t, h, "archive.extracted", dst, false, args)
	if r.Result != state.True {
		t.Fatalf("archive.extracted: %v %q", r.Result.Value(), r.Comment)
	}
	if sha256.Sum256([]byte(readFile(t, filepath.Join(dst, "app", "data")))) != sha256.Sum256([]byte(body)) {
		t.Error("app/data differs from the archive's")
	}
	r = apply(t, newHost(t), "archive.extracted", filepath.Join(t.TempDir(), "o"), false, args)
	if r.Result != state.False || !strings.Contains(r.Comment, "salt://app.tar.gz is too large to come with the job (1 MiB a file") {
		t.Errorf("no fetcher: %v %q", r.Result.Value(), r.Comment)
	}
}
