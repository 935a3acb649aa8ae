package protocol

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testEventBody() *EventBody {
	return &EventBody{
		ID: "web01", Tag: "salt/beacon/web01/diskusage/",
		Data:  map[string]any{"mount": "/", "diskusage": 91.5, "id": "web01"},
		Stamp: "2026-11-22T12:00:00.123456",
	}
}

func TestEventRoundTrip(t *testing.T) {
	pub, priv := newKey(t)
	for _, body := range []*EventBody{
		testEventBody(),
		{ID: "a", Tag: "t", Stamp: "s"},
		{ID: "a", Tag: strings.Repeat("t", MaxTagLen)},
	} {
		e, err := SignEvent(priv, body)
		if err != nil {
			t.Fatalf("SignEvent: %v", err)
		}
		m, err := Decode(roundTrip(t, e))
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.(*Event).Open(pub, body.ID)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if diff := cmp.Diff(body, got); diff != "" {
			t.Errorf("opened body differs (-want +got):\n%s", diff)
		}
	}
}

func TestEventOpenErrors(t *testing.T) {
	pub, priv := newKey(t)
	otherPub, _ := newKey(t)
	sign := func(b *EventBody) *Event {
		t.Helper()
		e, err := SignEvent(priv, b)
		if err != nil {
			t.Fatalf("SignEvent: %v", err)
		}
		return e
	}
	good := sign(testEventBody())
	for _, tc := range []struct {
		name   string
		ev     *Event
		key    []byte
		wantID string
		want   Kind
	}{
		{"tampered body", &Event{Signed: Signed{Body: flipBit(good.Body, 5), Sig: good.Sig}}, pub, "web01", KindBadSig},
		{"tampered sig", &Event{Signed: Signed{Body: good.Body, Sig: flipBit(good.Sig, 31)}}, pub, "web01", KindBadSig},
		{"wrong key", good, otherPub, "web01", KindBadSig},
		{"wrong id", good, pub, "web1", KindWrongID},
		{"empty tag", sign(&EventBody{ID: "web01"}), pub, "web01", KindMalformed},
		{"tag too long", sign(&EventBody{ID: "web01", Tag: strings.Repeat("t", MaxTagLen+1)}), pub, "web01", KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.ev.Open(tc.key, tc.wantID)
			if err == nil {
				t.Fatalf("Open = %+v, want error", b)
			}
			wantKind(t, err, tc.want)
		})
	}
}
