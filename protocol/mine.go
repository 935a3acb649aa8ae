package protocol

// MineGet asks the master for mine data, agent to master: Salt's mine.get
// run on a minion (the master's _mine_get). The master answers with a
// MineData of the same Req, holding only what the asking agent may read
// (the master's mine_get option and each entry's allow_tgt). It travels on
// the agent's authenticated session; it changes nothing on the master.
// The agent's own mine data go to the master as an event (tag
// "_minion_mine", Salt's), on the durable return and event path.
type MineGet struct {
	Req     uint64 `cbor:"1,keyasint"`
	Tgt     string `cbor:"2,keyasint"`
	Fun     string `cbor:"3,keyasint"` // one function, or several comma-separated
	TgtType string `cbor:"4,keyasint,omitempty"`
}

func (*MineGet) Type() Type { return TypeMineGet }

// MaxMineGet bounds a MineGet's target and function.
const MaxMineGet = 4096

func (g *MineGet) validate() error {
	if len(g.Tgt) > MaxMineGet || len(g.Fun) > MaxMineGet || len(g.TgtType) > 64 {
		return Errorf(KindMalformed, "mine_get target or function longer than %d bytes", MaxMineGet)
	}
	return nil
}

// MineData answers a MineGet, master to agent: Salt's _mine_get result
// (minion id to data, or function to minion id to data when several
// functions were asked), or Err saying why there is none.
type MineData struct {
	Req  uint64         `cbor:"1,keyasint"`
	Data map[string]any `cbor:"2,keyasint"`
	Err  string         `cbor:"3,keyasint,omitempty"`
}

func (*MineData) Type() Type { return TypeMineData }
