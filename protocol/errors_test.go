package protocol

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, KindOther},
		{"plain", io.EOF, KindOther},
		{"proto", Errorf(KindBadSig, "x"), KindBadSig},
		{"wrapped", fmt.Errorf("open job: %w", Errorf(KindWrongID, "x")), KindWrongID},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &ProtoError{Kind: KindTooLarge})), KindTooLarge},
		{"joined", errors.Join(io.EOF, Errorf(KindVersion, "x")), KindVersion},
	} {
		if got := KindOf(tc.err); got != tc.want {
			t.Errorf("KindOf(%s): got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKindString(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		want string
	}{
		{KindOther, "other"}, {KindMalformed, "malformed"}, {KindRateLimited, "rate limited"},
		{KindPendingFull, "too many pending keys"}, {Kind(13), "kind(13)"}, {Kind(65535), "kind(65535)"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("Kind(%d).String(): got %q, want %q", uint16(tc.k), got, tc.want)
		}
	}
	if got, want := (&ProtoError{Kind: KindForbidden}).Error(), "protocol: forbidden"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}

// TestKindCodes pins the wire numbers: they are append-only.
func TestKindCodes(t *testing.T) {
	codes := []Kind{KindOther, KindMalformed, KindTooLarge, KindUnknownType, KindBadSig, KindWrongID,
		KindNotAccepted, KindForbidden, KindUnexpected, KindVersion, KindShutdown, KindRateLimited,
		KindPendingFull}
	for i, k := range codes {
		if int(k) != i {
			t.Errorf("%v: got code %d, want %d", k, k, i)
		}
	}
	types := []Type{TypeHello, TypeKeyStatus, TypeJob, TypeReturn, TypeEvent, TypeGrains, TypePing, TypePong, TypeError}
	for i, ty := range types {
		if int(ty) != i+1 {
			t.Errorf("%v: got type %d, want %d", ty, ty, i+1)
		}
	}
}
