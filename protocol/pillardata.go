package protocol

// PillarData answers a PillarGet, master to agent (capability 12): Sealed
// is the device's pillar, a CBOR map, sealed to the device's accepted
// identity key for its id (SealTo(key, id, PurposePillar, request nonce,
// CBOR)); or Err says why there is none. A relay forwarding it sees only
// the box.
type PillarData struct {
	Req    uint64 `cbor:"1,keyasint"`
	Sealed []byte `cbor:"2,keyasint,omitempty"`
	Err    string `cbor:"3,keyasint,omitempty"`
}

func (*PillarData) Type() Type { return TypePillarData }

// PurposePillar is the sealing purpose of a PillarData's box.
const PurposePillar = "pillar"

// MaxPillar bounds a device's pillar, encoded, before sealing: 1 MiB. A
// device's pillar is secrets and per-role settings, not files (those go
// through the file server); a larger one is refused by the master, and a
// larger box by the agent.
const MaxPillar = 1 << 20

// MaxPillarErr bounds a PillarData's error text.
const MaxPillarErr = 4096

func (d *PillarData) validate() error {
	switch {
	case d.Err == "" && len(d.Sealed) < SealOverhead:
		return Errorf(KindMalformed, "pillar_data has neither a sealed pillar nor an error")
	case len(d.Sealed) > MaxPillar+SealOverhead:
		return Errorf(KindMalformed, "pillar_data of %d bytes, more than %d", len(d.Sealed), MaxPillar+SealOverhead)
	case len(d.Err) > MaxPillarErr:
		return Errorf(KindMalformed, "pillar_data error longer than %d bytes", MaxPillarErr)
	}
	return nil
}
