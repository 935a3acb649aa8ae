// Package nats is the nats returner: returns and events published to NATS
// JetStream, a subject per tag. It registers itself as "nats".
//
// An event tagged salt/job/<jid>/ret/<id> goes to the subject
// <prefix>.salt.job.<jid>.ret.<id>: '/' becomes '.', and the characters a
// subject token may not hold ('.', ' ', '*', '>') become '_'. A return
// goes to the subject of its salt/job/<jid>/ret/<id> tag. Each message's
// Nats-Msg-Id is (jid, id) for returns, so a retried publish is dropped by
// JetStream's duplicate window.
//
// Options: nats.url (nats://127.0.0.1:4222), nats.subject_prefix (halite),
// nats.stream (HALITE, made when missing with the subjects <prefix>.>),
// nats.user, nats.password, nats.token, nats.creds (a file).
package nats

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("nats", returners.Caps{Event: true}, New)
}

// Returner publishes to JetStream.
type Returner struct {
	nc     *natsgo.Conn
	js     jetstream.JetStream
	prefix string
	stream string
	made   atomic.Bool // set once the schema (stream) is there
}

// New connects; a server that is down at start is retried in the
// background by the client, and publishes fail until it answers.
func New(_ context.Context, cfg returners.Config) (returners.Returner, error) {
	o := cfg.Options("nats")
	opts := []natsgo.Option{
		natsgo.Name("halite returner"), natsgo.RetryOnFailedConnect(true), natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(500 * time.Millisecond), natsgo.Timeout(5 * time.Second),
	}
	if u := o.String("user", ""); u != "" {
		opts = append(opts, natsgo.UserInfo(u, o.String("password", "")))
	}
	if t := o.String("token", ""); t != "" {
		opts = append(opts, natsgo.Token(t))
	}
	if c := o.String("creds", ""); c != "" {
		opts = append(opts, natsgo.UserCredentials(c))
	}
	nc, err := natsgo.Connect(o.String("url", natsgo.DefaultURL), opts...)
	if err != nil {
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats jetstream: %w", err)
	}
	return &Returner{nc: nc, js: js, prefix: o.String("subject_prefix", "halite"), stream: o.String("stream", "HALITE")}, nil
}

// Close closes the connection.
func (r *Returner) Close() error {
	r.nc.Close()
	return nil
}

// Subject is the subject of tag under prefix.
func Subject(prefix, tag string) string {
	parts := strings.Split(strings.Trim(tag, "/"), "/")
	for i, p := range parts {
		if p == "" {
			p = "_"
		}
		parts[i] = strings.Map(func(c rune) rune {
			switch c {
			case '.', ' ', '*', '>', '\t', '\r', '\n':
				return '_'
			}
			return c
		}, p)
	}
	return prefix + "." + strings.Join(parts, ".")
}

func (r *Returner) ensure(ctx context.Context) error {
	if r.made.Load() {
		return nil
	}
	_, err := r.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: r.stream, Subjects: []string{r.prefix + ".>"}, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("nats stream %s: %w", r.stream, err)
	}
	r.made.Store(true)
	return nil
}

func (r *Returner) publish(ctx context.Context, subject string, v any, msgID string) error {
	b, err := returners.MarshalJSON(v)
	if err != nil {
		return err
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := r.js.Publish(ctx, subject, b, opts...); err != nil {
		if strings.Contains(err.Error(), "maximum payload") {
			return returners.Permanent(fmt.Errorf("nats publish %s: %w", subject, err))
		}
		return fmt.Errorf("nats publish %s: %w", subject, err)
	}
	return nil
}

// Returner publishes the return dict on its return tag's subject.
func (r *Returner) Returner(ctx context.Context, ret map[string]any) error {
	if err := r.ensure(ctx); err != nil {
		return err
	}
	jid, id := returners.Str(ret, "jid"), returners.Str(ret, "id")
	return r.publish(ctx, Subject(r.prefix, "salt/job/"+jid+"/ret/"+id), ret, jid+"/"+id)
}

// EventReturn publishes each event, {"tag", "data"}, on its tag's subject,
// waiting for the acks together.
func (r *Returner) EventReturn(ctx context.Context, events []returners.Event) error {
	if err := r.ensure(ctx); err != nil {
		return err
	}
	futs := make([]jetstream.PubAckFuture, 0, len(events))
	for _, ev := range events {
		b, err := returners.MarshalJSON(ev)
		if err != nil {
			return err
		}
		f, err := r.js.PublishAsync(Subject(r.prefix, ev.Tag), b)
		if err != nil {
			return fmt.Errorf("nats publish: %w", err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("nats publish %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return fmt.Errorf("nats publish: %w", ctx.Err())
		}
	}
	return nil
}
