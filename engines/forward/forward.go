// Package forward is the event_forward engine: events copied to a message
// bus, NATS (core or JetStream) or an MQTT broker, one subject or topic per
// tag. It registers itself with package engines; the master links it, the
// agent does not (the clients are about 2 MiB).
package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/returners/mqtt"
	"github.com/halite-fleet/halite/returners/nats"
	"github.com/halite-fleet/halite/targets"
)

// The event_forward engine: each event whose tag matches tags (default
// every event) is published as JSON {"tag", "data"}: to NATS on the subject
// <prefix>.<tag with / as .> (the returner's naming), through JetStream
// when jetstream: True (the stream, default HALITE, is made for
// <prefix>.> when missing); or to MQTT on the topic <prefix>/<tag> at qos.
// The clients reconnect by themselves and buffer what is published
// meanwhile (NATS: 8 MiB; MQTT: paho's in-memory store); events that fail
// beyond that are counted and logged, never retried forever.
//
//	engines:
//	  - to_nats:
//	      engine_module: event_forward
//	      nats: nats://127.0.0.1:4222
//	      jetstream: True
//	  - to_mqtt:
//	      engine_module: event_forward
//	      mqtt: tcp://127.0.0.1:1883
//	      tags: ['salt/beacon/*']
//	      qos: 1
func init() {
	engines.Register("event_forward", func(o *engines.Opts) (engines.Engine, error) {
		f := &forwarder{}
		var err error
		if f.natsURL, err = o.String("nats", ""); err != nil {
			return nil, err
		}
		if f.mqttURL, err = o.String("mqtt", ""); err != nil {
			return nil, err
		}
		if (f.natsURL == "") == (f.mqttURL == "") {
			return nil, fmt.Errorf("option nats or mqtt is required (one of them: a NATS URL or an MQTT broker URL)")
		}
		for key, u := range map[string]string{"nats": f.natsURL, "mqtt": f.mqttURL} {
			if u == "" {
				continue
			}
			if pu, err := url.Parse(u); err != nil || pu.Host == "" {
				return nil, fmt.Errorf("option %s: expected a URL like %s://127.0.0.1, got %q", key, map[string]string{"nats": "nats", "mqtt": "tcp"}[key], u)
			}
		}
		if f.prefix, err = o.String("prefix", "halite"); err != nil {
			return nil, err
		}
		if f.tags, err = o.Strings("tags", []string{"*"}); err != nil {
			return nil, err
		}
		if f.jetstream, err = o.Bool("jetstream", false); err != nil {
			return nil, err
		}
		if f.stream, err = o.String("stream", "HALITE"); err != nil {
			return nil, err
		}
		if f.qos, err = o.Int("qos", 0, 0, 2); err != nil {
			return nil, err
		}
		if f.clientID, err = o.String("client_id", ""); err != nil {
			return nil, err
		}
		if f.mqttURL != "" && f.jetstream {
			return nil, fmt.Errorf("option jetstream is for nats")
		}
		return f, nil
	})
}

type forwarder struct {
	natsURL, mqttURL string
	prefix           string
	tags             []string
	jetstream        bool
	stream           string
	qos              int
	clientID         string
}

func (f *forwarder) match(tag string) bool {
	for _, g := range f.tags {
		if g == "*" || g == tag || targets.MatchGlob(g, tag) {
			return true
		}
	}
	return false
}

func (f *forwarder) Run(ctx context.Context, env *engines.Env) error {
	var publish func(tag string, b []byte) error
	if f.natsURL != "" {
		nc, err := natsgo.Connect(f.natsURL, natsgo.Name("halite event_forward "+env.ID), natsgo.RetryOnFailedConnect(true),
			natsgo.MaxReconnects(-1), natsgo.ReconnectWait(500*time.Millisecond), natsgo.Timeout(5*time.Second))
		if err != nil {
			return fmt.Errorf("nats connect %s: %w", f.natsURL, err)
		}
		defer nc.Close()
		if f.jetstream {
			js, err := jetstream.New(nc)
			if err != nil {
				return fmt.Errorf("nats jetstream: %w", err)
			}
			made := false
			publish = func(tag string, b []byte) error {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if !made {
					if _, err := js.CreateOrUpdateStream(pctx, jetstream.StreamConfig{Name: f.stream, Subjects: []string{f.prefix + ".>"}}); err != nil {
						return fmt.Errorf("nats stream %s: %w", f.stream, err)
					}
					made = true
				}
				_, err := js.Publish(pctx, nats.Subject(f.prefix, tag), b)
				return err
			}
		} else {
			publish = func(tag string, b []byte) error { return nc.Publish(nats.Subject(f.prefix, tag), b) }
			defer nc.Flush()
		}
	} else {
		id := f.clientID
		if id == "" {
			id = "halite-forward-" + env.ID + "-" + env.Name
		}
		c := paho.NewClient(paho.NewClientOptions().AddBroker(f.mqttURL).SetClientID(id).
			SetConnectRetry(true).SetConnectRetryInterval(time.Second).SetAutoReconnect(true).
			SetConnectTimeout(5 * time.Second).SetCleanSession(true))
		c.Connect()
		defer c.Disconnect(250)
		prefix := strings.TrimSuffix(f.prefix, "/")
		publish = func(tag string, b []byte) error {
			t := c.Publish(mqtt.Topic(prefix, tag), byte(f.qos), false, b)
			if f.qos == 0 {
				return nil
			}
			if !t.WaitTimeout(5 * time.Second) {
				return fmt.Errorf("mqtt publish: no ack in 5s")
			}
			return t.Error()
		}
	}
	sub := env.Bus.Subscribe("*", 65536)
	defer sub.Close()
	var failed uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-sub.C():
			if !ok {
				return nil
			}
			if !f.match(ev.Tag) {
				continue
			}
			b, err := json.Marshal(map[string]any{"tag": ev.Tag, "data": ev.Data})
			if err != nil {
				env.Log.Warn("event_forward: event not encodable", zap.String("tag", ev.Tag), zap.Error(err))
				continue
			}
			if err := publish(ev.Tag, b); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				failed++
				if failed == 1 || failed%1000 == 0 {
					env.Log.Warn("event_forward: publish failed", zap.String("tag", ev.Tag), zap.Uint64("failed_total", failed), zap.Error(err))
				}
			}
		}
	}
}
