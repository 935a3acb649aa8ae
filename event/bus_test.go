package event

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// recv returns the next event on s, failing the test if none comes within a
// generous deadline.
func recv(t *testing.T, s *Subscription) Event {
	t.Helper()
	select {
	case ev, ok := <-s.C():
		if !ok {
			t.Fatalf("subscription closed, want an event")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatalf("no event within 5s")
	}
	return Event{}
}

// pending returns the tags queued on s without blocking.
func pending(s *Subscription) []string {
	var tags []string
	for {
		select {
		case ev, ok := <-s.C():
			if !ok {
				return tags
			}
			tags = append(tags, ev.Tag)
		default:
			return tags
		}
	}
}

func TestSubscribeMatching(t *testing.T) {
	tags := []string{
		"salt/job/20261122115704123456/new",
		"salt/job/20261122115704123456/ret/cam1",
		"salt/auth",
		"salt/minion/cam1/start",
		"minion_start",
		"halite/relay/r1/device/aa:bb/found",
	}
	tests := []struct {
		name   string
		prefix bool
		pat    string
		want   []string
	}{
		{"empty glob is all", false, "", tags},
		{"star is all", false, "*", tags},
		{"exact", false, "salt/auth", []string{"salt/auth"}},
		{"exact is not prefix", false, "salt/job", nil},
		{"glob crosses slashes", false, "salt/job/*", tags[:2]},
		{"glob rets", false, "salt/job/*/ret/*", tags[1:2]},
		{"glob class", false, "salt/minion/cam[0-9]/start", tags[3:4]},
		{"glob question", false, "minion_star?", tags[4:5]},
		{"prefix", true, "salt/", tags[:4]},
		{"prefix exact", true, "salt/auth", tags[2:3]},
		{"empty prefix is all", true, "", tags},
		{"prefix no glob meaning", true, "salt/*", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBus(zap.NewNop())
			defer b.Close()
			var s *Subscription
			if tt.prefix {
				s = b.SubscribePrefix(tt.pat, 16)
			} else {
				s = b.Subscribe(tt.pat, 16)
			}
			for _, tag := range tags {
				b.Publish(tag, nil)
			}
			got := pending(s)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pattern %q got %q, want %q", tt.pat, got, tt.want)
			}
		})
	}
}

func TestPublishStamp(t *testing.T) {
	b := NewBus(zap.NewNop())
	defer b.Close()
	s := b.Subscribe("*", 8)

	before := time.Now().UTC().Truncate(time.Microsecond)
	b.Publish("a", nil)
	b.Publish("b", map[string]any{"k": "v"})
	b.Publish("c", map[string]any{"_stamp": "2001-02-03T04:05:06.000007"})
	after := time.Now().UTC()

	for _, tag := range []string{"a", "b"} {
		ev := recv(t, s)
		if ev.Tag != tag {
			t.Fatalf("got tag %q, want %q", ev.Tag, tag)
		}
		st, ok := ev.Data["_stamp"].(string)
		if !ok {
			t.Fatalf("%s: got _stamp %#v, want a string", tag, ev.Data["_stamp"])
		}
		ts, err := time.Parse(stampLayout, st)
		if err != nil {
			t.Fatalf("%s: parse _stamp %q: %v", tag, st, err)
		}
		if ts.Before(before) || ts.After(after) {
			t.Errorf("%s: got _stamp %s, want between %s and %s", tag, ts, before, after)
		}
	}
	if ev := recv(t, s); ev.Data["_stamp"] != "2001-02-03T04:05:06.000007" {
		t.Errorf("got _stamp %v, want the publisher's own kept", ev.Data["_stamp"])
	}
}

func TestSlowSubscriberDrops(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	b := NewBus(zap.New(core))
	defer b.Close()
	slow := b.Subscribe("*", 2)
	fast := b.Subscribe("*", 100)
	other := b.Subscribe("nothing/*", 1)

	for i := range 10 {
		b.Publish(fmt.Sprintf("t/%d", i), nil)
	}

	if got, want := slow.Dropped(), uint64(8); got != want {
		t.Errorf("slow.Dropped() got %d, want %d", got, want)
	}
	if got := fast.Dropped(); got != 0 {
		t.Errorf("fast.Dropped() got %d, want 0", got)
	}
	if got := other.Dropped(); got != 0 {
		t.Errorf("other.Dropped() got %d, want 0 (it matched nothing)", got)
	}
	if got, want := fmt.Sprint(pending(slow)), "[t/0 t/1]"; got != want {
		t.Errorf("slow queue got %s, want %s (oldest kept, newest dropped)", got, want)
	}
	if got := len(pending(fast)); got != 10 {
		t.Errorf("fast queue got %d events, want 10", got)
	}
	st := b.Stats()
	if want := (Stats{Published: 10, Dropped: 8, Subscribers: 3}); st != want {
		t.Errorf("Stats() got %+v, want %+v", st, want)
	}
	// Eight drops within far less than a second: one warning.
	warns := logs.FilterMessage("event subscriber too slow, events dropped").All()
	if len(warns) != 1 {
		t.Fatalf("got %d drop warnings, want 1 (rate-limited)", len(warns))
	}
	if got := warns[0].ContextMap()["dropped"]; got != uint64(1) {
		t.Errorf("first warning dropped field got %v, want 1", got)
	}

	// Once the interval has passed, the next drop warns again with the
	// count since the previous warning.
	slow.lastWarn.Store(time.Now().Add(-2 * dropWarnInterval).UnixNano())
	b.Publish("x/1", nil)
	b.Publish("x/2", nil)
	b.Publish("x/3", nil)
	warns = logs.FilterMessage("event subscriber too slow, events dropped").All()
	if len(warns) != 2 {
		t.Fatalf("got %d drop warnings, want 2", len(warns))
	}
	if got, want := warns[1].ContextMap()["dropped"], uint64(8); got != want {
		t.Errorf("second warning dropped field got %v, want %v", got, want)
	}
	if got, want := warns[1].ContextMap()["dropped_total"], uint64(9); got != want {
		t.Errorf("second warning dropped_total got %v, want %v", got, want)
	}
}

