package returners

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Backoff bounds of a Worker retrying a failing backend.
const (
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 30 * time.Second
)

// callTimeout bounds one call into a backend, so a hung server is a
// failure to retry rather than a stuck queue.
const callTimeout = 30 * time.Second

// peekN is how many items a Worker takes from its queue at a time.
const peekN = 256

// Status is what returners.status shows of one returner.
type Status struct {
	Name        string    `json:"name"`
	Depth       int       `json:"depth"`
	Dead        int       `json:"dead"`
	Delivered   uint64    `json:"delivered"`
	Failures    uint64    `json:"failures"`
	Retrying    bool      `json:"retrying"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// MaxAlt bounds the instances a Worker keeps open for --return_config and
// --return_kwargs; the least recently used one is closed past it.
const MaxAlt = 16

// AltOpener opens an instance of a worker's returner with a job's
// --return_config and --return_kwargs.
type AltOpener func(ctx context.Context, retConfig string, kwargs map[string]any) (Returner, error)

// Worker delivers one store's items to one returner, in order.
type Worker struct {
	name string
	q    Store
	r    Returner
	log  *zap.Logger

	// MinBackoff and MaxBackoff bound the retry delay (defaults above).
	MinBackoff, MaxBackoff time.Duration
	// Alt opens the instance for an item with RetConfig or RetKwargs; nil
	// sends those items to the plain instance. Instances are cached (at
	// most MaxAlt, by ret_config and kwargs) and closed when Run returns.
	Alt AltOpener

	alts []altInstance // most recently used last; only Run's goroutine uses it

	mu sync.Mutex
	st Status
}

// NewWorker returns a worker feeding r from q.
func NewWorker(name string, q Store, r Returner, log *zap.Logger) *Worker {
	if log == nil {
		log = zap.NewNop()
	}
	return &Worker{name: name, q: q, r: r, log: log.With(zap.String("returner", name)),
		MinBackoff: MinBackoff, MaxBackoff: MaxBackoff, st: Status{Name: name}}
}

// Queue is the worker's store.
func (w *Worker) Queue() Store { return w.q }

// Status returns the worker's counters and its queue's depth.
func (w *Worker) Status() Status {
	w.mu.Lock()
	st := w.st
	w.mu.Unlock()
	st.Depth = w.q.Depth()
	st.Dead = w.q.Dead()
	return st
}

// Run delivers until ctx ends. A transient failure is retried with
// exponential backoff; a Permanent one buries the item.
func (w *Worker) Run(ctx context.Context) {
	defer w.closeAlts()
	backoff := time.Duration(0)
	for {
		entries, err := w.q.Peek(peekN)
		if err != nil {
			w.log.Error("read returner queue", zap.Error(err))
		}
		if len(entries) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.q.Ready():
			}
			continue
		}
		var acked []uint64
		var failed error
		for _, e := range entries {
			err := w.deliver(ctx, e)
			if ctx.Err() != nil {
				break
			}
			if err == nil {
				acked = append(acked, e.Seq)
				continue
			}
			if IsPermanent(err) || e.Item == nil {
				w.log.Error("returner refused an item for good; kept in the dead-letter area",
					zap.Uint64("seq", e.Seq), zap.Error(err))
				// Ack what came before so the order on disk holds.
				if err := w.q.Ack(acked...); err != nil {
					w.log.Error("ack", zap.Error(err))
				}
				w.count(len(acked))
				acked = nil
				if berr := w.q.Bury(e, err.Error()); berr != nil {
					w.log.Error("bury", zap.Error(berr))
				}
				continue
			}
			failed = err
			break
		}
		if err := w.q.Ack(acked...); err != nil {
			w.log.Error("ack", zap.Error(err))
		}
		w.count(len(acked))
		if ctx.Err() != nil {
			return
		}
		if failed == nil {
			if backoff > 0 {
				w.log.Info("returner back, delivering again", zap.Int("queued", w.q.Depth()))
			}
			backoff = 0
			w.mu.Lock()
			w.st.Retrying = false
			w.mu.Unlock()
			continue
		}
		if backoff == 0 {
			backoff = w.MinBackoff
			w.log.Warn("returner failing; its queue waits and is retried with backoff",
				zap.Int("queued", w.q.Depth()), zap.Error(failed))
		} else {
			backoff = min(backoff*2, w.MaxBackoff)
			w.log.Debug("returner still failing", zap.Duration("retry_in", backoff), zap.Error(failed))
		}
		w.mu.Lock()
		w.st.Failures++
		w.st.Retrying = true
		w.st.LastError = failed.Error()
		w.st.LastErrorAt = time.Now().UTC()
		w.mu.Unlock()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (w *Worker) count(n int) {
	w.mu.Lock()
	w.st.Delivered += uint64(n)
	w.mu.Unlock()
}

func (w *Worker) deliver(ctx context.Context, e Entry) error {
	if e.Item == nil {
		return Permanent(fmt.Errorf("item %d does not decode", e.Seq))
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	r, err := w.instance(ctx, e.Item)
	if err != nil {
		return err
	}
	switch it := e.Item; it.Kind {
	case KindRet:
		return r.Returner(ctx, it.Ret)
	case KindLoad:
		jc, ok := r.(JobCache)
		if !ok {
			return Permanent(fmt.Errorf("%s has no save_load", w.name))
		}
		return jc.SaveLoad(ctx, it.JID, it.Load, it.Minions)
	case KindEvents:
		er, ok := r.(EventReturner)
		if !ok {
			return Permanent(fmt.Errorf("%s has no event_return", w.name))
		}
		return er.EventReturn(ctx, it.Events)
	default:
		return Permanent(fmt.Errorf("unknown item kind %q", it.Kind))
	}
}

// altInstance is an instance opened for one (ret_config, kwargs).
type altInstance struct {
	key string
	r   Returner
}

// instance returns the returner instance for it: the plain one, or the one
// of its RetConfig and RetKwargs.
func (w *Worker) instance(ctx context.Context, it *Item) (Returner, error) {
	if w.Alt == nil || (it.RetConfig == "" && len(it.RetKwargs) == 0) {
		return w.r, nil
	}
	kw, err := json.Marshal(it.RetKwargs) // sorted keys: one key per meaning
	if err != nil {
		return nil, Permanent(fmt.Errorf("ret_kwargs: %w", err))
	}
	key := it.RetConfig + "\x00" + string(kw)
	for i, a := range w.alts {
		if a.key == key {
			w.alts = append(append(w.alts[:i:i], w.alts[i+1:]...), a)
			return a.r, nil
		}
	}
	r, err := w.Alt(ctx, it.RetConfig, it.RetKwargs)
	if err != nil {
		return nil, fmt.Errorf("open %s with ret_config %q and ret_kwargs: %w", w.name, it.RetConfig, err)
	}
	if len(w.alts) >= MaxAlt {
		old := w.alts[0]
		w.alts = w.alts[1:]
		if err := old.r.Close(); err != nil {
			w.log.Warn("close returner instance", zap.Error(err))
		}
	}
	w.alts = append(w.alts, altInstance{key: key, r: r})
	return r, nil
}

func (w *Worker) closeAlts() {
	for _, a := range w.alts {
		if err := a.r.Close(); err != nil {
			w.log.Warn("close returner instance", zap.Error(err))
		}
	}
	w.alts = nil
}
