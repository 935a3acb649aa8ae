// Package mqtt is the mqtt returner: returns and events published to an
// MQTT broker, a topic per tag. It registers itself as "mqtt".
//
// An event goes to <topic_prefix>/<tag> (the characters '+' and '#' become
// '_'); a return to <topic_prefix>/salt/job/<jid>/ret/<id>. Payloads are
// JSON: the return dict, or {"tag", "data"}.
//
// Options: mqtt.broker (tcp://127.0.0.1:1883), mqtt.topic_prefix
// (halite), mqtt.qos (1), mqtt.retain (False), mqtt.client_id
// (halite-<master id>), mqtt.username, mqtt.password.
package mqtt

import (
	"context"
	"fmt"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("mqtt", returners.Caps{Event: true}, New)
}

// Returner publishes to one broker.
type Returner struct {
	c      paho.Client
	prefix string
	qos    byte
	retain bool
}

// New connects in the background: the client keeps trying, and publishes
// fail until the broker answers.
func New(_ context.Context, cfg returners.Config) (returners.Returner, error) {
	o := cfg.Options("mqtt")
	qos, err := o.Int("qos", 1)
	if err != nil {
		return nil, err
	}
	if qos < 0 || qos > 2 {
		return nil, fmt.Errorf("mqtt.qos must be 0, 1 or 2, got %d", qos)
	}
	retain, err := o.Bool("retain", false)
	if err != nil {
		return nil, err
	}
	opts := paho.NewClientOptions().
		AddBroker(o.String("broker", "tcp://127.0.0.1:1883")).
		SetClientID(o.String("client_id", "halite-"+cfg.MasterID)).
		SetUsername(o.String("username", "")).SetPassword(o.String("password", "")).
		SetConnectRetry(true).SetConnectRetryInterval(time.Second).SetAutoReconnect(true).
		SetConnectTimeout(5 * time.Second).SetCleanSession(true)
	c := paho.NewClient(opts)
	c.Connect() // retried in the background
	return &Returner{c: c, prefix: strings.TrimSuffix(o.String("topic_prefix", "halite"), "/"), qos: byte(qos), retain: retain}, nil
}

// Close disconnects.
func (r *Returner) Close() error {
	r.c.Disconnect(250)
	return nil
}

// Topic is the topic of tag under prefix.
func Topic(prefix, tag string) string {
	return prefix + "/" + strings.NewReplacer("+", "_", "#", "_").Replace(strings.TrimPrefix(tag, "/"))
}

func (r *Returner) publish(ctx context.Context, topic string, v any) error {
	b, err := returners.MarshalJSON(v)
	if err != nil {
		return err
	}
	if !r.c.IsConnectionOpen() {
		return fmt.Errorf("mqtt: not connected to the broker")
	}
	t := r.c.Publish(topic, r.qos, r.retain, b)
	select {
	case <-t.Done():
	case <-ctx.Done():
		return fmt.Errorf("mqtt publish %s: %w", topic, ctx.Err())
	}
	if err := t.Error(); err != nil {
		return fmt.Errorf("mqtt publish %s: %w", topic, err)
	}
	return nil
}

// Returner publishes the return dict.
func (r *Returner) Returner(ctx context.Context, ret map[string]any) error {
	return r.publish(ctx, Topic(r.prefix, "salt/job/"+returners.Str(ret, "jid")+"/ret/"+returners.Str(ret, "id")), ret)
}

// EventReturn publishes each event.
func (r *Returner) EventReturn(ctx context.Context, events []returners.Event) error {
	for _, ev := range events {
		if err := r.publish(ctx, Topic(r.prefix, ev.Tag), ev); err != nil {
			return err
		}
	}
	return nil
}
