package returners

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// Item is one unit of returner work in a Store.
type Item struct {
	Kind    string         `json:"k"` // KindRet, KindLoad or KindEvents
	Ret     map[string]any `json:"ret,omitempty"`
	JID     string         `json:"jid,omitempty"`
	Load    map[string]any `json:"load,omitempty"`
	Minions []string       `json:"minions,omitempty"`
	Events  []Event        `json:"events,omitempty"`
	// RetConfig and RetKwargs are the job's --return_config and
	// --return_kwargs: the item goes to an instance of the returner opened
	// with them (see Worker.Alt).
	RetConfig string         `json:"ret_config,omitempty"`
	RetKwargs map[string]any `json:"ret_kwargs,omitempty"`
}

// Item kinds.
const (
	KindRet    = "ret"    // Returner(Ret)
	KindLoad   = "load"   // SaveLoad(JID, Load, Minions)
	KindEvents = "events" // EventReturn(Events)
)

// ErrFull is returned by Push when the store holds its maximum.
var ErrFull = errors.New("returner queue full")

// Entry is an item read from a Store, with its sequence number. Item is nil
// when Raw does not decode.
type Entry struct {
	Seq  uint64
	Item *Item
	Raw  []byte
}

// DeadLetter is an item set aside because its backend refused it for good.
type DeadLetter struct {
	Time   time.Time       `json:"time"`
	Reason string          `json:"reason"`
	Item   json.RawMessage `json:"item"`
}

// Store is a durable, bounded FIFO of Items that a Worker drains: the
// master's bbolt queue (package returners/queue) or the agent's
// append-only Spool. Push is safe for concurrent use; one reader (a
// Worker) peeks, acks and buries.
type Store interface {
	// Push appends items and returns once they are on disk; a full store
	// takes none of them and returns ErrFull.
	Push(items ...*Item) error
	// Peek returns up to n items from the head, oldest first.
	Peek(n int) ([]Entry, error)
	// Ack removes delivered items.
	Ack(seqs ...uint64) error
	// Bury moves e to the dead-letter area with the reason.
	Bury(e Entry, reason string) error
	// Ready receives a value after a push (and at open when items wait).
	Ready() <-chan struct{}
	// Depth is how many items wait.
	Depth() int
	// Dead is how many items were set aside.
	Dead() int
	// DeadLetters returns the items set aside, oldest first.
	DeadLetters() ([]DeadLetter, error)
	// RequeueDead moves every dead letter back to the tail of the queue
	// and returns how many it moved (ErrFull, and none moved, when they do
	// not fit).
	RequeueDead() (int, error)
	Close() error
}

// DecodeItem decodes an item as stored (JSON), numbers as int64 or
// float64; nil when raw is not an item.
func DecodeItem(raw []byte) *Item {
	it := new(Item)
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(it) != nil {
		return nil
	}
	numbersToGo(it)
	return it
}

// DeadLetterJSON encodes the dead letter of raw (an item as stored) with
// its reason.
func DeadLetterJSON(raw []byte, reason string) ([]byte, error) {
	if !json.Valid(raw) {
		raw, _ = json.Marshal(string(raw))
	}
	return json.Marshal(&DeadLetter{Time: time.Now().UTC(), Reason: reason, Item: raw})
}

// numbersToGo turns json.Numbers back into int64 or float64.
func numbersToGo(it *Item) {
	if it.Ret != nil {
		it.Ret = convert(it.Ret).(map[string]any)
	}
	if it.Load != nil {
		it.Load = convert(it.Load).(map[string]any)
	}
	if it.RetKwargs != nil {
		it.RetKwargs = convert(it.RetKwargs).(map[string]any)
	}
	for i := range it.Events {
		if it.Events[i].Data != nil {
			it.Events[i].Data = convert(it.Events[i].Data).(map[string]any)
		}
	}
}

func convert(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = convert(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = convert(x)
		}
		return v
	}
	return v
}
