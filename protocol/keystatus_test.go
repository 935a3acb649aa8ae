package protocol

import "testing"

func TestKeyStatusRoundTrip(t *testing.T) {
	for _, st := range []string{KeyAccepted, KeyPending, KeyRejected, KeyDenied} {
		roundTrip(t, &KeyStatus{Status: st, MasterID: "master1", Caps: CapabilityVersion})
	}
	roundTrip(t, &KeyStatus{Status: KeyAccepted})
}

func TestKeyStatusUnknownStatus(t *testing.T) {
	for _, st := range []string{"", "Accepted", "unaccepted"} {
		b, err := Encode(&KeyStatus{Status: st})
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		m, err := Decode(b)
		if err == nil {
			t.Fatalf("Decode(status %q) = %#v, want error", st, m)
		}
		wantKind(t, err, KindMalformed)
	}
}
