package fileserver

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/state"
)

// TestInlineManifest: with Manifests set (the master's blob index), a file
// too large for the job goes as its manifest, and so does one past the
// job's budget; a templated one stays too large (it is rendered per
// device: no file on disk holds it).
func TestInlineManifest(t *testing.T) {
	kib900 := strings.Repeat("k", 900<<10)
	root := tree(t, map[string]string{
		"over": strings.Repeat("o", MaxFileBytes+1), "d/1": kib900, "d/2": kib900, "d/3": kib900, "d/4": kib900,
	})
	s := New(map[string][]string{"base": {root}})
	var indexed []string
	s.Manifests = func(path string) (protocol.Manifest, error) {
		indexed = append(indexed, path)
		f, err := os.Open(path)
		if err != nil {
			return protocol.Manifest{}, err
		}
		defer f.Close()
		return protocol.NewManifest(f)
	}
	over := chunk("file.managed", "source", "salt://over")
	tmpl := chunk("file.managed", "source", "salt://over", "template", "jinja")
	var cs []state.Chunk
	for i := 1; i <= 4; i++ {
		cs = append(cs, chunk("file.managed", "source", "salt://d/"+string(rune('0'+i))))
	}
	all := append([]state.Chunk{over, tmpl}, cs...)
	render := func(string, []byte, map[string]any) ([]byte, error) { return nil, nil }
	if err := s.Inline(all, "base", render); err != nil {
		t.Fatal(err)
	}
	e, _ := over[KeyFiles].(map[string]any)["salt://over"].(map[string]any)
	m, err := protocol.ManifestFromAny(e["manifest"])
	if err != nil || m.Size != MaxFileBytes+1 || e["data"] != nil {
		t.Fatalf("over 1 MiB: %v (%v), want a manifest of %d bytes and no data", inlined(over), err, MaxFileBytes+1)
	}
	if e["sha256"] != hexSum(strings.Repeat("o", MaxFileBytes+1)) {
		t.Errorf("manifest entry sha256 %v, want the file's", e["sha256"])
	}
	if diff := cmp.Diff(map[string]any{KeyTooLarge: []string{"salt://over"}}, inlined(tmpl)); diff != "" {
		t.Errorf("templated (-want +got):\n%s", diff)
	}
	if e, _ := cs[3][KeyFiles].(map[string]any)["salt://d/4"].(map[string]any); e == nil || e["manifest"] == nil {
		t.Errorf("the file past the job's budget: %v, want a manifest", inlined(cs[3]))
	}
	if len(indexed) != 2 {
		t.Errorf("indexed %v, want the two files that did not fit", indexed)
	}
}

// TestInlineManifestOtherStates: file.recurse, cmd.script and
// archive.extracted get a manifest for a file over the inline limit, as
// file.managed does; file.recurse's small files stay inline beside it,
// and a templated file.recurse's big file is too large (rendered per
// device).
func TestInlineManifestOtherStates(t *testing.T) {
	big := strings.Repeat("b", 3<<20)
	root := tree(t, map[string]string{"site/big.bin": big, "site/a.txt": "a", "site/sub/b.txt": "b", "run.sh": big, "app.tgz": big})
	s := New(map[string][]string{"base": {root}})
	s.Manifests = func(path string) (protocol.Manifest, error) {
		f, err := os.Open(path)
		if err != nil {
			return protocol.Manifest{}, err
		}
		defer f.Close()
		return protocol.NewManifest(f)
	}
	rec := chunk("file.recurse", "source", "salt://site")
	recT := chunk("file.recurse", "source", "salt://site", "template", "jinja")
	script := chunk("cmd.script", "name", "salt://run.sh arg")
	arch := chunk("archive.extracted", "source", "salt://app.tgz")
	render := func(_ string, src []byte, _ map[string]any) ([]byte, error) { return src, nil }
	if err := s.Inline([]state.Chunk{rec, recT, script, arch}, "base", render); err != nil {
		t.Fatal(err)
	}
	isManifest := func(c state.Chunk, u string) bool {
		e, _ := c[KeyFiles].(map[string]any)[u].(map[string]any)
		m, err := protocol.ManifestFromAny(e["manifest"])
		return err == nil && m.Size == int64(len(big)) && e["data"] == nil && e["sha256"] == hexSum(big)
	}
	for _, tc := range []struct {
		c state.Chunk
		u string
	}{{rec, CreateURL("site/big.bin", "base")}, {script, "salt://run.sh"}, {arch, "salt://app.tgz"}} {
		if !isManifest(tc.c, tc.u) {
			t.Errorf("%s.%s: %s is %v, want a manifest of %d bytes", tc.c.State(), tc.c.Fun(), tc.u, inlined(tc.c)[KeyFiles], len(big))
		}
	}
	want := files(CreateURL("site/a.txt", "base"), "a", CreateURL("site/sub/b.txt", "base"), "b")
	got := rec[KeyFiles].(map[string]any)
	for u, e := range want {
		if diff := cmp.Diff(e, got[u]); diff != "" {
			t.Errorf("file.recurse %s (-want +got):\n%s", u, diff)
		}
	}
	if diff := cmp.Diff([]string{CreateURL("site/big.bin", "base")}, recT[KeyTooLarge]); diff != "" {
		t.Errorf("templated file.recurse too large (-want +got):\n%s", diff)
	}
}
