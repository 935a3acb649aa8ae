package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/event"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eclipse/paho.mqtt.golang.(*router).matchAndDispatch.func1"))
}

func unique() string { return fmt.Sprintf("%d", time.Now().UnixNano()%1e9) }

func run(t *testing.T, bus *event.Bus, conf []any) {
	t.Helper()
	m, err := engines.New(engines.Options{Config: conf, Env: engines.Env{Role: "master", ID: "m1", Bus: bus}, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(30 * time.Second)
	for bus.Stats().Subscribers < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the engine never subscribed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNATSCore(t *testing.T) {
	nc, err := natsgo.Connect("nats://127.0.0.1:4222", natsgo.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS at 127.0.0.1:4222 does not answer (run tools/ci/services.sh): %v", err)
	}
	defer nc.Close()
	prefix := "fw" + unique()
	sub, err := nc.SubscribeSync(prefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	bus := event.NewBus(nil)
	defer bus.Close()
	run(t, bus, []any{map[string]any{"to_nats": map[string]any{"engine_module": "event_forward", "nats": "nats://127.0.0.1:4222",
		"prefix": prefix, "tags": []any{"salt/beacon/*"}}}})
	// The engine connects in the background: publish until a message comes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		bus.Publish("salt/job/1/new", map[string]any{"skip": true})
		bus.Publish("salt/beacon/cam1/memusage/", map[string]any{"memusage": 81.5})
		msg, err := sub.NextMsg(200 * time.Millisecond)
		if err == nil {
			if msg.Subject != prefix+".salt.beacon.cam1.memusage" {
				t.Errorf("subject %s", msg.Subject)
			}
			var v map[string]any
			json.Unmarshal(msg.Data, &v)
			if v["tag"] != "salt/beacon/cam1/memusage/" || v["data"].(map[string]any)["memusage"] != 81.5 {
				t.Errorf("message %s", msg.Data)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no message on NATS")
		}
	}
}

func TestNATSJetStream(t *testing.T) {
	nc, err := natsgo.Connect("nats://127.0.0.1:4222", natsgo.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS at 127.0.0.1:4222 does not answer (run tools/ci/services.sh): %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	u := unique()
	prefix, stream := "fj"+u, "FJ"+u
	defer js.DeleteStream(context.Background(), stream)
	bus := event.NewBus(nil)
	defer bus.Close()
	run(t, bus, []any{map[string]any{"to_js": map[string]any{"engine_module": "event_forward", "nats": "nats://127.0.0.1:4222",
		"prefix": prefix, "jetstream": true, "stream": stream}}})
	for i := 0; i < 5; i++ {
		bus.Publish(fmt.Sprintf("myco/event/%d", i), map[string]any{"i": i})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		st, err := js.Stream(ctx, stream)
		if err == nil {
			info, err := st.Info(ctx)
			if err == nil && info.State.Msgs >= 5 {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the stream %s never held 5 messages: %v", stream, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMQTT(t *testing.T) {
	prefix := "fm" + unique()
	got := make(chan paho.Message, 10)
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://127.0.0.1:1883").SetClientID("fwtest" + unique()))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("Mosquitto at 127.0.0.1:1883 does not answer (run tools/ci/services.sh): %v", tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Subscribe(prefix+"/#", 1, func(_ paho.Client, m paho.Message) { got <- m }); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	bus := event.NewBus(nil)
	defer bus.Close()
	run(t, bus, []any{map[string]any{"to_mqtt": map[string]any{"engine_module": "event_forward", "mqtt": "tcp://127.0.0.1:1883",
		"prefix": prefix, "qos": 1}}})
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-got:
			if m.Topic() != prefix+"/salt/beacon/cam1/load/" || !strings.Contains(string(m.Payload()), `"1m":0.5`) {
				t.Errorf("message %s %s", m.Topic(), m.Payload())
			}
			return
		case <-tick.C:
			bus.Publish("salt/beacon/cam1/load/", map[string]any{"1m": 0.5})
		case <-deadline:
			t.Fatal("no message from the broker")
		}
	}
}

func TestBadOptions(t *testing.T) {
	for _, tt := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{}, "option nats or mqtt is required"},
		{map[string]any{"nats": "nats://x", "mqtt": "tcp://y"}, "option nats or mqtt is required"},
		{map[string]any{"nats": "127.0.0.1"}, "option nats: expected a URL"},
		{map[string]any{"mqtt": "tcp://x:1883", "jetstream": true}, "option jetstream is for nats"},
		{map[string]any{"mqtt": "tcp://x:1883", "qos": 3}, "option qos: 3 is out of range"},
	} {
		_, err := engines.New(engines.Options{Config: []any{map[string]any{"event_forward": tt.opts}}})
		if err == nil || !strings.Contains(err.Error(), "engine event_forward: "+tt.want) {
			t.Errorf("New(%v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
}
