package fleet

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// census counts the 1-RTT packets the simulated devices send and receive,
// by direction and by the kinds of frames they carry ("ack+stream"), to
// find out where a round's packets go. It is on only with
// FLEETSIM_CENSUS=1: building qlog events costs CPU.
type census struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *census) note(dir string, frames []qlog.Frame) {
	kinds := make([]string, 0, len(frames))
	for _, f := range frames {
		t := reflect.TypeOf(f.Frame)
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		name := "?"
		if t != nil {
			name = strings.TrimSuffix(strings.ToLower(t.Name()), "frame")
		}
		// Bytes, to tell a job (hundreds) from an ack (a dozen).
		switch sf := f.Frame.(type) {
		case qlog.StreamFrame:
			name = fmt.Sprintf("stream(%d)", sf.Length)
		case *qlog.StreamFrame:
			name = fmt.Sprintf("stream(%d)", sf.Length)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != name {
			kinds = append(kinds, name)
		}
	}
	key := dir + " " + strings.Join(kinds, "+")
	c.mu.Lock()
	c.counts[key]++
	c.mu.Unlock()
}

// take returns the counts so far, commonest first, and starts again.
func (c *census) take() string {
	c.mu.Lock()
	counts := c.counts
	c.counts = map[string]int{}
	c.mu.Unlock()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%9d  %s\n", counts[k], k)
	}
	return b.String()
}

func (c *census) trace(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return c }

// AddProducer makes census a qlogwriter.Trace.
func (c *census) AddProducer() qlogwriter.Recorder { return censusRecorder{c} }

type censusRecorder struct{ c *census }

func (r censusRecorder) RecordEvent(e qlogwriter.Event) {
	switch e := e.(type) {
	case qlog.PacketSent:
		if e.Header.PacketType == qlog.PacketType1RTT {
			r.c.note("device→", e.Frames)
		}
	case qlog.PacketReceived:
		if e.Header.PacketType == qlog.PacketType1RTT {
			r.c.note("→device", e.Frames)
		}
	}
}

func (censusRecorder) Close() error { return nil }
