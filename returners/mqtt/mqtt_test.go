package mqtt

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTopic(t *testing.T) {
	if got, want := Topic("p", "salt/job/1/ret/a+b#"), "p/salt/job/1/ret/a_b_"; got != want {
		t.Fatalf("Topic = %q, want %q", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	prefix := "halite-test/" + rettest.Unique()
	sub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://127.0.0.1:1883").SetClientID("sub-" + rettest.Unique()))
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("Mosquitto at 127.0.0.1:1883 does not answer (run tools/ci/services.sh): %v", tok.Error())
	}
	defer sub.Disconnect(100)
	var mu sync.Mutex
	got := map[string][]byte{}
	if tok := sub.Subscribe(prefix+"/#", 1, func(_ paho.Client, m paho.Message) {
		mu.Lock()
		got[m.Topic()] = m.Payload()
		mu.Unlock()
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	ctx := rettest.Ctx(t)
	r, err := returners.Open(ctx, "mqtt", returners.RoleEvent, returners.Config{MasterID: "m-" + rettest.Unique(),
		Opts: map[string]any{"mqtt.broker": "tcp://127.0.0.1:1883", "mqtt.topic_prefix": prefix}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	jid := rettest.JID(0)
	// The client connects in the background: retry as the queue would.
	deadline := time.Now().Add(20 * time.Second)
	for r.Returner(ctx, rettest.Ret(jid, "web1", "test.ping", true)) != nil {
		if time.Now().After(deadline) {
			t.Fatal("mqtt returner never connected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rettest.Events(t, r.(returners.EventReturner), 50, 10)
	want := []string{prefix + "/salt/job/" + jid + "/ret/web1", prefix + "/halite/test/49"}
	deadline = time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, w := range want {
			if got[w] != nil {
				n++
			}
		}
		ret := got[want[0]]
		mu.Unlock()
		if n == len(want) {
			var m map[string]any
			if err := json.Unmarshal(ret, &m); err != nil || m["id"] != "web1" {
				t.Fatalf("return payload = %s (%v), want the return dict of web1", ret, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics received: %d of %v", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
