package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

// A simulated device's firmware.update (Options.Firmware): it fetches
// every chunk of the build the job names over its session (BlobGet, one
// at a time, through its relay), checks each against its hash, then fires
// halite/firmware/<id>/updated and returns, as the agent does after a
// trial that a master accepted. Nothing is written to disk and no process
// restarts: what is simulated is the traffic and the master's and relay's
// work, not the device's.

// blobWaits are a session's chunk requests waiting for their BlobData.
type blobWaits struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]chan *protocol.BlobData
}

func (w *blobWaits) deliver(d *protocol.BlobData) {
	w.mu.Lock()
	ch := w.m[d.Req]
	delete(w.m, d.Req)
	w.mu.Unlock()
	if ch != nil {
		ch <- d
	}
}

func (w *blobWaits) get(ctx context.Context, fr *protocol.Framer, hash []byte) ([]byte, error) {
	ch := make(chan *protocol.BlobData, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[uint64]chan *protocol.BlobData{}
	}
	w.next++
	req := w.next
	w.m[req] = ch
	w.mu.Unlock()
	if err := fr.Write(&protocol.BlobGet{Req: req, Hash: hash}); err != nil {
		return nil, err
	}
	t := time.NewTimer(60 * time.Second)
	defer t.Stop()
	select {
	case d := <-ch:
		if d.Err != "" {
			return nil, fmt.Errorf("chunk %x: %s", hash[:4], d.Err)
		}
		if s := sha256.Sum256(d.Data); !bytes.Equal(s[:], hash) {
			return nil, fmt.Errorf("chunk %x does not match its hash", hash[:4])
		}
		return d.Data, nil
	case <-t.C:
		return nil, fmt.Errorf("chunk %x: no answer", hash[:4])
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// firmware runs a firmware.update job and writes its event and return.
func (f *Fleet) firmware(ctx context.Context, a *simAgent, b *protocol.JobBody, fr *protocol.Framer, macKey []byte, w *blobWaits) {
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
		for _, h := range m.Chunks {
			if _, err = w.get(ctx, fr, h); err != nil {
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
