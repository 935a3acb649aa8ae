package state

import "fmt"

// Chunk is one entry of Salt's low state: a state function and everything
// the SLS declared for it, by Salt's keys. Besides the function's own
// arguments it holds "state" (the module, e.g. "file"), "fun" ("managed"),
// "name", "__id__", "__sls__", "__env__", "order", and the requisites
// ("require": [{"file": "/etc/motd"}], ...). It is a plain map so that it
// crosses the wire, the job cache and state.show_lowstate exactly as Salt
// shows it.
type Chunk map[string]any

func (c Chunk) str(k string) string {
	s, _ := c[k].(string)
	return s
}

// State is the state module, e.g. "file".
func (c Chunk) State() string { return c.str("state") }

// Fun is the state function without its module, e.g. "managed".
func (c Chunk) Fun() string { return c.str("fun") }

// Name is the state's name argument.
func (c Chunk) Name() string { return c.str("name") }

// ID is the state's ID declaration.
func (c Chunk) ID() string { return c.str("__id__") }

// SLS is the SLS file the state comes from, e.g. "web.nginx".
func (c Chunk) SLS() string { return c.str("__sls__") }

// Env is the saltenv the state was compiled in.
func (c Chunk) Env() string { return c.str("__env__") }

// Tag is the key of the state's return: Salt's _gen_tag,
// "<state>_|-<__id__>_|-<name>_|-<fun>" (salt/state.py).
func Tag(c Chunk) string {
	return fmt.Sprintf("%s_|-%s_|-%s_|-%s", c.State(), c.ID(), c.Name(), c.Fun())
}

// Result is a state's result: True, False, or None (under test=True, the
// state would change something; Salt prints it yellow).
type Result int8

const (
	False Result = iota // the zero value: a state that says nothing failed
	True
	None
)

// Value is the result as Salt returns it: true, false or nil.
func (r Result) Value() any {
	switch r {
	case True:
		return true
	case None:
		return nil
	}
	return false
}

// ResultOf reads a result from its returned value (true, false or nil).
func ResultOf(v any) Result {
	switch v {
	case true:
		return True
	case nil:
		return None
	}
	return False
}

// Ret is what one state function returns: Salt's ret dict before the
// state system adds __run_num__, start_time, duration, __sls__ and __id__.
type Ret struct {
	Name    string
	Result  Result
	Comment string
	Changes map[string]any // nil or empty: nothing changed
}

// Map is the ret as Salt returns it for one state, with the fields the
// state system adds: run number, start time (local "HH:MM:SS.ffffff"),
// duration in milliseconds, SLS and ID.
func (r Ret) Map(c Chunk, runNum int, start string, durationMS float64) map[string]any {
	changes := r.Changes
	if changes == nil {
		changes = map[string]any{}
	}
	return map[string]any{
		"name":        r.Name,
		"result":      r.Result.Value(),
		"comment":     r.Comment,
		"changes":     changes,
		"__run_num__": runNum,
		"start_time":  start,
		"duration":    durationMS,
		"__sls__":     c.SLS(),
		"__id__":      c.ID(),
	}
}
