package master

import (
	"fmt"
	"slices"
	"sync"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// The function names the master has seen from its agents, for the CLIs'
// shell completion (the local API's complete operation, below): the function of every
// successful return, and the names in every successful return of
// sys.list_functions. They are kept in memory from the master's start, at
// most maxSeenFunctions of them; a name that is not module.function in
// letters, digits and underscores is not kept, since it ends up in a shell.

// maxSeenFunctions bounds the names kept; an agent's own modules add to
// Halite's few hundred.
const maxSeenFunctions = 8192

// maxFunctionName bounds a kept name's length.
const maxFunctionName = 128

// seenFunctions is the set of function names seen.
type seenFunctions struct {
	mu    sync.Mutex
	names map[string]struct{}
}

func (s *seenFunctions) add(name string) {
	if !validFunctionName(name) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = make(map[string]struct{})
	}
	if len(s.names) < maxSeenFunctions {
		s.names[name] = struct{}{}
	}
}

func (s *seenFunctions) list() []string {
	s.mu.Lock()
	out := make([]string, 0, len(s.names))
	for n := range s.names {
		out = append(out, n)
	}
	s.mu.Unlock()
	slices.Sort(out)
	return out
}

// validFunctionName reports whether name is module.function (or
// module.sub.function): dot-separated words of ASCII letters, digits and
// underscores, each starting with a letter or underscore.
func validFunctionName(name string) bool {
	if len(name) < 3 || len(name) > maxFunctionName {
		return false
	}
	words, start := 0, true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if start {
				return false
			}
			start = true
			continue
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9':
			if start {
				return false
			}
		default:
			return false
		}
		if start {
			words++
			start = false
		}
	}
	return !start && words >= 2
}

// sawReturn takes the function names a new, successful return tells of.
func (m *Master) sawReturn(b *protocol.ReturnBody) {
	if !b.Success || b.Retcode != 0 {
		return
	}
	m.functions.add(b.Fun)
	if b.Fun != "sys.list_functions" {
		return
	}
	list, _ := b.Return.([]any)
	for i, v := range list {
		if i >= maxSeenFunctions {
			break
		}
		if s, ok := v.(string); ok {
			m.functions.add(s)
		}
	}
}

// serveComplete answers the local API's complete operation, the CLIs'
// shell completion: req.Fun is "functions" (the names seen), "runners"
// (the master's runners) or "keys" (key.list_all's lists). It fires no
// event and starts nothing: completion runs at every TAB.
func (m *Master) serveComplete(a *apiConn, req *api.Request) {
	var res any
	switch req.Fun {
	case "functions":
		res = m.functions.list()
	case "runners":
		res = m.RunnerNames()
	case "keys":
		all, err := m.keys.List()
		if err != nil {
			a.fail(fmt.Errorf("list keys: %w", err))
			return
		}
		res = all
	default:
		a.fail(badRequest("complete: unknown list %q (want functions, runners or keys)", req.Fun))
		return
	}
	a.send(&api.Response{Kind: api.KindResult, Result: res, Done: true})
}
