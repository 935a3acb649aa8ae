package queue

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/returners"
)

func TestQueueBoundDurabilityAndRequeue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.queue")
	q, err := Open(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := q.Push(&returners.Item{Kind: returners.KindRet, Ret: map[string]any{"i": int64(i), "f": 1.5}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Push(&returners.Item{Kind: returners.KindRet}); !errors.Is(err, returners.ErrFull) {
		t.Fatalf("push into a full queue: got %v, want ErrFull", err)
	}
	q.Close()
	q, err = Open(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	es, err := q.Peek(10)
	if err != nil || len(es) != 3 {
		t.Fatalf("peek after reopen: %d items, %v; want 3", len(es), err)
	}
	if es[2].Item.Ret["i"] != int64(2) || es[2].Item.Ret["f"] != 1.5 {
		t.Fatalf("item 2 = %#v, want i int64(2), f 1.5", es[2].Item.Ret)
	}
	if err := q.Ack(es[0].Seq); err != nil || q.Depth() != 2 {
		t.Fatalf("ack: %v, depth %d; want 2", err, q.Depth())
	}
	// Bury the head, then requeue it: it goes to the tail.
	if err := q.Bury(es[1], "row too large"); err != nil || q.Dead() != 1 || q.Depth() != 1 {
		t.Fatalf("bury: %v, dead %d depth %d; want 1 and 1", err, q.Dead(), q.Depth())
	}
	if n, err := q.RequeueDead(); n != 1 || err != nil {
		t.Fatalf("RequeueDead = %d, %v; want 1, nil", n, err)
	}
	if q.Dead() != 0 || q.Depth() != 2 {
		t.Fatalf("after requeue: dead %d depth %d; want 0 and 2", q.Dead(), q.Depth())
	}
	es, err = q.Peek(10)
	if err != nil || len(es) != 2 || es[1].Item.Ret["i"] != int64(1) {
		t.Fatalf("after requeue: %+v, %v; want item 1 at the tail", es, err)
	}
	if dl, err := q.DeadLetters(); len(dl) != 0 || err != nil {
		t.Fatalf("dead letters after requeue: %+v, %v; want none", dl, err)
	}
	// Requeueing respects the bound.
	q.Push(&returners.Item{Kind: returners.KindRet})
	q.Bury(es[0], "x")
	q.Push(&returners.Item{Kind: returners.KindRet})
	if n, err := q.RequeueDead(); !errors.Is(err, returners.ErrFull) || n != 0 || q.Dead() != 1 {
		t.Fatalf("requeue into a full queue: %d, %v, dead %d; want 0, ErrFull, 1", n, err, q.Dead())
	}
}
