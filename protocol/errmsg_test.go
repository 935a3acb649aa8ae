package protocol

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestErrorRoundTrip(t *testing.T) {
	for _, m := range []*Error{
		{Kind: KindNotAccepted},
		{Kind: KindRateLimited, Msg: "slow down"},
		{Kind: Kind(999), Msg: "a kind from a newer peer"},
	} {
		roundTrip(t, m)
	}
}

func TestErrorErr(t *testing.T) {
	m := &Error{Kind: KindShutdown, Msg: "master restarting"}
	err := m.Err()
	if diff := cmp.Diff(&ProtoError{Kind: KindShutdown, Msg: "master restarting"}, err); diff != "" {
		t.Errorf("Err() differs (-want +got):\n%s", diff)
	}
	if got, want := err.Error(), "protocol: shutting down: master restarting"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}

func TestErrorKindOverflow(t *testing.T) {
	// Kind is a uint16: a larger number does not decode.
	_, err := Decode([]byte{byte(TypeError), 0xa1, 0x01, 0x1a, 0x00, 0x01, 0x00, 0x00})
	wantKind(t, err, KindMalformed)
}
