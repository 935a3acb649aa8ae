package output

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeJSON decodes a case file as Salt's json.load does: integers stay
// integers (int64), other numbers are floats.
func decodeJSON(t *testing.T, data []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return fixNumbers(v).(map[string]any)
}

func fixNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(x.String(), ".eE") {
			if n, err := x.Int64(); err == nil {
				return n
			}
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = fixNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = fixNumbers(x[k])
		}
	}
	return v
}

// stateOptions reads Salt's options of a case file into Options.
func stateOptions(t *testing.T, o map[string]any) Options {
	t.Helper()
	st := DefaultStateOptions()
	opts := Options{State: &st}
	for k, v := range o {
		switch k {
		case "color":
			opts.Color = v.(bool)
		case "state_output":
			st.Output = v.(string)
		case "state_verbose":
			st.Verbose = v.(bool)
		case "state_output_diff":
			st.Diff = v.(bool)
		case "state_output_profile":
			st.Profile = v.(bool)
		case "state_output_pct":
			st.Pct = v.(bool)
		case "state_compress_ids":
			st.CompressIDs = v.(bool)
		case "state_tabular":
			st.Tabular = v.(bool)
		case "state_output_exclude":
			st.Exclude = v
		case "state_output_terse":
			st.Terse = v
		default:
			t.Fatalf("unknown option %q", k)
		}
	}
	return opts
}

// TestHighstateSalt renders testdata/highstate/*.json and compares with
// what Salt 3006's own highstate outputter printed for the same data and
// options (salt/output/highstate.py, through salt.output.out_format and so
// its fallback to nested): the goldens are written by
// testdata/highstate/gen.py running Salt's code, not by this test, and
// -update does not touch them. Some cases are Salt's own unit tests'
// data (tests/pytests/unit/output/test_highstate.py: json_data,
// test_parallel_summary_output, test_summary_output, test__compress_ids,
// test_nested_output; test_highstate_terse.py).
func TestHighstateSalt(t *testing.T) {
	files, err := filepath.Glob("testdata/highstate/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("found %d cases, want the 40 and more gen.py writes", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c := decodeJSON(t, data)
			opts := stateOptions(t, c["opts"].(map[string]any))
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			if name == "escapes" {
				// Halite replaces ESC in every text from a minion; Salt
				// only in ids and compile errors (see highstate.go).
				want = bytes.ReplaceAll(want, []byte("\x1b"), []byte("?"))
			}
			var got bytes.Buffer
			if err := Format(&got, "highstate", c["data"], opts); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got.String()); diff != "" {
				t.Errorf("highstate output differs from Salt's (-salt +halite):\n%s", diff)
			}
		})
	}
}

// FuzzHighstate feeds the highstate outputter returns of any shape (a
// return is hostile: it comes from a device): it must not panic, and
// without colour nothing in its output may drive the terminal.
func FuzzHighstate(f *testing.F) {
	files, _ := filepath.Glob("testdata/highstate/*.json")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2]) // truncated
	}
	f.Add([]byte(`{"m": {"a_|-b": {"result": true, "changes": {}, "comment": 1, "__run_num__": "x"}}}`))
	f.Add([]byte(`{"m": {"a_|-b_|-c_|-d": {"result": null, "changes": [1], "comment": [], "duration": null}}}`))
	modes := []StateOptions{
		DefaultStateOptions(),
		{Output: "terse_id", Tabular: true, Profile: true, CompressIDs: true},
		{Output: "filter", Exclude: "True,", Terse: []any{"False"}, Pct: true, Diff: true},
		{Output: "changes", CompressIDs: true, Pct: true},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		v = fixNumbers(v)
		for _, m := range modes {
			var buf bytes.Buffer
			if err := Format(&buf, "highstate", v, Options{State: &m}); err != nil {
				t.Fatalf("%+v: %v", m, err)
			}
			if bytes.IndexByte(buf.Bytes(), 0x1b) >= 0 {
				t.Fatalf("%+v: ESC in the output:\n%q", m, buf.String())
			}
		}
	})
}
