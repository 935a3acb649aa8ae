package reactor

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/render"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestDocsGolden renders every reactor example of Salt's reactor
// documentation (testdata/docs/*.sls, unchanged) for its events and
// compares the reactions with testdata/docs/*.golden.
func TestDocsGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/docs/*.sls")
	if len(files) < 16 {
		t.Fatalf("got %d example files, want the 16 of Salt's reactor docs", len(files))
	}
	r := render.New(render.Options{})
	for _, f := range files {
		name := strings.TrimSuffix(f, ".sls")
		t.Run(filepath.Base(name), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var evs []event.Event
			b, err := os.ReadFile(name + ".events.json")
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &evs); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			for _, ev := range evs {
				_, entries, err := r.SLS(f, src, ev.Tag, ev.Data)
				if err != nil {
					t.Fatalf("render for %s: %v", ev.Tag, err)
				}
				rs, err := Compile(f, ev.Tag, entries)
				if err != nil {
					t.Fatalf("compile for %s: %v", ev.Tag, err)
				}
				if rs == nil {
					rs = []*Reaction{}
				}
				js, _ := json.MarshalIndent(rs, "", "  ")
				evj, _ := json.Marshal(ev.Data)
				out.WriteString("# tag: " + ev.Tag + "\n# data: " + string(evj) + "\n")
				out.Write(js)
				out.WriteString("\n")
			}
			golden := name + ".golden"
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if d := cmp.Diff(string(want), out.String()); d != "" {
				t.Errorf("reactions differ from %s (-want +got):\n%s", golden, d)
			}
		})
	}
}
