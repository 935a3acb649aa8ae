package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

// A simulated device's firmware.update (Options.Firmware): it fetches
// every chunk of the build the job names over its session (BlobGet, one
// at a time, through its relay: Fleet.chunk), checks each against its hash, then fires
// halite/firmware/<id>/updated and returns, as the agent does after a
// trial that a master accepted. Nothing is written to disk and no process
// restarts: what is simulated is the traffic and the master's and relay's
// work, not the device's.

// firmware runs a firmware.update job and writes its event and return.
func (f *Fleet) firmware(ctx context.Context, a *simAgent, b *protocol.JobBody, fr *protocol.Framer, macKey []byte) {
	ret := &protocol.ReturnBody{ID: a.id, JID: b.JID, Fun: b.Fun, FunArgs: b.ReturnFunArgs(), Success: true}
	fw, _ := b.Kwarg["__firmware__"].(map[string]any)
	version, _ := fw["version"].(string)
	tag := "updated"
	var err error
	if msg, _ := fw["error"].(string); msg != "" {
		err = fmt.Errorf("%s", msg)
	}
	var m protocol.Manifest
	if err == nil {
		m, err = protocol.ManifestFromAny(fw["manifest"])
	}
	if err == nil {
		start := time.Now()
		for c := range m.Chunks {
			if err = f.chunk(ctx, a, m, c); err != nil { // blobs.go
				break
			}
		}
		f.fetchMu.Lock()
		f.fetchTimes = append(f.fetchTimes, time.Since(start))
		f.fetchMu.Unlock()
	}
	data := map[string]any{"version": version, "from": "fleetsim", "jid": b.JID}
	if err != nil {
		tag = "failed"
		data["reason"] = err.Error()
		ret.Return, ret.Retcode, ret.Success = "ERROR: "+err.Error(), 1, false
	} else {
		ret.Return = map[string]any{"result": "trial", "version": version}
	}
	stamp := time.Now().UTC().Format("2006-01-02T15:04:05.000000")
	ev, eerr := protocol.MACEvent(macKey, &protocol.EventBody{ID: a.id, Tag: "halite/firmware/" + a.id + "/" + tag, Data: data, Stamp: stamp})
	if eerr == nil {
		eerr = fr.Write(ev)
	}
	if eerr != nil {
		f.noteErr(fmt.Errorf("firmware event: %w", eerr))
	}
	ret.Stamp = stamp
	signed, err := protocol.MACReturn(macKey, ret)
	if err == nil {
		err = fr.Write(signed)
	}
	if err != nil {
		f.noteErr(fmt.Errorf("firmware return: %w", err))
		return
	}
	f.jobs.Add(1)
}

// FetchTimes are how long each simulated device took to fetch its build.
func (f *Fleet) FetchTimes() []time.Duration {
	f.fetchMu.Lock()
	defer f.fetchMu.Unlock()
	return append([]time.Duration(nil), f.fetchTimes...)
}
