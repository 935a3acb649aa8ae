package protocol

import (
	"crypto/tls"
	"testing"
	"time"
)

// TestTicketKeysRotate: a listener's keys are the current period's and
// the previous one's, stable within a period, and each identity's own.
func TestTicketKeysRotate(t *testing.T) {
	a, _ := GenerateIdentity()
	b, _ := GenerateIdentity()
	now := time.Unix(1_800_000_000, 0)
	ka, kb := a.TicketKeys(now), b.TicketKeys(now)
	if len(ka) != 2 || ka[0] == ka[1] {
		t.Fatalf("keys %x: want two different ones", ka)
	}
	if ka[0] == kb[0] {
		t.Error("two identities have the same ticket key")
	}
	next := a.TicketKeys(now.Add(TicketKeyPeriod))
	if next[1] != ka[0] || next[0] == ka[0] {
		t.Errorf("a period later: keys %x, want a new one then %x", next, ka[0])
	}
}

// TestSessionCache: the cache keeps one session, for its key only.
func TestSessionCache(t *testing.T) {
	var c SessionCache
	s1, s2 := new(tls.ClientSessionState), new(tls.ClientSessionState)
	if _, ok := c.Get("halite"); ok {
		t.Fatal("empty cache: Get found a session")
	}
	c.Put("halite", s1)
	if got, ok := c.Get("halite"); !ok || got != s1 {
		t.Fatalf("Get after Put: %p %v, want %p", got, ok, s1)
	}
	if _, ok := c.Get("other"); ok {
		t.Error("Get of another key found a session")
	}
	c.Put("other", nil)
	if got, _ := c.Get("halite"); got != s1 {
		t.Error("Put(nil) of another key forgot this one")
	}
	c.Put("other", s2)
	if _, ok := c.Get("halite"); ok {
		t.Error("the first session is still kept after another's Put")
	}
	c.Put("other", nil)
	if _, ok := c.Get("other"); ok {
		t.Error("Put(nil) did not forget")
	}
}