func TestSubscriptionClose(t *testing.T) {
	b := NewBus(zap.NewNop())
	defer b.Close()
	s := b.Subscribe("*", 4)
	b.Publish("one", nil)
	s.Close()
	s.Close() // idempotent
	b.Publish("two", nil)

	if got := b.Stats().Subscribers; got != 0 {
		t.Errorf("Subscribers after Close got %d, want 0", got)
	}
	var got []string
	for ev := range s.C() { // must end: C() is closed
		got = append(got, ev.Tag)
	}
	if fmt.Sprint(got) != "[one]" {
		t.Errorf("events after Close got %q, want [one] (queued kept, later not delivered)", got)
	}
}

func TestBusClose(t *testing.T) {
	b := NewBus(zap.NewNop())
	s1 := b.Subscribe("*", 1)
	s2 := b.SubscribePrefix("salt/", 1)
	b.Close()
	b.Close()
	for i, s := range []*Subscription{s1, s2} {
		if _, ok := <-s.C(); ok {
			t.Errorf("sub %d: got an event, want closed channel", i)
		}
		s.Close() // still fine after the bus closed it
	}
	late := b.Subscribe("*", 1)
	if _, ok := <-late.C(); ok {
		t.Errorf("subscription on closed bus: got an event, want closed channel")
	}
	b.Publish("after", nil)
	if st := b.Stats(); st.Subscribers != 0 || st.Published != 1 {
		t.Errorf("Stats() after Close got %+v, want 0 subscribers, 1 published", st)
	}
}

func TestDefaultQueue(t *testing.T) {
	b := NewBus(nil)
	defer b.Close()
	for _, q := range []int{0, -5} {
		if got := cap(b.Subscribe("*", q).ch); got != DefaultQueue {
			t.Errorf("queue %d: got capacity %d, want %d", q, got, DefaultQueue)
		}
	}
}

// TestConcurrent publishes from many goroutines while subscriptions come
// and go; run with -race. Every event a subscriber read or dropped must add
// up to what was published while it was subscribed.
func TestConcurrent(t *testing.T) {
	b := NewBus(zap.NewNop())
	defer b.Close()
	const publishers, perPublisher = 4, 2000

	steady := b.Subscribe("load/*", 8)
	var steadyGot int
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for range steady.C() {
			steadyGot++
		}
	}()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	churnDone := make(chan struct{})
	go func() { // subscribe and close concurrently with publishing
		defer close(churnDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := b.SubscribePrefix("load/", 1)
			go s.Close() // close from another goroutine too
			s2 := b.Subscribe("*", 1)
			s2.Close()
		}
	}()
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perPublisher {
				b.Publish(fmt.Sprintf("load/%d/%d", p, i), map[string]any{"i": i})
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-churnDone

	steady.Close()
	<-readDone
	total := uint64(publishers * perPublisher)
	if got := uint64(steadyGot) + steady.Dropped(); got != total {
		t.Errorf("steady read+dropped got %d, want %d", got, total)
	}
	if got := b.Stats().Published; got != total {
		t.Errorf("Published got %d, want %d", got, total)
	}
	// Churned subscriptions closed asynchronously; wait for them to go.
	deadline := time.Now().Add(5 * time.Second)
	for b.Stats().Subscribers != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Subscribers got %d, want 0", b.Stats().Subscribers)
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkPublish(b *testing.B) {
	for _, subs := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			bus := NewBus(zap.NewNop())
			var wg sync.WaitGroup
			for range subs {
				s := bus.Subscribe("salt/job/*", 4096)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range s.C() {
					}
				}()
			}
			data := map[string]any{"_stamp": Stamp(time.Now()), "id": "cam1", "retcode": 0}
			tag := TagJobRet("20261122115704123456", "cam1")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				bus.Publish(tag, data)
			}
			b.StopTimer()
			bus.Close()
			wg.Wait()
			b.ReportMetric(float64(bus.Stats().Dropped)/float64(b.N), "dropped/op")
		})
	}
}
