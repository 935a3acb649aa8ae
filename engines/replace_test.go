package engines

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/event"
)

func init() {
	// word_test fires word/<name>/<word> when it starts and word/<name>/stop
	// when it stops.
	Register("word_test", func(o *Opts) (Engine, error) {
		word, err := o.Required("word")
		if err != nil {
			return nil, err
		}
		return EngineFunc(func(ctx context.Context, env *Env) error {
			env.Fire("word/"+env.Name+"/"+word, nil)
			<-ctx.Done()
			env.Fire("word/"+env.Name+"/stop", nil)
			return nil
		}), nil
	})
}

// TestManagerReplace: a reloaded engines: option stops the engines it no
// longer lists, restarts those whose options changed, starts new ones,
// leaves the others alone; a bad one is refused whole and changes nothing.
func TestManagerReplace(t *testing.T) {
	eng := func(name, word string) any {
		return map[string]any{name: map[string]any{"engine_module": "word_test", "word": word}}
	}
	bus := event.NewBus(nil)
	defer bus.Close()
	sub := bus.Subscribe("word/*", 100)
	o := Options{Config: []any{eng("a", "one"), eng("b", "one"), eng("c", "one")}, Log: zaptest.NewLogger(t)}
	o.Env.Bus = bus
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var seen []string
	saw := func(tag string) func() bool {
		return func() bool {
			for {
				select {
				case ev := <-sub.C():
					seen = append(seen, ev.Tag)
				default:
					for _, s := range seen {
						if s == tag {
							return true
						}
					}
					return false
				}
			}
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		waitFor(t, n+" started", saw("word/"+n+"/one"))
	}

	bad := []struct {
		conf []any
		want string
	}{
		{[]any{eng("a", "two"), map[string]any{"d": map[string]any{"engine_module": "word_test"}}}, "engine d: option word is required"},
		{[]any{"nosuch"}, `engine nosuch: no engine module "nosuch"`},
		{[]any{42}, "engines"},
	}
	for _, tt := range bad {
		if err := m.Replace(tt.conf); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Replace(%v): got %v, want an error with %q", tt.conf, err, tt.want)
		}
		if err := m.Check(tt.conf); err == nil {
			t.Errorf("Check(%v): got nil, want an error", tt.conf)
		}
	}
	if got := m.Len(); got != 3 {
		t.Errorf("engines after refused replaces: got %d, want 3", got)
	}

	seen = nil
	if err := m.Replace([]any{eng("a", "one"), eng("b", "two"), eng("d", "one")}); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	waitFor(t, "b restarted with its new word", saw("word/b/two"))
	waitFor(t, "c stopped", saw("word/c/stop"))
	waitFor(t, "d started", saw("word/d/one"))
	for _, tag := range seen {
		if strings.HasPrefix(tag, "word/a/") {
			t.Errorf("unchanged engine a was disturbed: %s", tag)
		}
	}
	var names []string
	for _, st := range m.Status() {
		names = append(names, st.Name)
	}
	if got, want := strings.Join(names, ","), "a,b,d"; got != want {
		t.Errorf("status names: got %s, want %s", got, want)
	}
}
