package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Keys is Salt's SCHEDULE_CONF (salt/modules/schedule.py): the keys of a
// job schedule.list shows; others are dropped from the listing.
var Keys = []string{"name", "maxrunning", "function", "splay", "range", "when", "once", "once_fmt",
	"returner", "jid_include", "args", "kwargs", "_seconds", "seconds", "minutes", "hours", "days",
	"enabled", "return_job", "metadata", "cron", "until", "after", "return_config", "return_kwargs",
	"run_on_start", "skip_during_range", "run_after_skip_range"}

// unsupported are Salt's keys this scheduler refuses rather than ignore:
// a job that silently never runs as meant is worse than one refused.
var unsupported = []string{"when", "once", "until", "after", "skip_during_range"}

// Job is one parsed schedule entry.
type Job struct {
	Name       string
	Function   string
	Args       []any
	Kwargs     map[string]any
	Every      time.Duration // seconds+minutes+hours+days; 0 with Cron
	Cron       *Cron
	SplayLo    int // seconds; 0,0: no splay
	SplayHi    int
	Range      *Range
	Returners  []string
	MaxRunning int // 0: no limit (jid_include false)
	RunOnStart bool
	Enabled    bool
	JIDInclude bool
	ReturnJob  bool // false: the return is not sent to the master (return_job: False)

	data map[string]any // as configured, with Salt's defaults filled in
}

// Range is Salt's range: the job runs only between Start and End, or
// (Invert) only outside.
type Range struct {
	Start, End clock
	Invert     bool
}

// clock is a range bound: a date and time, or a time of day (dateutil
// reads "8:00am" as today at 8).
type clock struct {
	t       time.Time
	daily   bool
	seconds int // of the day, when daily
}

func (c clock) at(now time.Time) time.Time {
	if !c.daily {
		return c.t
	}
	y, m, d := now.Date()
	return time.Date(y, m, d, 0, 0, c.seconds, 0, now.Location())
}

// In reports whether now is inside the range (as Salt's _handle_range
// decides run).
func (r *Range) In(now time.Time) bool {
	start, end := r.Start.at(now), r.End.at(now)
	if r.Invert {
		return !now.After(start) || !now.Before(end)
	}
	return !now.Before(start) && !now.After(end)
}

var dateLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02", "01/02/2006 15:04"}
var clockLayouts = []string{"15:04:05", "15:04", "3:04pm", "3:04 pm", "3:04PM", "3:04 PM", "3pm", "3 pm", "3PM", "3 PM"}

func parseClock(v any) (clock, error) {
	s, ok := v.(string)
	if !ok {
		return clock{}, fmt.Errorf("expected a date or time string, got %v", v)
	}
	s = strings.TrimSpace(s)
	for _, l := range clockLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return clock{daily: true, seconds: t.Hour()*3600 + t.Minute()*60 + t.Second()}, nil
		}
	}
	for _, l := range dateLayouts {
		if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
			return clock{t: t}, nil
		}
	}
	return clock{}, fmt.Errorf("%q is not a date (2006-01-02 15:04:05) or a time of day (15:04, 8:00am)", s)
}

// number reads an int or float, or a string holding one.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// boolean reads a bool as Salt would (True/False, or the strings "true"/"false").
func boolean(v any) (bool, bool) {
	switch b := v.(type) {
	case bool:
		return b, true
	case string:
		switch strings.ToLower(b) {
		case "true", "yes", "on":
			return true, true
		case "false", "no", "off":
			return false, true
		}
	}
	return false, false
}

// Checks are what Parse asks the agent about a job.
type Checks struct {
	Function func(string) bool  // whether a function exists; nil: any
	Returner func(string) error // whether a returner exists; nil: any
}

