package master

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// helloRaw dials the master over QUIC with a new key, says Hello as id and
// returns the master's first answer: its KeyStatus, or the Error it refused
// the Hello with (read from the Error frame, or from the connection's close
// when the frame was lost to it).
func helloRaw(t *testing.T, tm *testMaster, id string) protocol.Message {
	t.Helper()
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := quic.DialAddr(ctx, tm.Addr().String(), ident.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		t.Fatalf("dial master: %v", err)
	}
	defer conn.CloseWithError(0, "")
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := protocol.NewFramer(stream, protocol.DefaultMaxFrame)
	if err := f.Write(&protocol.Hello{ID: id, Version: "test", Caps: protocol.CapabilityVersion}); err != nil {
		t.Fatal(err)
	}
	stream.SetReadDeadline(time.Now().Add(waitTimeout))
	msg, err := f.Read()
	if err != nil {
		var ae *quic.ApplicationError
		if errors.As(err, &ae) {
			return &protocol.Error{Kind: protocol.Kind(ae.ErrorCode), Msg: ae.ErrorMessage}
		}
		t.Fatalf("hello %q: read the answer: %v", id, err)
	}
	return msg
}

// wantRefused marks the test failed unless msg is an Error of kind k.
func wantRefused(t *testing.T, what string, msg protocol.Message, k protocol.Kind) {
	t.Helper()
	if e, ok := msg.(*protocol.Error); !ok || e.Kind != k {
		t.Errorf("%s: got %#v, want an error of kind %q", what, msg, k)
	}
}

// wantStatus fails the test unless msg is a KeyStatus with status.
func wantStatus(t *testing.T, what string, msg protocol.Message, status string) {
	t.Helper()
	if ks, ok := msg.(*protocol.KeyStatus); !ok || ks.Status != status {
		t.Fatalf("%s: got %#v, want key status %q", what, msg, status)
	}
}

// TestAutoAcceptReactorHostileID runs Salt's documented auto-accept reactor
// (salt/auth -> wheel.key.accept match: {{ data['id'] }}, Salt 3006
// doc/topics/reactor/index.rst, auth-pending.sls) against a peer that says
// Hello as "cam9,evil": salt/key.py Key.name_match splits a match on ','
// and globs each part, so had the id been let in, the reactor would have
// accepted the pending key of "evil". The Hello is refused as malformed,
// fires no salt/auth event, and evil stays pending; a plain cam9 is
// accepted by the same reactor.
func TestAutoAcceptReactorHostileID(t *testing.T) {
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth-pending.sls")
	os.WriteFile(auth, []byte(`{% if 'act' in data and data['act'] == 'pend' and data['id'].startswith('cam') %}
minion_add:
  wheel.key.accept:
    - args:
      - match: {{ data['id'] }}
{% endif %}
`), 0o644)
	tm := startMaster(t, func(c *config.Master) {
		c.Reactor = []any{map[string]any{"salt/auth": []any{auth}}}
	}, nil)
	tm.startAgent(t, "evil", nil)
	tm.events.wait(t, event.TagAuth, idIs("evil", "act", "pend"))

	for _, id := range []string{"cam9,evil", "cam9,e*", "cam*", "cam9 evil", "cam[9]"} {
		wantRefused(t, "hello "+id, helloRaw(t, tm, id), protocol.KindMalformed)
	}
	wantStatus(t, "hello cam9", helloRaw(t, tm, "cam9"), protocol.KeyPending)
	tm.events.wait(t, event.TagKey, idIs("cam9", "act", "accept"))

	all := dict(t, tm.wheel(t, "key.list_all"))
	if got := strs(t, all["minions"]); !slices.Equal(got, []string{"cam9"}) {
		t.Errorf("accepted keys: got %v, want [cam9]", got)
	}
	if got := strs(t, all["minions_pre"]); !slices.Equal(got, []string{"evil"}) {
		t.Errorf("pending keys: got %v, want [evil]", got)
	}
	for _, ev := range tm.events.seen {
		if id, _ := ev.Data["id"].(string); ev.Tag == event.TagAuth && id != "evil" && id != "cam9" {
			t.Errorf("salt/auth event for %q: got %v, want none for a refused id", id, ev.Data)
		}
	}
}

