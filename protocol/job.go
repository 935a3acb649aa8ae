package protocol

import (
	"crypto/ed25519"
	"strings"
)

// Job is a job signed by the master that issued it, master to agent (through
// any relay, unchanged).
//
// On a relay link's control stream (capability 5) the master sends each
// job once per relay; IDs then names the devices to send it to when the
// target is one only the master can evaluate (nodegroups, pillar), and is
// empty when the relay matches the job's target against its own devices
// (id and grains from their Hello) with the same targets package. The relay
// forwards the signed job without IDs, and each device verifies the
// master's signature itself. IDs lies outside the signature: a relay that
// alters it can only drop or misdirect a job, which devices refuse unless
// its target matches them.
type Job struct {
	Signed
	IDs []string `cbor:"3,keyasint,omitempty"`
}

func (*Job) Type() Type { return TypeJob }

// JobBody is what the master signs: Salt's publish load.
type JobBody struct {
	JID     string         `cbor:"1,keyasint"`
	Tgt     string         `cbor:"2,keyasint"`
	TgtType string         `cbor:"3,keyasint"`
	Fun     string         `cbor:"4,keyasint"`
	Arg     []any          `cbor:"5,keyasint,omitempty"`
	Kwarg   map[string]any `cbor:"6,keyasint,omitempty"`
	User    string         `cbor:"7,keyasint,omitempty"`
	Timeout uint32         `cbor:"8,keyasint,omitempty"` // seconds the agent may run it; 0: no limit
	Ret     string         `cbor:"9,keyasint,omitempty"` // returners named with --return
	Master  string         `cbor:"10,keyasint,omitempty"`
	// Delimiter is the grain/pillar key delimiter of the target (--delimiter).
	Delimiter string `cbor:"11,keyasint,omitempty"`
	// Issued is when the master published the job, Unix seconds (UTC,
	// unlike the jid, which is the master's local time unless utc_jid is
	// set). Agents refuse a job issued longer than job_replay_window
	// before their clock, or before the newest job they have seen from
	// the same master. 0: not said (a master that predates it); such a
	// job is kept from running twice by the agent's record of jids alone.
	Issued int64 `cbor:"12,keyasint,omitempty"`
	// Funs, FunArgs and FunKwargs make a compound job (capability 8):
	// Salt's publish load with a list "fun" and a list of lists "arg"
	// (LocalClient.cmd in salt/client/__init__.py), run in order in one
	// job by the agent, which returns a map of each function's return
	// (Minion._thread_multi_return in salt/minion.py). Fun is then the
	// functions joined with ",", so that an agent that predates Funs
	// answers that no such function is available, and Arg and Kwarg are
	// empty. FunArgs and FunKwargs, when set, hold one entry per function
	// (Salt keeps a group's key=value words in it as a map with
	// "__kwarg__": true; here they are FunKwargs' entry).
	Funs      []string         `cbor:"13,keyasint,omitempty"`
	FunArgs   [][]any          `cbor:"14,keyasint,omitempty"`
	FunKwargs []map[string]any `cbor:"15,keyasint,omitempty"`
}

// SignJob encodes and signs b with the master's key.
func SignJob(key ed25519.PrivateKey, b *JobBody) (*Job, error) {
	s, err := seal(key, domainJob, b)
	if err != nil {
		return nil, err
	}
	return &Job{Signed: s}, nil
}

// Open verifies the job with the master's public key and decodes its body.
func (j *Job) Open(master ed25519.PublicKey) (*JobBody, error) {
	b := new(JobBody)
	if err := j.open(master, nil, domainJob, b); err != nil {
		return nil, err
	}
	if !IsJID(b.JID) {
		return nil, Errorf(KindMalformed, "job id %q is not a 20-digit jid", b.JID)
	}
	if b.Fun == "" {
		return nil, Errorf(KindMalformed, "job %s has no function", b.JID)
	}
	if err := b.checkCompound(); err != nil {
		return nil, err
	}
	return b, nil
}

// checkCompound checks the fields of a compound job agree with each other.
func (b *JobBody) checkCompound() error {
	if len(b.Funs) == 0 {
		if b.FunArgs != nil || b.FunKwargs != nil {
			return Errorf(KindMalformed, "job %s has per-function arguments but no function list", b.JID)
		}
		return nil
	}
	switch {
	case b.Fun != strings.Join(b.Funs, ","):
		return Errorf(KindMalformed, "job %s: fun %q is not its functions joined with commas", b.JID, b.Fun)
	case len(b.Arg) > 0 || len(b.Kwarg) > 0:
		return Errorf(KindMalformed, "job %s is compound and has arguments outside its functions'", b.JID)
	case b.FunArgs != nil && len(b.FunArgs) != len(b.Funs):
		return Errorf(KindMalformed, "job %s has %d functions and %d argument lists", b.JID, len(b.Funs), len(b.FunArgs))
	case b.FunKwargs != nil && len(b.FunKwargs) != len(b.Funs):
		return Errorf(KindMalformed, "job %s has %d functions and %d keyword argument maps", b.JID, len(b.Funs), len(b.FunKwargs))
	}
	return nil
}

// IsJID reports whether s is a Salt job id: 20 decimal digits.
func IsJID(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ReturnFunArgs is the fun_args of the job's return: its positional
// arguments and, when it has any, its kwargs as one map, without the data
// the master attaches under "__" keys (a state job's compiled __state__
// and __for__, synced engine files): a return carries the user's
// arguments, as Salt's do, not a second copy of the compiled states.
func (b *JobBody) ReturnFunArgs() []any {
	out := append(make([]any, 0, len(b.Arg)+1), b.Arg...)
	kw := make(map[string]any, len(b.Kwarg))
	for k, v := range b.Kwarg {
		if !strings.HasPrefix(k, "__") {
			kw[k] = v
		}
	}
	if len(kw) > 0 {
		out = append(out, kw)
	}
	return out
}
