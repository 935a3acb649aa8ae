package protocol

import (
	"strings"
	"testing"
)

func TestMineRoundTrip(t *testing.T) {
	for _, m := range []Message{
		&MineGet{Req: 1, Tgt: "*", Fun: "test.ping"},
		&MineGet{Req: 1 << 40, Tgt: "G@os:Debian", Fun: "a,b", TgtType: "compound"},
		&MineData{Req: 1, Data: map[string]any{}},
		&MineData{Req: 2, Data: map[string]any{"web1": map[string]any{"eth0": []any{"10.0.0.1"}}, "web2": nil}},
		&MineData{Req: 3, Err: "mine.get: no master connected"},
	} {
		roundTrip(t, m)
	}
}

func TestMineGetLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *MineGet
	}{
		{"long target", &MineGet{Req: 1, Tgt: strings.Repeat("a", MaxMineGet+1), Fun: "f"}},
		{"long function", &MineGet{Req: 1, Tgt: "*", Fun: strings.Repeat("f", MaxMineGet+1)}},
		{"long target type", &MineGet{Req: 1, Tgt: "*", Fun: "f", TgtType: strings.Repeat("g", 65)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(b)
			if err == nil {
				t.Fatalf("Decode = %#v, want an error", m)
			}
			wantKind(t, err, KindMalformed)
		})
	}
}

func TestReturnScheduleField(t *testing.T) {
	b := testReturnBody()
	if _, ok := b.Map()["schedule"]; ok {
		t.Errorf("Map of a published job's return has a schedule key")
	}
	b.Schedule = "ping"
	if got := b.Map()["schedule"]; got != "ping" {
		t.Errorf("Map()[schedule] = %v, want ping", got)
	}
	enc, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got := new(ReturnBody)
	if err := Unmarshal(enc, got); err != nil || got.Schedule != "ping" {
		t.Errorf("decoded Schedule = %q (err %v), want ping", got.Schedule, err)
	}
}
