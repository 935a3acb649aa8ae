package protocol

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	mathrand "math/rand/v2"
	"testing"
)

// TestSignatureDomains checks that a signature made for one kind of body
// never verifies as another: a valid body of each kind is signed under each
// domain and opened as its own kind, which succeeds only under its domain.
func TestSignatureDomains(t *testing.T) {
	pub, priv := newKey(t)
	kinds := []struct {
		name   string
		domain string
		body   any
		open   func(Signed) error
	}{
		{"job", domainJob, testJobBody(), func(s Signed) error { _, err := (&Job{Signed: s}).Open(pub); return err }},
		{"return", domainReturn, testReturnBody(), func(s Signed) error { _, err := (&Return{Signed: s}).Open(pub, "web01"); return err }},
		{"event", domainEvent, testEventBody(), func(s Signed) error { _, err := (&Event{Signed: s}).Open(pub, "web01"); return err }},
	}
	for _, as := range kinds {
		for _, made := range kinds {
			s, err := seal(priv, made.domain, as.body)
			if err != nil {
				t.Fatal(err)
			}
			err = as.open(s)
			if made.name == as.name {
				if err != nil {
					t.Errorf("%s body signed as %s, opened as %s: got %v, want success", as.name, made.name, as.name, err)
				}
				continue
			}
			if got := KindOf(err); got != KindBadSig {
				t.Errorf("%s body signed as %s, opened as %s: got %v (kind %v), want kind %v", as.name, made.name, as.name, err, got, KindBadSig)
			}
		}
	}
}

// TestSignedMessageSwap checks the message-level form of the same property: a
// Return's payload and signature relabelled as an Event do not open.
func TestSignedMessageSwap(t *testing.T) {
	pub, priv := newKey(t)
	ev := testEventBody()
	// A return body that also decodes as a valid event would need shared
	// field types; sign the event body under the return domain instead.
	s, err := seal(priv, domainReturn, ev)
	if err != nil {
		t.Fatal(err)
	}
	r := &Return{Signed: s}
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	b[0] = byte(TypeEvent)
	m, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(relabelled frame): %v", err)
	}
	e, ok := m.(*Event)
	if !ok {
		t.Fatalf("Decode(relabelled frame): got %T, want *Event", m)
	}
	_, err = e.Open(pub, ev.ID)
	wantKind(t, err, KindBadSig)
}

// TestMadeBy: a return or event body is tied to the id it was made under,
// read from its bytes (the one check of the agent's outbox and the relay).
func TestMadeBy(t *testing.T) {
	ret, err := Marshal(&ReturnBody{ID: "dev1", JID: "20261122120000000001", Fun: "test.ping"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Marshal(&EventBody{ID: "dev1", Tag: "a/b", Data: map[string]any{"id": "dev2"}})
	if err != nil {
		t.Fatal(err)
	}
	arr, err := Marshal([]any{1, "dev1", "x"})
	if err != nil {
		t.Fatal(err)
	}
	txt, err := Marshal("\x01dev1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		id   string
		want bool
	}{
		{"return, same id", ret, "dev1", true},
		{"event, same id", ev, "dev1", true},
		{"return, other id", ret, "dev2", false},
		{"event, id a prefix", ev, "dev", false},
		{"event, longer id", ev, "dev10", false},
		{"empty", nil, "dev1", false},
		// Not a map: an array [1, "dev1"] holds the same bytes after its
		// header (the agent's copy of this check took it).
		{"array, not a map", arr, "dev1", false},
		{"text, not a map", txt, "dev1", false},
		{"truncated", ret[:4], "dev1", false},
	} {
		if got := MadeBy(tc.body, tc.id); got != tc.want {
			t.Errorf("%s: MadeBy(%q): got %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}

// TestMACTagIsHMAC: macTag is crypto/hmac's HMAC-SHA256 of domain and body
// for every key and body length around the block size, a body larger than
// the pooled buffer included.
func TestMACTagIsHMAC(t *testing.T) {
	rng := mathrand.New(mathrand.NewPCG(3, 4))
	bytesN := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, keyLen := range []int{0, 1, 32, 63, 64, 65, 200} {
		key := bytesN(keyLen)
		for _, bodyLen := range []int{0, 1, 55, 56, 63, 64, 119, 150, 1000, maxPooledMACBuf + 10} {
			body := bytesN(bodyLen)
			h := hmac.New(sha256.New, key)
			h.Write([]byte(domainReturn))
			h.Write(body)
			if want, got := h.Sum(nil), macTag(key, domainReturn, body); !bytes.Equal(got, want) {
				t.Errorf("key %d bytes, body %d bytes: macTag %x, HMAC %x", keyLen, bodyLen, got, want)
			}
		}
	}
}

// TestMACTagAllocs: a session key's tag allocates only the tag itself.
func TestMACTagAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race")
	}
	key, body := bytes.Repeat([]byte{7}, MACKeySize), bytes.Repeat([]byte{9}, 180)
	macTag(key, domainReturn, body)
	if n := testing.AllocsPerRun(100, func() { macTag(key, domainReturn, body) }); n > 1 {
		t.Errorf("macTag allocates %v times, want 1 (the tag)", n)
	}
}
