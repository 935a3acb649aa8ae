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
