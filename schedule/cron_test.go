package schedule

import (
	"strings"
	"testing"
	"time"
)

// Cron expressions as Salt reads them with croniter (salt/utils/schedule.py
// _handle_cron: croniter(data["cron"], now).get_next(datetime)).
func TestCronNext(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04:05", s, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		expr, from, want string
	}{
		{"*/5 * * * *", "2026-03-01 10:02:30", "2026-03-01 10:05:00"},
		{"*/5 * * * *", "2026-03-01 10:05:00", "2026-03-01 10:10:00"},
		{"0 0 * * *", "2026-03-01 10:02:30", "2026-03-02 00:00:00"},
		{"@hourly", "2026-03-01 10:02:30", "2026-03-01 11:00:00"},
		{"30 4 1,15 * *", "2026-03-02 00:00:00", "2026-03-15 04:30:00"},
		{"0 9 * * mon-fri", "2026-03-07 10:00:00", "2026-03-09 09:00:00"}, // Saturday -> Monday
		{"0 0 * * 7", "2026-03-02 00:00:00", "2026-03-08 00:00:00"},       // 7 is Sunday
		{"0 0 29 feb *", "2026-03-01 00:00:00", "2028-02-29 00:00:00"},
		{"0 0 1 jan *", "2026-03-01 00:00:00", "2027-01-01 00:00:00"},
		{"* * * * * */10", "2026-03-01 10:00:01", "2026-03-01 10:00:10"}, // croniter's sixth field: seconds
		{"0 12 13 * fri", "2026-03-01 00:00:00", "2026-03-06 12:00:00"},  // day of month OR day of week
		{"0 0 30 feb *", "2026-03-01 00:00:00", "0001-01-01 00:00:00"},   // never
	} {
		c, err := ParseCron(tc.expr)
		if err != nil {
			t.Errorf("ParseCron(%q): %v", tc.expr, err)
			continue
		}
		got := c.Next(at(tc.from))
		want := at(tc.want)
		if tc.want == "0001-01-01 00:00:00" {
			want = time.Time{}
		}
		if !got.Equal(want) {
			t.Errorf("%q from %s: got %s, want %s", tc.expr, tc.from, got, want)
		}
	}
}

func TestCronBad(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"", "want 5 fields"},
		{"* * * *", "want 5 fields"},
		{"61 * * * *", "minute"},
		{"* 24 * * *", "hour"},
		{"* * 0 * *", "day of month"},
		{"* * * 13 *", "month"},
		{"* * * * 8", "day of week"},
		{"*/0 * * * *", "bad step"},
		{"5-1 * * * *", "ends before it starts"},
		{"a * * * *", "minute"},
		{"* * * * * 60", "seconds"},
	} {
		_, err := ParseCron(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCron(%q) = %v, want an error with %q", tc.expr, err, tc.want)
		}
	}
}
