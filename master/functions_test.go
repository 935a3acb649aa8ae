package master

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/protocol"
)

// TestSeenFunctions: the names kept for completion come from successful
// returns only, and an agent's hostile names (shell syntax, control
// characters, oversized, not module.function) are not kept.
func TestSeenFunctions(t *testing.T) {
	var m Master
	rets := []*protocol.ReturnBody{
		{Fun: "test.ping", Success: true, Return: true},
		{Fun: "nosuch.fun", Success: false, Return: "'nosuch.fun' is not available."},
		{Fun: "cmd.retcode", Success: true, Retcode: 1},
		{Fun: "sys.list_functions", Success: true, Return: []any{
			"grains.items", "my_mod.v2_call", "$(touch pwned).x", "a.b;rm -rf /", "x.y\nz.w", "noDot", ".lead.dot",
			"trail.", "two..dots", "9mod.f", strings.Repeat("a", 100) + "." + strings.Repeat("b", 100), 42, nil,
		}},
		{Fun: "$(reboot).now", Success: true},
	}
	for _, r := range rets {
		m.sawReturn(r)
	}
	got := m.functions.list()
	want := []string{"grains.items", "my_mod.v2_call", "sys.list_functions", "test.ping"}
	if !slices.Equal(got, want) {
		t.Errorf("names kept: got %q, want %q", got, want)
	}
}

// TestSeenFunctionsBound: an agent returning endless names fills the set
// to its bound and no further.
func TestSeenFunctionsBound(t *testing.T) {
	var m Master
	list := make([]any, 0, maxSeenFunctions+100)
	for i := range maxSeenFunctions + 100 {
		list = append(list, "m.f_"+strconv.Itoa(i))
	}
	m.sawReturn(&protocol.ReturnBody{Fun: "sys.list_functions", Success: true, Return: list})
	m.sawReturn(&protocol.ReturnBody{Fun: "sys.list_functions", Success: true, Return: list})
	if got := len(m.functions.list()); got != maxSeenFunctions {
		t.Errorf("names kept: got %d, want the bound %d", got, maxSeenFunctions)
	}
}
