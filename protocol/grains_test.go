package protocol

import "testing"

func TestGrainsRoundTrip(t *testing.T) {
	for _, m := range []*Grains{
		{Grains: map[string]any{}},
		{Grains: map[string]any{
			"os": "Debian", "osrelease": "12", "num_cpus": int64(4), "mem_total": int64(-1),
			"ipv4":     []any{"10.0.0.5", "127.0.0.1"},
			"virtual":  nil,
			"gpus":     []any{map[string]any{"model": "none", "vendor": "none"}},
			"uptime":   1.5,
			"selinux":  map[string]any{"enabled": false, "enforced": "Disabled"},
			"serial":   []byte{0xde, 0xad},
			"roles":    []any{},
			"unicode":  "Grüße",
			"big_uint": int64(1<<63 - 1),
		}},
	} {
		roundTrip(t, m)
	}
}

func TestGrainsDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Kind
	}{
		// {1: {1: 2}}: grains keyed by an integer.
		{"integer key", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x01, 0x02}, KindMalformed},
		// {1: {"a": {1: 2}}}: an integer key deeper, inside an any.
		{"nested integer key", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x61, 'a', 0xa1, 0x01, 0x02}, KindMalformed},
		// {1: {"a": 18446744073709551615}}: does not fit an int64.
		{"uint64 overflow", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x61, 'a', 0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, KindMalformed},
		// {1: {"a": simple(16)}}
		{"unassigned simple value", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x61, 'a', 0xf0}, KindMalformed},
		// {1: {"a": undefined}}
		{"undefined", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x61, 'a', 0xf7}, KindMalformed},
		// {1: {"\xff": 1}}: a key that is not UTF-8.
		{"invalid utf-8 key", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x61, 0xff, 0x01}, KindMalformed},
		// {1: {h'61': 1}}: a byte-string key.
		{"byte string key", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x41, 'a', 0x01}, KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("Decode(%x) = %#v, want error", tc.in, m)
			}
			wantKind(t, err, tc.want)
		})
	}
}
