package event

import (
	"fmt"
	"sync"
	"time"
)

// stampLayout is Python's datetime.isoformat() with microseconds.
const stampLayout = "2006-01-02T15:04:05.000000"

// jidLayout is Salt's job id format, %Y%m%d%H%M%S%f.
const jidLayout = "20060102150405.000000"

// Stamp formats t as Salt's event "_stamp": UTC, ISO 8601, always with
// microseconds, e.g. "2026-11-22T11:57:04.123456". (Python's isoformat drops
// a zero microsecond part; Halite always writes it, which Salt's parsers
// accept.)
func Stamp(t time.Time) string {
	return t.UTC().Format(stampLayout)
}

// JIDGen makes Salt-style job ids: 20 digits, %Y%m%d%H%M%S%f of the current
// time. Ids from one JIDGen are unique and strictly increasing even when the
// clock stands still or steps back: an id that would not be greater than
// the previous one is the previous one plus a microsecond. The zero value
// is ready to use and is safe for concurrent use.
//
// With Node set (masters of a multimaster set, Halite's jid_node), the
// last three digits are the node and the time is kept to the millisecond:
// ids of two generators with different nodes never collide, and the id
// still reads as a Salt jid (a time, to the microsecond).
type JIDGen struct {
	// UTC makes ids from UTC time (Salt's utc_jid option). By default they
	// are local time, as in Salt.
	UTC bool
	// Node, when it is 0 to 999 and HasNode is set, ends every id.
	Node    int
	HasNode bool

	mu   sync.Mutex
	last time.Time
	now  func() time.Time // for tests; nil means time.Now
}

// Next returns a new job id.
func (g *JIDGen) Next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now
	if g.now != nil {
		now = g.now
	}
	step := time.Microsecond
	if g.HasNode {
		step = time.Millisecond
	}
	t := now().Truncate(step)
	if !g.last.IsZero() && !t.After(g.last) {
		t = g.last.Add(step)
	}
	g.last = t
	if g.UTC {
		t = t.UTC()
	} else {
		t = t.Local()
	}
	s := formatJID(t)
	if g.HasNode {
		s = s[:17] + fmt.Sprintf("%03d", g.Node%1000)
	}
	return s
}

func formatJID(t time.Time) string {
	s := t.Format(jidLayout)
	return s[:14] + s[15:] // drop the '.' that Go's layout needs
}

// IsJID reports whether s is a Salt job id: 20 decimal digits, optionally
// followed by "_" and a suffix (Salt's unique_jid appends "_<pid>").
func IsJID(s string) bool {
	if len(s) < 20 || (len(s) > 20 && (len(s) == 21 || s[20] != '_')) {
		return false
	}
	for i := 0; i < 20; i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// JIDTime returns the time a job id was made, read in loc (time.Local for
// ids from a default JIDGen, time.UTC for one with UTC set), as Salt's
// jid_to_time does. ok is false when jid is not a job id or not a valid
// time.
func JIDTime(jid string, loc *time.Location) (t time.Time, ok bool) {
	if !IsJID(jid) {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation(jidLayout, jid[:14]+"."+jid[14:20], loc)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
