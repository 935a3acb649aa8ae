package protocol

// Grains carries an agent's grains after they changed (saltutil.refresh_grains).
type Grains struct {
	Grains map[string]any `cbor:"1,keyasint"`
}

func (*Grains) Type() Type { return TypeGrains }
