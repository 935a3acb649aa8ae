package protocol

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testReturnBody() *ReturnBody {
	return &ReturnBody{
		ID: "web01", JID: "20261122120000123456", Fun: "cmd.run",
		FunArgs: []any{"uptime", map[string]any{"cwd": "/tmp"}},
		Return:  strings.Repeat("0123456789abcdef", 64),
		Retcode: 0, Success: true, Stamp: "2026-11-22T12:00:00.123456",
	}
}

func TestReturnRoundTrip(t *testing.T) {
	pub, priv := newKey(t)
	for _, body := range []*ReturnBody{
		testReturnBody(),
		{ID: "a", JID: "20261122120000123456", Fun: "test.ping", Return: true, Retcode: -1},
		{ID: "a", JID: "20261122120000123456", Fun: "grains.items", Return: map[string]any{
			"os": "Debian", "n": int64(3), "list": []any{1.5, nil, []byte{1}},
		}},
		{ID: "a", JID: "20261122120000123456", Fun: "test.nil"}, // Return nil
	} {
		r, err := SignReturn(priv, body)
		if err != nil {
			t.Fatalf("SignReturn: %v", err)
		}
		m, err := Decode(roundTrip(t, r))
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.(*Return).Open(pub, body.ID)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if diff := cmp.Diff(body, got); diff != "" {
			t.Errorf("opened body differs (-want +got):\n%s", diff)
		}
	}
}

func TestReturnOpenErrors(t *testing.T) {
	pub, priv := newKey(t)
	otherPub, _ := newKey(t)
	sign := func(b *ReturnBody) *Return {
		t.Helper()
		r, err := SignReturn(priv, b)
		if err != nil {
			t.Fatalf("SignReturn: %v", err)
		}
		return r
	}
	good := sign(testReturnBody())
	badJID := testReturnBody()
	badJID.JID = "req"
	for _, tc := range []struct {
		name   string
		ret    *Return
		key    []byte
		wantID string
		want   Kind
	}{
		{"tampered body", &Return{Signed: Signed{Body: flipBit(good.Body, 10), Sig: good.Sig}}, pub, "web01", KindBadSig},
		{"tampered sig", &Return{Signed: Signed{Body: good.Body, Sig: flipBit(good.Sig, 63)}}, pub, "web01", KindBadSig},
		{"wrong key", good, otherPub, "web01", KindBadSig},
		{"wrong id", good, pub, "web02", KindWrongID},
		{"bad jid", sign(badJID), pub, "web01", KindMalformed},
		{"body not a map", sign(nil), pub, "web01", KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.ret.Open(tc.key, tc.wantID)
			if err == nil {
				t.Fatalf("Open = %+v, want error", b)
			}
			wantKind(t, err, tc.want)
		})
	}
}

func TestReturnBodyMap(t *testing.T) {
	b := &ReturnBody{ID: "web01", JID: "20261122120000123456", Fun: "test.ping", Return: true, Stamp: "s"}
	want := map[string]any{
		"id": "web01", "jid": "20261122120000123456", "fun": "test.ping", "fun_args": []any{},
		"return": true, "retcode": 0, "success": false, "_stamp": "s",
	}
	if diff := cmp.Diff(want, b.Map()); diff != "" {
		t.Errorf("Map() differs (-want +got):\n%s", diff)
	}
}

// TestReturnBodyMapRoom: the map has room for the keys the master adds
// (announceReturn's "cmd", and "schedule"), so adding them allocates
// nothing: a map made for its eight keys grew again for every return.
func TestReturnBodyMapRoom(t *testing.T) {
	b := &ReturnBody{ID: "dev1", JID: "20261125131313000000", Fun: "test.ping", Return: true, Stamp: "2026-11-25T13:13:13.000000"}
	plain := testing.AllocsPerRun(100, func() { _ = b.Map() })
	more := testing.AllocsPerRun(100, func() {
		m := b.Map()
		m["cmd"] = "_return"
		m["schedule"] = "job1"
	})
	if more != plain {
		t.Errorf("adding the master's keys to Map's map: %.0f allocations, %.0f without", more, plain)
	}
}