// TestWheelKeysExact: the wheel functions that name one id act on that id
// only (key.gen_accept refuses ids Salt would read as a match; the _dict
// functions compare exactly), Salt's list form of match is globs, and key
// files left on disk under ids now invalid are listed and refused.
func TestWheelKeysExact(t *testing.T) {
	var pki string
	tm := startMaster(t, func(c *config.Master) {
		pki = c.PkiDir
		// Key files from before the id rule, under ids it now refuses.
		for _, f := range []string{"minions/cam9,evil", "minions_pre/cam*", "minions_rejected/-L"} {
			if err := os.MkdirAll(filepath.Join(pki, filepath.Dir(f)), 0o700); err != nil {
				t.Fatal(err)
			}
			id, _ := protocol.GenerateIdentity()
			if err := os.WriteFile(filepath.Join(pki, f), protocol.EncodePublicKey(id.Pub), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}, nil)
	for _, id := range []string{"cam9", "cam90", "evil"} {
		wantStatus(t, "hello "+id, helloRaw(t, tm, id), protocol.KeyPending)
	}

	for _, id := range []string{"cam9,evil", "cam*", "-L", "a b", "G@os:x"} {
		_, err := tm.call(t, api.OpWheel, "key.gen_accept", []any{id}, nil)
		if !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("key.gen_accept %q: got %v, want a bad request", id, err)
		}
	}

	// Salt's match_dict: exact ids, in the states named.
	got := tm.wheel(t, "key.accept_dict", map[string]any{"minions_pre": []any{"cam9", "cam*", "nosuch"}})
	if d := cmp.Diff(map[string]any{"minions": []any{"cam9"}}, got); d != "" {
		t.Errorf("key.accept_dict (-want +got):\n%s", d)
	}
	got = tm.wheel(t, "key.reject_dict", map[string]any{"minions": []any{"cam90"}})
	if d := cmp.Diff(map[string]any{"minions_rejected": []any{}}, got); d != "" {
		t.Errorf("key.reject_dict of a pending id named as accepted (-want +got):\n%s", d)
	}
	for _, bad := range []any{"cam9", map[string]any{"pending": []any{"x"}}, map[string]any{"minions_pre": "x"}} {
		if _, err := tm.call(t, api.OpWheel, "key.delete_dict", []any{bad}, nil); !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("key.delete_dict %v: got %v, want a bad request", bad, err)
		}
	}
	// Salt's list form: each item a glob.
	got = tm.wheel(t, "key.reject", []any{"cam9?", "nosuch*"})
	if d := cmp.Diff(map[string]any{"minions_rejected": []any{"cam90"}}, got); d != "" {
		t.Errorf("key.reject list (-want +got):\n%s", d)
	}
	if _, err := tm.call(t, api.OpWheel, "key.accept", []any{[]any{"cam9,evil"}}, nil); !api.IsCode(err, api.CodeBadRequest) {
		t.Errorf("key.accept with a list item holding ',': got %v, want a bad request", err)
	}

	all := dict(t, tm.wheel(t, "key.list_all"))
	want := map[string]any{
		"minions": []any{"cam9"}, "minions_pre": []any{"evil"}, "minions_rejected": []any{"cam90"}, "minions_denied": []any{},
		"invalid": map[string]any{"minions": []any{"cam9,evil"}, "minions_pre": []any{"cam*"}, "minions_rejected": []any{"-L"}},
	}
	if d := cmp.Diff(want, all); d != "" {
		t.Errorf("key.list_all (-want +got):\n%s", d)
	}
	// Nothing acts on the invalid ones; their files stay.
	tm.wheel(t, "key.delete", "*")
	for _, f := range []string{"minions/cam9,evil", "minions_pre/cam*", "minions_rejected/-L"} {
		if _, err := os.Stat(filepath.Join(pki, f)); err != nil {
			t.Errorf("%s: got %v, want it left for the operator", f, err)
		}
	}
}
