package protocol

import (
	"bytes"
	"testing"
)

// agree runs the Hello/KeyStatus key agreement between an agent and a
// master and returns both sides' MAC keys.
func agree(t *testing.T, agent, master *Identity, id string) (agentKey, masterKey []byte) {
	t.Helper()
	akx, _ := NewKX()
	hello := &Hello{ID: id, KX: akx.Public(), KXSig: SignAgentKX(agent, id, akx.Public())}
	// master side
	if err := VerifyAgentKX(agent.Pub, hello.ID, hello.KX, hello.KXSig); err != nil {
		t.Fatalf("master verifying the agent's half: %v", err)
	}
	mkx, _ := NewKX()
	ks := &KeyStatus{Status: KeyAccepted, KX: mkx.Public(), KXSig: SignMasterKX(master, id, hello.KX, mkx.Public())}
	masterKey, err := mkx.MACKey(hello.KX, id, hello.KX, ks.KX)
	if err != nil {
		t.Fatal(err)
	}
	// agent side
	if err := VerifyMasterKX(master.Pub, id, akx.Public(), ks.KX, ks.KXSig); err != nil {
		t.Fatalf("agent verifying the master's half: %v", err)
	}
	agentKey, err = akx.MACKey(ks.KX, id, akx.Public(), ks.KX)
	if err != nil {
		t.Fatal(err)
	}
	return agentKey, masterKey
}

func TestKeyAgreement(t *testing.T) {
	agent, _ := GenerateIdentity()
	master, _ := GenerateIdentity()
	ak, mk := agree(t, agent, master, "cam1")
	if !bytes.Equal(ak, mk) || len(ak) != MACKeySize {
		t.Fatalf("keys differ or wrong size: %x vs %x", ak, mk)
	}
	ak2, _ := agree(t, agent, master, "cam1")
	if bytes.Equal(ak, ak2) {
		t.Errorf("two sessions agreed the same key")
	}

	// A relay substituting its own half cannot make a valid signature.
	relay, _ := GenerateIdentity()
	rkx, _ := NewKX()
	if err := VerifyAgentKX(agent.Pub, "cam1", rkx.Public(), SignAgentKX(relay, "cam1", rkx.Public())); KindOf(err) != KindBadSig {
		t.Errorf("substituted agent half: got %v, want KindBadSig", err)
	}
	akx, _ := NewKX()
	sig := SignMasterKX(master, "cam1", akx.Public(), rkx.Public())
	if err := VerifyMasterKX(master.Pub, "cam2", akx.Public(), rkx.Public(), sig); KindOf(err) != KindBadSig {
		t.Errorf("master half replayed for another id: got %v, want KindBadSig", err)
	}

	// MAC-tagged returns and events open with the key, not without it.
	body := &ReturnBody{ID: "cam1", JID: "20261122120000000000", Fun: "test.ping", Return: true, Success: true}
	r, err := MACReturn(ak, body)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.OpenWith(agent.Pub, mk, "cam1"); err != nil || got.Return != true {
		t.Errorf("OpenWith: %v, %v", got, err)
	}
	if _, err := r.Open(agent.Pub, "cam1"); KindOf(err) != KindBadSig {
		t.Errorf("MAC return opened without a key: %v", err)
	}
	if _, err := r.OpenWith(agent.Pub, ak2, "cam1"); KindOf(err) != KindBadSig {
		t.Errorf("MAC return opened with another session's key: %v", err)
	}
	if _, err := r.OpenWith(agent.Pub, mk, "cam2"); KindOf(err) != KindWrongID {
		t.Errorf("MAC return for another id: %v, want KindWrongID", err)
	}
	ev, _ := MACEvent(ak, &EventBody{ID: "cam1", Tag: "a/b", Stamp: "x"})
	if _, err := ev.OpenWith(agent.Pub, mk, "cam1"); err != nil {
		t.Errorf("MAC event: %v", err)
	}
	// A MAC tag as a return never opens as an event (domains differ).
	asEvent := &Event{Signed: r.Signed}
	if _, err := asEvent.OpenWith(agent.Pub, mk, "cam1"); KindOf(err) != KindBadSig {
		t.Errorf("return tag accepted as an event: %v", err)
	}
	// Jobs must carry the master's signature; a MAC never opens a job.
	j := &Job{Signed: r.Signed}
	if _, err := j.Open(master.Pub); KindOf(err) != KindBadSig {
		t.Errorf("MAC-tagged job: %v, want KindBadSig", err)
	}
}

func BenchmarkOpenReturnMAC(b *testing.B) {
	agent, _ := GenerateIdentity()
	key := bytes.Repeat([]byte{7}, MACKeySize)
	r, _ := MACReturn(key, &ReturnBody{ID: "cam1", JID: "20261122120000000000", Fun: "test.ping", Return: true, Success: true})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.OpenWith(agent.Pub, key, "cam1"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSessionKXDeterministic(t *testing.T) {
	master, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := NewKX()
	a, err := master.SessionKX("cam1", agent.Public())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := master.SessionKX("cam1", agent.Public())
	if !bytes.Equal(a.Public(), b.Public()) {
		t.Errorf("same hello, halves differ: %x, %x", a.Public(), b.Public())
	}
	other, _ := NewKX()
	c, _ := master.SessionKX("cam1", other.Public())
	d, _ := master.SessionKX("cam2", agent.Public())
	if bytes.Equal(a.Public(), c.Public()) || bytes.Equal(a.Public(), d.Public()) {
		t.Errorf("another agent half or id gave the same master half")
	}
	k1, err := agent.MACKey(a.Public(), "cam1", agent.Public(), a.Public())
	if err != nil {
		t.Fatal(err)
	}
	k2, err := b.MACKey(agent.Public(), "cam1", agent.Public(), a.Public())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1, k2) {
		t.Errorf("MAC keys differ between agent and master")
	}
	if _, err := master.SessionKX("cam1", []byte{1}); err == nil {
		t.Errorf("SessionKX(short half) = nil error")
	}
}