// Parse checks one schedule entry and returns its job. The error names
// what is wrong.
func Parse(name string, v any, c Checks) (*Job, error) {
	if name == "" {
		return nil, fmt.Errorf("a job name is required")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("job %s: expected a mapping of options, got %v", name, v)
	}
	data := make(map[string]any, len(m)+4)
	for k, x := range m {
		data[k] = x
	}
	j := &Job{Name: name, Enabled: true, JIDInclude: true, ReturnJob: true}
	bad := func(key, format string, a ...any) (*Job, error) {
		return nil, fmt.Errorf("job %s: %s: %s", name, key, fmt.Sprintf(format, a...))
	}
	fn, _ := data["function"].(string)
	if fn == "" {
		return nil, fmt.Errorf("job %s: function is required (a string such as test.ping)", name)
	}
	if c.Function != nil && !c.Function(fn) {
		return bad("function", "%q is not available (an execution function on an agent, a runner on the master)", fn)
	}
	j.Function = fn
	if x, ok := data["args"]; ok && x != nil {
		l, ok := x.([]any)
		if !ok {
			return bad("args", "expected a list, got %v", x)
		}
		j.Args = l
	}
	if x, ok := data["kwargs"]; ok && x != nil {
		kw, ok := x.(map[string]any)
		if !ok {
			return bad("kwargs", "expected a mapping, got %v", x)
		}
		j.Kwargs = kw
	}
	var secs float64
	interval := false
	for _, u := range []struct {
		key  string
		mult float64
	}{{"seconds", 1}, {"minutes", 60}, {"hours", 3600}, {"days", 86400}} {
		x, ok := data[u.key]
		if !ok || x == nil {
			continue
		}
		n, ok := number(x)
		if !ok || n < 0 {
			return bad(u.key, "expected a number of %s, 0 or more, got %v", u.key, x)
		}
		secs += n * u.mult
		interval = true
	}
	if x, ok := data["cron"]; ok && x != nil {
		if interval {
			return nil, fmt.Errorf(`job %s: unable to use "seconds", "minutes", "hours", or "days" with "cron"`, name)
		}
		s, ok := x.(string)
		if !ok {
			return bad("cron", "expected a string such as '*/5 * * * *', got %v", x)
		}
		c, err := ParseCron(s)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", name, err)
		}
		j.Cron = c
	}
	for _, k := range unsupported {
		if _, ok := data[k]; ok {
			return bad(k, "not supported by Halite's scheduler; use seconds/minutes/hours/days, cron or range")
		}
	}
	switch {
	case j.Cron != nil:
	case !interval:
		return nil, fmt.Errorf("job %s: no schedule: set seconds, minutes, hours, days or cron", name)
	case secs < 1:
		return nil, fmt.Errorf("job %s: interval of %gs: the smallest is 1 second", name, secs)
	case secs > 100*365*86400:
		return nil, fmt.Errorf("job %s: interval of %gs is over a hundred years", name, secs)
	default:
		j.Every = time.Duration(secs * float64(time.Second))
	}
	if x, ok := data["splay"]; ok && x != nil {
		lo, hi, err := parseSplay(x)
		if err != nil {
			return bad("splay", "%v", err)
		}
		j.SplayLo, j.SplayHi = lo, hi
	}
	if x, ok := data["range"]; ok && x != nil {
		r, err := parseRange(x)
		if err != nil {
			return bad("range", "%v", err)
		}
		j.Range = r
	}
	if x, ok := data["returner"]; ok && x != nil {
		switch r := x.(type) {
		case string:
			for _, s := range strings.Split(r, ",") {
				if s = strings.TrimSpace(s); s != "" {
					j.Returners = append(j.Returners, s)
				}
			}
		case []any:
			for _, e := range r {
				s, ok := e.(string)
				if !ok || s == "" {
					return bad("returner", "expected returner names, got %v", e)
				}
				j.Returners = append(j.Returners, s)
			}
		default:
			return bad("returner", "expected a name or a list of names, got %v", x)
		}
		for _, r := range j.Returners {
			if c.Returner != nil {
				if err := c.Returner(r); err != nil {
					return bad("returner", "%v", err)
				}
			}
		}
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"enabled", &j.Enabled}, {"jid_include", &j.JIDInclude}, {"run_on_start", &j.RunOnStart}, {"return_job", &j.ReturnJob}} {
		x, ok := data[b.key]
		if !ok || x == nil {
			continue
		}
		if b.key == "return_job" && x == "nocache" {
			continue
		}
		v, ok := boolean(x)
		if !ok {
			return bad(b.key, "expected true or false, got %v", x)
		}
		*b.dst = v
	}
	if j.JIDInclude {
		// Salt: maxrunning defaults to 1 for jobs with jid_include,
		// which is the default (salt/utils/schedule.py eval).
		j.MaxRunning = 1
	}
	if x, ok := data["maxrunning"]; ok && x != nil {
		n, ok := number(x)
		if !ok || n < 1 || n != math.Trunc(n) || n > 1e6 {
			return bad("maxrunning", "expected a whole number, 1 or more, got %v", x)
		}
		j.MaxRunning = int(n)
	}
	// Salt's defaults, as build_schedule_item fills them in.
	data["name"] = name
	data["enabled"] = j.Enabled
	data["jid_include"] = j.JIDInclude
	if j.MaxRunning > 0 {
		data["maxrunning"] = j.MaxRunning
	}
	j.data = data
	return j, nil
}

func parseSplay(x any) (lo, hi int, err error) {
	if m, ok := x.(map[string]any); ok {
		s, ok1 := number(m["start"])
		e, ok2 := number(m["end"])
		if !ok1 || !ok2 || s < 0 || e < s {
			return 0, 0, fmt.Errorf("expected seconds or {start: N, end: M} with 0 <= N <= M, got %v", x)
		}
		return int(s), int(e), nil
	}
	n, ok := number(x)
	if !ok || n < 0 || n > 365*86400 {
		return 0, 0, fmt.Errorf("expected a number of seconds, got %v", x)
	}
	if n == 0 {
		return 0, 0, nil
	}
	return 1, int(n), nil
}

func parseRange(x any) (*Range, error) {
	m, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be specified as a dictionary with start and end")
	}
	start, err := parseClock(m["start"])
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	end, err := parseClock(m["end"])
	if err != nil {
		return nil, fmt.Errorf("end: %w", err)
	}
	r := &Range{Start: start, End: end}
	if inv, ok := m["invert"]; ok {
		r.Invert, _ = boolean(inv)
	}
	now := time.Now()
	if !r.End.at(now).After(r.Start.at(now)) {
		return nil, fmt.Errorf("end must be later than start")
	}
	return r, nil
}

// splay returns the splay to add to a fire time, Salt's random.randint(start, end).
func (j *Job) splay() time.Duration {
	if j.SplayHi <= 0 {
		return 0
	}
	return time.Duration(j.SplayLo+rand.IntN(j.SplayHi-j.SplayLo+1)) * time.Second
}

// Data returns the job's options as configured, with Salt's defaults (name,
// enabled, jid_include, maxrunning) filled in; the caller may not change it.
func (j *Job) Data() map[string]any { return j.data }

// listed returns the job as schedule.list shows it: only Salt's keys.
func (j *Job) listed() map[string]any {
	out := make(map[string]any, len(j.data))
	for _, k := range Keys {
		if v, ok := j.data[k]; ok && v != nil {
			out[k] = v
		}
	}
	out["enabled"] = j.Enabled
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
