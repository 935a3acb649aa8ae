package firmware

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseDiscoveryFilter: KEY=GLOB terms separated by spaces or commas
// become discovery.list's arguments, unmanaged True unless given; anything
// else is refused with the term named.
func TestParseDiscoveryFilter(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]any
		wantErr string
	}{
		{in: "model=DS-2CD*", want: map[string]any{"model": "DS-2CD*", "unmanaged": true}},
		{in: "vendor=Hik* relay=site-*,model=DS?2CD[0-9]*", want: map[string]any{"vendor": "Hik*", "relay": "site-*", "model": "DS?2CD[0-9]*", "unmanaged": true}},
		{in: "unmanaged=False ip=10.0.1.*", want: map[string]any{"unmanaged": false, "ip": "10.0.1.*"}},
		{in: "unmanaged=yes", want: map[string]any{"unmanaged": true}},
		{in: "name=a=b", want: map[string]any{"name": "a=b", "unmanaged": true}},
		{in: "model", wantErr: `"model": want KEY=GLOB`},
		{in: "=x", wantErr: `unknown key ""`},
		{in: "Model=x", wantErr: `unknown key "Model"`},
		{in: "model=", wantErr: "empty value"},
		{in: "unmanaged=2", wantErr: "unmanaged must be True or False"},
		{in: "mac=a* mac=b*", wantErr: "mac given twice"},
		{in: "", wantErr: "empty filter"},
		{in: " ,\t", wantErr: "empty filter"},
		{in: "model=" + strings.Repeat("x", 5000), wantErr: "at most 4096"},
	} {
		got, err := ParseDiscoveryFilter(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseDiscoveryFilter(%.40q): got %v, %v; want error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDiscoveryFilter(%q): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseDiscoveryFilter(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

// TestDiscoveredRecord: a record of discovery.list (made from what devices
// answered) gives its most recent address only when that is a plain IP
// address: a host name, an option-like string, a zone, the unspecified
// or a multicast address is refused.
func TestDiscoveredRecord(t *testing.T) {
	for _, tc := range []struct {
		ips  []any
		want string // "": refused
	}{
		{[]any{"10.0.1.5", "10.0.9.9"}, "10.0.1.5"},
		{[]any{"::ffff:10.0.1.5"}, "10.0.1.5"},
		{[]any{"fd00::5"}, "fd00::5"},
		{[]any{"fe80::1%eth0"}, ""},
		{[]any{"-oProxyCommand=touch /tmp/x"}, ""},
		{[]any{"cam.example.com"}, ""},
		{[]any{"0.0.0.0"}, ""},
		{[]any{"239.255.255.250"}, ""},
		{[]any{42}, ""},
		{[]any{}, ""},
		{nil, ""},
	} {
		rec := map[string]any{"key": "c0:56:e3:00:00:01", "vendor": "Hikvision", "managed": false,
			"onvif": map[string]any{"model": "DS-2CD2143G0-I"}}
		if tc.ips != nil {
			rec["ips"] = tc.ips
		}
		d, ok := discovered("r1", rec)
		if got := map[bool]string{true: d.Addr}[ok]; got != tc.want {
			t.Errorf("ips %v: got %q (ok %v), want %q", tc.ips, d.Addr, ok, tc.want)
		}
		if ok && (d.Model != "DS-2CD2143G0-I" || d.Vendor != "Hikvision" || d.Relay != "r1" || d.Key != "c0:56:e3:00:00:01") {
			t.Errorf("ips %v: got %+v", tc.ips, d)
		}
	}
}
