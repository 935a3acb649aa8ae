package protocol

import (
	"crypto/ed25519"
	"testing"
)

func TestRelayJobRoundTrip(t *testing.T) {
	job, err := SignJob(fuzzKey, testJobBody())
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, &RelayJob{Signed: job.Signed})
	roundTrip(t, &RelayJob{Signed: job.Signed, IDs: []string{"cam1", "cam2"}})
	got, err := (&RelayJob{Signed: job.Signed}).Job().Open(fuzzKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatalf("forwarded job does not open: %v", err)
	}
	if got.JID != testJobBody().JID {
		t.Errorf("forwarded job jid = %q, want %q", got.JID, testJobBody().JID)
	}
}

func TestRelayJobBadID(t *testing.T) {
	b, err := Encode(&RelayJob{Signed: Signed{Body: []byte{0xa0}, Sig: []byte{1}}, IDs: []string{"a/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := Decode(b); err == nil {
		t.Fatalf("Decode = %#v, want error", m)
	} else {
		wantKind(t, err, KindMalformed)
	}
}
