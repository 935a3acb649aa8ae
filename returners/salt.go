package returners

import (
	"encoding/json"
	"fmt"
	"time"
)

// FormatJIDInstance is Salt's salt.utils.jid.format_jid_instance: a job's
// summary as get_jids and jobs.list_jobs show it.
func FormatJIDInstance(jid string, load map[string]any) map[string]any {
	str := func(k, def string) any {
		if v, ok := load[k]; ok && v != nil {
			return v
		}
		return def
	}
	arg, _ := load["arg"].([]any)
	if arg == nil {
		arg = []any{}
	}
	return map[string]any{
		"Function": str("fun", "unknown-function"), "Arguments": arg,
		"Target": str("tgt", "unknown-target"), "Target-type": str("tgt_type", ""),
		"User": str("user", "root"), "StartTime": JIDToTime(jid),
	}
}

// JIDToTime is Salt's jid_to_time: "2015, Mar 30 12:10:11.408195", or ""
// for something that is not a jid.
func JIDToTime(jid string) string {
	if len(jid) < 20 {
		return ""
	}
	t, err := time.Parse("20060102150405", jid[:14])
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s.%s", t.Format("2006, Jan 02 15:04:05"), jid[14:20])
}

// MarshalJSON encodes v as a backend stores it; a value JSON cannot hold
// is a Permanent error.
func MarshalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, Permanent(fmt.Errorf("encode as JSON: %w", err))
	}
	return b, nil
}

// Str returns m[k] as a string ("" when missing).
func Str(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// Truthy is Salt's ret.get("success", False).
func Truthy(m map[string]any, k string) bool {
	b, _ := m[k].(bool)
	return b
}

// PrepJID returns passed, or a new jid (Salt's gen_jid, local time).
func PrepJID(passed string) string {
	if passed != "" {
		return passed
	}
	t := time.Now()
	return t.Format("20060102150405") + fmt.Sprintf("%06d", t.Nanosecond()/1000)
}

// Numbers turns the json.Numbers of a map decoded with UseNumber into
// int64 or float64, in place, and returns it.
func Numbers(m map[string]any) map[string]any {
	return convert(m).(map[string]any)
}
