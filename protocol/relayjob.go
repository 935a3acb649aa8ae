package protocol

// RelayJob is a job for the devices behind a relay, master to relay, sent
// once per relay on the relay link's first stream. Signed is the Job
// exactly as the master signed it; the relay forwards it unchanged and each
// device verifies the master's signature itself.
//
// IDs names the devices to send it to when the target is one only the
// master can evaluate (nodegroups, pillar); when IDs is empty the relay
// matches the job's target against its own devices (id and grains from
// their Hello), with the same targets package as the master.
type RelayJob struct {
	Signed
	IDs []string `cbor:"3,keyasint,omitempty"`
}

func (*RelayJob) Type() Type { return TypeRelayJob }

// Job returns the job to forward to devices.
func (r *RelayJob) Job() *Job { return &Job{Signed: r.Signed} }

func (r *RelayJob) validate() error {
	if len(r.Body) == 0 || len(r.Sig) == 0 {
		return Errorf(KindMalformed, "relay job without a signed job")
	}
	for _, id := range r.IDs {
		if err := ValidID(id); err != nil {
			return err
		}
	}
	return nil
}
