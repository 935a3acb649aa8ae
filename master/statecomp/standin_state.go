package statecomp

import (
	"fmt"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/render/sls"
	"github.com/halite-fleet/halite/state"
)

// STAND-IN for package state's compiler (helper stcompile writes
// state.Compile, state.Order, state.Check and the top file in parallel).
// It has the API of STATES.md; at merge, the three variables below become
// state.Compile, state.Order and state.Check and this file goes. It knows
// only what the tests of this package need: include (absolute and
// relative), "mod.fun: [args]" and "mod: [fun, args]", name defaulting
// to the ID, and the order of the files.
var (
	stateCompile = standinCompile
	stateOrder   = func(low []state.Chunk) []state.Chunk { return low }
	stateCheck   = func(low []state.Chunk) []string { return nil }
)

// Loader is package state's Loader: an SLS name's file and entries.
type Loader interface {
	Load(env, sls string) (file string, entries []sls.Entry, err error)
}

func standinCompile(ld Loader, env string, mods []string) (map[string]any, []state.Chunk, []string) {
	high := map[string]any{}
	var low []state.Chunk
	var errs []string
	done := map[string]bool{}
	var visit func(mod string)
	visit = func(mod string) {
		if done[mod] {
			return
		}
		done[mod] = true
		file, entries, err := ld.Load(env, mod)
		if err != nil {
			errs = append(errs, err.Error())
			return
		}
		for _, e := range entries {
			if e.ID == "include" {
				l, _ := e.Value.([]any)
				for _, x := range l {
					inc, _ := x.(string)
					if strings.HasPrefix(inc, ".") {
						base := mod
						if !strings.HasSuffix(file, "/init.sls") {
							if i := strings.LastIndexByte(mod, '.'); i >= 0 {
								base = mod[:i]
							} else {
								base = ""
							}
						}
						inc = strings.TrimPrefix(base+inc, ".")
					}
					visit(inc)
				}
				continue
			}
			decl, ok := e.Value.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Sprintf("ID %s in SLS %s is not a dictionary", e.ID, mod))
				continue
			}
			body := map[string]any{"__sls__": mod, "__env__": env}
			keys := make([]string, 0, len(decl))
			for k := range decl {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				mod, fun, _ := strings.Cut(k, ".")
				args, _ := decl[k].([]any)
				c := state.Chunk{"state": mod, "__id__": e.ID, "name": e.ID, "__sls__": body["__sls__"], "__env__": env, "order": 10000 + len(low)}
				for _, a := range args {
					switch a := a.(type) {
					case string:
						fun = a
					case map[string]any:
						for ak, av := range a {
							c[ak] = av
						}
					}
				}
				c["fun"] = fun
				body[mod] = args
				low = append(low, c)
			}
			high[e.ID] = body
		}
	}
	for _, m := range mods {
		visit(m)
	}
	return high, low, errs
}
