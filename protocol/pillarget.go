package protocol

// PillarGet asks the master for the asking device's pillar, agent to
// master (capability 12): at session start and on saltutil.refresh_pillar.
// It travels on the agent's authenticated session (through any relay,
// unchanged) and names no device: the master answers with the pillar of
// the session's own id only, so a device cannot ask for another's.
//
// Nonce is random bytes of the agent's; the master seals the answer with
// it as the additional data, so that a relay cannot answer a request with
// an older pillar box it kept for this device.
//
// Refresh asks the master to compile the pillar afresh rather than send
// the one it keeps (saltutil.refresh_pillar and pillar.items, which in
// Salt compile anew); at session start the kept one is enough.
type PillarGet struct {
	Req     uint64 `cbor:"1,keyasint"`
	Nonce   []byte `cbor:"2,keyasint"`
	Refresh bool   `cbor:"3,keyasint,omitempty"`
}

func (*PillarGet) Type() Type { return TypePillarGet }

// Bounds of a PillarGet's nonce.
const (
	MinPillarNonce = 16
	MaxPillarNonce = 64
)

func (g *PillarGet) validate() error {
	if len(g.Nonce) < MinPillarNonce || len(g.Nonce) > MaxPillarNonce {
		return Errorf(KindMalformed, "pillar_get nonce of %d bytes, want %d to %d", len(g.Nonce), MinPillarNonce, MaxPillarNonce)
	}
	return nil
}
