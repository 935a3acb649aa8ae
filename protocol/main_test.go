package protocol

import (
	"crypto/ed25519"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// protocol.Pump's workers wait a while for the next pump before they end.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/halite-fleet/halite/protocol.pumpWorker"))
}

// roundTrip encodes m, decodes the frame body and checks that the result
// equals m; it returns the body.
func roundTrip(t *testing.T, m Message) []byte {
	t.Helper()
	b, err := Encode(m)
	if err != nil {
		t.Fatalf("Encode(%T): %v", m, err)
	}
	if got, want := Type(b[0]), m.Type(); got != want {
		t.Errorf("type byte: got %v, want %v", got, want)
	}
	got, err := DecodeLink(b) // Decode, and Batch too
	if err != nil {
		t.Fatalf("Decode(Encode(%T)): %v", m, err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("Decode(Encode(m)) differs (-want +got):\n%s", diff)
	}
	return b
}

// wantKind fails t unless err is a protocol error of kind want.
func wantKind(t *testing.T, err error, want Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want kind %v", want)
	}
	if got := KindOf(err); got != want {
		t.Fatalf("got kind %v (%v), want %v", got, err, want)
	}
}

// newKey returns a fresh ed25519 key pair.
func newKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	id, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id.Pub, id.Priv
}

// flipBit returns a copy of b with one bit of byte i inverted.
func flipBit(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x01
	return c
}

// sameValue compares decoded messages the way the protocol means them: a nil
// and an empty map or slice are the same (omitempty drops both), and NaN
// equals NaN.
var sameValue = cmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateNaNs(), cmp.Comparer(func(a, b float32) bool {
	return a == b || (math.IsNaN(float64(a)) && math.IsNaN(float64(b)))
})}
