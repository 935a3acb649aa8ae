package state

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/halite-fleet/halite/agent/blob"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/state"
)

// A salt:// file too large to go inline in the job comes as its manifest
// ("__files__": {url: {"manifest": ..., "sha256": hex}}, the master's
// fileserver.Inline): the state fetches it by chunks through the host's
// Fetcher (the agent's session, through its relay) into the state cache,
// named by its SHA-256 (removed once read; a fetch cut short leaves its
// .part there, and the next run resumes it), and then uses it as if it had
// come inline. The
// manifest is part of the signed job, so what is fetched is what the
// master meant, whoever carries the chunks.

// FetchHost is a Host that can fetch files by manifest (the running
// agent; halite-call through it). A nil Fetcher: not now (a masterless
// halite-call).
type FetchHost interface {
	Fetcher() blob.Fetcher
}

// fetchSources returns ch with the manifests of the salt:// sources in
// urls replaced by the fetched files' bytes, or Salt-style comment saying
// why a file could not be had. A chunk without manifests is returned as
// it is.
func fetchSources(ctx context.Context, c *Call, ch state.Chunk, urls []string) (state.Chunk, string) {
	files, _ := ch["__files__"].(map[string]any)
	var todo []string
	for _, u := range urls {
		if e, ok := files[u].(map[string]any); ok && e["manifest"] != nil {
			todo = append(todo, u)
		}
	}
	if len(todo) == 0 {
		return ch, ""
	}
	fh, ok := c.Host.(FetchHost)
	if !ok || c.Host == nil || fh.Fetcher() == nil {
		return nil, "Source file " + todo[0] + " is too large to come with the job (" + inlineFileLimit + " a file, " + inlineJobLimit +
			" a job), and this host cannot fetch it from the master"
	}
	out := make(state.Chunk, len(ch))
	for k, v := range ch {
		out[k] = v
	}
	nf := make(map[string]any, len(files))
	for k, v := range files {
		nf[k] = v
	}
	out["__files__"] = nf
	for _, u := range todo {
		e := files[u].(map[string]any)
		m, err := protocol.ManifestFromAny(e["manifest"])
		if err != nil {
			return nil, "Source file " + u + ": the master sent a bad manifest: " + err.Error()
		}
		dir := filepath.Join(c.Host.CacheDir(), "files")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "Unable to fetch " + u + ": " + strerror(err)
		}
		p := filepath.Join(dir, hex.EncodeToString(m.SHA256))
		if !cachedWhole(p, m) {
			if err := fh.Fetcher().Fetch(ctx, m, p); err != nil {
				return nil, "Unable to fetch " + u + " from the master: " + err.Error()
			}
		}
		b, err := os.ReadFile(p)
		// The state holds the bytes now; a device's disk is small. An
		// interrupted fetch keeps its .part, to resume from.
		os.Remove(p)
		if err != nil {
			return nil, "Unable to fetch " + u + ": " + strerror(err)
		}
		nf[u] = map[string]any{"data": b, "sha256": hex.EncodeToString(m.SHA256)}
	}
	return out, ""
}

// The master's limits on the salt:// bytes a job carries inline
// (master/fileserver: MaxFileBytes, MaxJobBytes), for messages.
const (
	inlineFileLimit = "1 MiB"
	inlineJobLimit  = "3 MiB"
)

// tooLargeFiles reads the chunk's "__files_too_large__": the salt://
// files the master found but could neither inline nor offer by manifest.
func tooLargeFiles(c state.Chunk) map[string]bool {
	out := map[string]bool{}
	for _, u := range strList(c["__files_too_large__"]) {
		out[u] = true
	}
	return out
}

// tooLargeComment is the state's comment for a file in
// "__files_too_large__".
func tooLargeComment(u string) string {
	return "Source file " + u + " is too large to come with the job (" + inlineFileLimit + " a file, " + inlineJobLimit +
		" a job) and cannot come by chunks (a file rendered with a template is made for each device; a masterless run has no master to fetch from)"
}

// cachedWhole reports whether p holds the file m names (its size; the
// bytes are checked against the sha256 by the state, which fetches again
// on a mismatch by failing: the cache file is removed then).
func cachedWhole(p string, m protocol.Manifest) bool {
	st, err := os.Stat(p)
	if err != nil || st.Size() != m.Size {
		return false
	}
	b, err := os.ReadFile(p)
	if err != nil || hashHex("sha256", b) != hex.EncodeToString(m.SHA256) {
		os.Remove(p)
		return false
	}
	return true
}

// sourceURLs lists the URLs of a source argument: a string, or a list of
// strings and one-key {url: hash} maps.
func sourceURLs(src any, more ...string) []string {
	var out []string
	switch s := src.(type) {
	case string:
		out = append(out, s)
	case []any:
		for _, it := range s {
			switch x := it.(type) {
			case string:
				out = append(out, x)
			case map[string]any:
				for u := range x {
					out = append(out, u)
				}
			}
		}
	}
	return append(out, more...)
}
