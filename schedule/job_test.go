package schedule

import (
	"strings"
	"testing"
	"time"
)

func known(f string) bool { return f == "test.ping" || f == "test.echo" }

// Parse follows Salt's job options (salt/utils/schedule.py eval and
// salt/modules/schedule.py build_schedule_item): intervals add up,
// maxrunning defaults to 1 with jid_include, which is the default.
func TestParse(t *testing.T) {
	j, err := Parse("j", map[string]any{"function": "test.echo", "args": []any{"hi"}, "minutes": 1, "seconds": 30,
		"splay": map[string]any{"start": 2, "end": 5}, "returner": "syslog, rawfile_json"}, Checks{Function: known})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := j.Every, 90*time.Second; got != want {
		t.Errorf("Every: got %s, want %s", got, want)
	}
	if j.MaxRunning != 1 || !j.JIDInclude || !j.Enabled || !j.ReturnJob {
		t.Errorf("defaults: got maxrunning %d jid_include %v enabled %v return_job %v, want 1 true true true", j.MaxRunning, j.JIDInclude, j.Enabled, j.ReturnJob)
	}
	if j.SplayLo != 2 || j.SplayHi != 5 {
		t.Errorf("splay: got %d..%d, want 2..5", j.SplayLo, j.SplayHi)
	}
	if got := strings.Join(j.Returners, ","); got != "syslog,rawfile_json" {
		t.Errorf("returners: got %s, want syslog,rawfile_json", got)
	}
	if d := j.Data(); d["name"] != "j" || d["maxrunning"] != 1 || d["enabled"] != true || d["jid_include"] != true {
		t.Errorf("Data: got %v, want Salt's defaults filled in", d)
	}
	j, err = Parse("k", map[string]any{"function": "test.ping", "seconds": "5", "jid_include": false, "enabled": "false"}, Checks{Function: known})
	if err != nil {
		t.Fatal(err)
	}
	if j.MaxRunning != 0 || j.Enabled || j.Every != 5*time.Second {
		t.Errorf("jid_include false: got maxrunning %d enabled %v every %s, want 0 false 5s", j.MaxRunning, j.Enabled, j.Every)
	}
}

func TestParseBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"not a map", "test.ping", "expected a mapping"},
		{"no function", map[string]any{"seconds": 5}, "function is required"},
		{"unknown function", map[string]any{"function": "tst.ping", "seconds": 5}, `"tst.ping" is not available`},
		{"no interval", map[string]any{"function": "test.ping"}, "no schedule"},
		{"zero", map[string]any{"function": "test.ping", "seconds": 0}, "smallest is 1 second"},
		{"negative", map[string]any{"function": "test.ping", "seconds": -5}, "seconds: expected a number"},
		{"word", map[string]any{"function": "test.ping", "hours": "often"}, "hours: expected a number"},
		{"huge", map[string]any{"function": "test.ping", "days": 1e9}, "over a hundred years"},
		{"cron and seconds", map[string]any{"function": "test.ping", "seconds": 5, "cron": "* * * * *"}, `unable to use "seconds"`},
		{"bad cron", map[string]any{"function": "test.ping", "cron": "* * *"}, "want 5 fields"},
		{"args not a list", map[string]any{"function": "test.ping", "seconds": 5, "args": "x"}, "args: expected a list"},
		{"kwargs not a map", map[string]any{"function": "test.ping", "seconds": 5, "kwargs": []any{}}, "kwargs: expected a mapping"},
		{"bad splay", map[string]any{"function": "test.ping", "seconds": 5, "splay": map[string]any{"start": 9, "end": 2}}, "splay"},
		{"range not a map", map[string]any{"function": "test.ping", "seconds": 5, "range": "now"}, "range: must be specified as a dictionary"},
		{"range backwards", map[string]any{"function": "test.ping", "seconds": 5, "range": map[string]any{"start": "5:00pm", "end": "8:00am"}}, "end must be later than start"},
		{"range bad date", map[string]any{"function": "test.ping", "seconds": 5, "range": map[string]any{"start": "someday", "end": "8:00am"}}, "start:"},
		{"maxrunning zero", map[string]any{"function": "test.ping", "seconds": 5, "maxrunning": 0}, "maxrunning"},
		{"enabled word", map[string]any{"function": "test.ping", "seconds": 5, "enabled": "maybe"}, "enabled: expected true or false"},
		{"when", map[string]any{"function": "test.ping", "when": "5:00pm"}, "when: not supported"},
		{"bad returner", map[string]any{"function": "test.ping", "seconds": 5, "returner": []any{1}}, "returner"},
	} {
		_, err := Parse("j", tc.v, Checks{Function: known})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestRange(t *testing.T) {
	r, err := parseRange(map[string]any{"start": "8:00am", "end": "5:00pm"})
	if err != nil {
		t.Fatal(err)
	}
	day := func(h int) time.Time { return time.Date(2026, 3, 2, h, 0, 0, 0, time.Local) }
	for _, tc := range []struct {
		h      int
		invert bool
		want   bool
	}{{7, false, false}, {8, false, true}, {12, false, true}, {18, false, false}, {7, true, true}, {12, true, false}} {
		r.Invert = tc.invert
		if got := r.In(day(tc.h)); got != tc.want {
			t.Errorf("%d:00 invert %v: got %v, want %v", tc.h, tc.invert, got, tc.want)
		}
	}
}
