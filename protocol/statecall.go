package protocol

// StateGet asks the master to compile states for the asking agent itself,
// agent to master: halite-call state.apply (state.sls, state.highstate,
// state.show_*) on a device that has a master. Salt's salt-call compiles
// on the minion from the master's files; here the master compiles, as it
// does for a published state job, and the device applies. It travels on
// the agent's authenticated session (through any relay, unchanged) and
// names no device: the master compiles for the session's own id only.
//
// Nonce is random bytes of the agent's; the master signs it into the job
// it answers with (Kwarg "__nonce__", hex), so that a relay cannot answer
// a request with another job the master signed for this device before.
type StateGet struct {
	Req   uint64         `cbor:"1,keyasint"`
	Fun   string         `cbor:"2,keyasint"`
	Arg   []any          `cbor:"3,keyasint,omitempty"`
	Kwarg map[string]any `cbor:"4,keyasint,omitempty"`
	Nonce []byte         `cbor:"5,keyasint"`
}

func (*StateGet) Type() Type { return TypeStateGet }

// Bounds of a StateGet: its function name and nonce.
const (
	MaxStateFun   = 256
	MinStateNonce = 16
	MaxStateNonce = 64
)

func (g *StateGet) validate() error {
	switch {
	case g.Fun == "" || len(g.Fun) > MaxStateFun:
		return Errorf(KindMalformed, "state_get function empty or longer than %d bytes", MaxStateFun)
	case len(g.Nonce) < MinStateNonce || len(g.Nonce) > MaxStateNonce:
		return Errorf(KindMalformed, "state_get nonce of %d bytes, want %d to %d", len(g.Nonce), MinStateNonce, MaxStateNonce)
	}
	return nil
}

// StateJob answers a StateGet, master to agent: Job is a job signed by
// the master as a publish signs it (JobBody with the compiled states in
// Kwarg "__state__", "__for__" naming the asking device alone, and the
// request's nonce in "__nonce__"), or Err says why there is none. The
// agent verifies it with the master's key, records its jid so that it
// cannot also be run as a published job, and hands it to halite-call,
// which runs it and returns under its jid.
type StateJob struct {
	Req uint64 `cbor:"1,keyasint"`
	Job Signed `cbor:"2,keyasint,omitempty"`
	Err string `cbor:"3,keyasint,omitempty"`
}

func (*StateJob) Type() Type { return TypeStateJob }

func (j *StateJob) validate() error {
	if j.Err == "" && (len(j.Job.Body) == 0 || len(j.Job.Sig) == 0) {
		return Errorf(KindMalformed, "state_job has neither a job nor an error")
	}
	return nil
}
