package nats

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSubject(t *testing.T) {
	for _, c := range []struct{ tag, want string }{
		{"salt/job/20260101000000000000/ret/web1.example.com", "p.salt.job.20260101000000000000.ret.web1_example_com"},
		{"salt/auth", "p.salt.auth"},
		{"my tag/*/>", "p.my_tag._._"},
		{"/a//b/", "p.a._.b"},
	} {
		if got := Subject("p", c.tag); got != c.want {
			t.Errorf("Subject(p, %q) = %q, want %q", c.tag, got, c.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	nc, err := natsgo.Connect("nats://127.0.0.1:4222", natsgo.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS at 127.0.0.1:4222 does not answer (run tools/ci/services.sh): %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	u := rettest.Unique()
	prefix, stream := "ht"+u, "HT"+u
	ctx := rettest.Ctx(t)
	defer js.DeleteStream(context.Background(), stream)
	r, err := returners.Open(ctx, "nats", returners.RoleEvent, returners.Config{Opts: map[string]any{
		"nats.url": "nats://127.0.0.1:4222", "nats.subject_prefix": prefix, "nats.stream": stream}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	jid := rettest.JID(0)
	ret := rettest.Ret(jid, "web1", "test.ping", true)
	for range 2 { // a retry is dropped by the duplicate window
		if err := r.Returner(ctx, ret); err != nil {
			t.Fatal(err)
		}
	}
	sent := rettest.Events(t, r.(returners.EventReturner), 500, 200)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1 + len(sent)); info.State.Msgs != want {
		t.Fatalf("stream %s holds %d messages, want %d (one return, %d events)", stream, info.State.Msgs, want, len(sent))
	}
	msg, err := st.GetLastMsgForSubject(ctx, prefix+".salt.job."+jid+".ret.web1")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(msg.Data, &got); err != nil || got["id"] != "web1" || got["return"] != true {
		t.Fatalf("return message = %s (%v), want the return dict of web1", msg.Data, err)
	}
	msg, err = st.GetLastMsgForSubject(ctx, prefix+".halite.test.42")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msg.Data, &got); err != nil || got["tag"] != "halite/test/42" {
		t.Fatalf("event message = %s (%v), want tag halite/test/42", msg.Data, err)
	}
}
