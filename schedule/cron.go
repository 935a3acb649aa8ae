package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed cron expression: Salt's cron: option, which Salt reads
// with croniter: five fields (minute hour day-of-month month day-of-week),
// an optional sixth for seconds, or one of @yearly, @annually, @monthly,
// @weekly, @daily, @midnight, @hourly.
type Cron struct {
	sec, min, hour, dom, mon, dow uint64 // bit sets
	domStar, dowStar              bool
}

var cronMacros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseCron parses a cron expression.
func ParseCron(expr string) (*Cron, error) {
	s := strings.TrimSpace(expr)
	if m, ok := cronMacros[strings.ToLower(s)]; ok {
		s = m
	}
	f := strings.Fields(s)
	if len(f) != 5 && len(f) != 6 {
		return nil, fmt.Errorf("cron %q: want 5 fields (minute hour day month weekday) or 6 (and seconds), got %d", expr, len(f))
	}
	c := &Cron{sec: 1}
	var err error
	if c.min, err = cronField(f[0], 0, 59, nil); err != nil {
		return nil, fmt.Errorf("cron %q: minute: %w", expr, err)
	}
	if c.hour, err = cronField(f[1], 0, 23, nil); err != nil {
		return nil, fmt.Errorf("cron %q: hour: %w", expr, err)
	}
	if c.dom, err = cronField(f[2], 1, 31, nil); err != nil {
		return nil, fmt.Errorf("cron %q: day of month: %w", expr, err)
	}
	if c.mon, err = cronField(f[3], 1, 12, monthNames); err != nil {
		return nil, fmt.Errorf("cron %q: month: %w", expr, err)
	}
	if c.dow, err = cronField(f[4], 0, 7, dayNames); err != nil {
		return nil, fmt.Errorf("cron %q: day of week: %w", expr, err)
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow |= 1
	}
	if len(f) == 6 {
		if c.sec, err = cronField(f[5], 0, 59, nil); err != nil {
			return nil, fmt.Errorf("cron %q: seconds: %w", expr, err)
		}
	}
	c.domStar, c.dowStar = f[2] == "*" || f[2] == "?", f[4] == "*" || f[4] == "?"
	return c, nil
}

// cronField parses one field: *, ?, n, a-b, with /step, comma-separated;
// names (jan, mon), when given, stand for lo+index (months start at 1).
func cronField(s string, lo, hi int, names []string) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(s, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n < 1 || n > hi-lo+1 {
				return 0, fmt.Errorf("bad step %q", stepS)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*" || rng == "?":
		default:
			as, bs, isRange := strings.Cut(rng, "-")
			var err error
			if a, err = cronValue(as, lo, hi, names); err != nil {
				return 0, err
			}
			b = a
			if isRange {
				if b, err = cronValue(bs, lo, hi, names); err != nil {
					return 0, err
				}
				if b < a {
					return 0, fmt.Errorf("range %q ends before it starts", rng)
				}
			} else if hasStep {
				b = hi
			}
		}
		for v := a; v <= b; v += step {
			bits |= 1 << uint(v)
		}
	}
	return bits, nil
}

func cronValue(s string, lo, hi int, names []string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			if lo == 0 {
				return i, nil
			}
			return i + lo, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%q is not a number from %d to %d", s, lo, hi)
	}
	return v, nil
}

func has(bits uint64, v int) bool { return bits&(1<<uint(v)) != 0 }

// dayOK is cron's day rule: when both day fields are restricted, either
// may match (Vixie cron and croniter).
func (c *Cron) dayOK(t time.Time) bool {
	d, w := has(c.dom, t.Day()), has(c.dow, int(t.Weekday()))
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return w
	case c.dowStar:
		return d
	}
	return d || w
}

// Next returns the first time after t that the expression matches, or the
// zero time when none does within five years (February 30th).
func (c *Cron) Next(t time.Time) time.Time {
	loc := t.Location()
	t = t.Truncate(time.Second).Add(time.Second)
	limit := t.AddDate(5, 0, 0)
	for t.Before(limit) {
		switch {
		case !has(c.mon, int(t.Month())):
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
		case !c.dayOK(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		case !has(c.hour, t.Hour()):
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, loc)
		case !has(c.min, t.Minute()):
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute()+1, 0, 0, loc)
		case !has(c.sec, t.Second()):
			t = t.Add(time.Second)
		default:
			return t
		}
	}
	return time.Time{}
}
