package state

import (
	"fmt"
	"strings"
)

var reqIn = map[string]bool{
	"require_in": true, "watch_in": true, "onfail_in": true, "onchanges_in": true,
	"use": true, "use_in": true, "prereq": true, "prereq_in": true,
}

var reqInAll = map[string]bool{
	"require_in": true, "watch_in": true, "onfail_in": true, "onchanges_in": true,
	"use": true, "use_in": true, "prereq": true, "prereq_in": true,
	"require": true, "watch": true, "onfail": true, "onfail_stop": true, "onchanges": true,
}

// extendSet is requisite_in's "extend" OrderedDict: ID -> body.
type extendSet struct{ o *omap }

func (e extendSet) body(id string) *omap {
	b, ok := e.o.m[id].(*omap)
	if !ok {
		b = newOmap()
		e.o.set(id, b)
	}
	return b
}

func (e extendSet) list(id, state string) []any {
	b := e.body(id)
	l, ok := b.m[state].([]any)
	if !ok {
		l = []any{}
		b.set(state, l)
	}
	return l
}

func (e extendSet) appendArg(id, state string, arg any) {
	b := e.body(id)
	l := e.list(id, state)
	b.m[state] = append(l, arg)
}

// addReq adds {rkey: [{state: id}]} to name's _state, or appends to the
// rkey already there.
func (e extendSet) addReq(name, sState, rkey, state, id string, env, sls any) {
	l := e.list(name, sState)
	b := e.body(name)
	b.set("__env__", env)
	b.set("__sls__", sls)
	found := false
	for _, a := range l {
		m, ok := a.(map[string]any)
		if ok && first(m) == rkey {
			rl, _ := m[rkey].([]any)
			m[rkey] = append(rl, map[string]any{state: id})
			found = true
		}
	}
	if !found {
		b.m[sState] = append(l, map[string]any{rkey: []any{map[string]any{state: id}}})
	}
}

// requisiteIn is State.requisite_in: the _in forms, use, use_in and
// prereq turned into extend declarations on the states they name, then
// reconciled strictly.
func (c *compiler) requisiteIn(high *highData) []Error {
	var errs []Error
	ext := extendSet{newOmap()}
	var byName map[string][2]string
	for _, id := range high.ids.keys {
		body, ok := high.ids.m[id].(*omap)
		if !ok {
			continue
		}
		if f := body.facts.get(id); f != nil && !f.reqIn {
			continue
		}
		sls := body.m["__sls__"]
		env := body.m["__env__"]
		for _, state := range body.keys {
			if strings.HasPrefix(state, "__") {
				continue
			}
			run, _ := body.m[state].([]any)
			for _, arg := range run {
				am, ok := arg.(map[string]any)
				if !ok || len(am) < 1 {
					continue
				}
				key := first(am)
				if !reqIn[key] {
					continue
				}
				rkey := strings.SplitN(key, "_", 2)[0]
				dotErr := func(st, name string) {
					errs = append(errs, c.at(id, fmt.Sprintf("Invalid requisite in %s: %s for %s, in SLS '%s'. Requisites must not contain dots, did you mean '%s'?", rkey, st, name, pyStr(sls), st[:strings.Index(st, ".")])))
				}
				switch items := am[key].(type) {
				case map[string]any:
					for _, sState := range sortedKeys(items) {
						name := pyStr(items[sState])
						ext.body(name)
						if strings.Contains(sState, ".") {
							dotErr(sState, name)
							sState = strings.Split(sState, ".")[0]
						}
						ext.addReq(name, sState, rkey, state, id, env, sls)
					}
				case []any:
					// Salt runs every hinge again for each later item
					// of the list (adding the same requisite again);
					// each is added once here.
					var hinges [][2]string
					done := map[[2]string]bool{}
					for _, ind := range items {
						indm, isMap := ind.(map[string]any)
						if !isMap {
							s := pyStr(ind)
							if b, ok := high.ids.m[s].(*omap); ok {
								st := ""
								for _, k := range b.keys {
									if !strings.HasPrefix(k, "__") {
										st = k
										break
									}
								}
								if st == "" {
									continue
								}
								indm = map[string]any{st: s}
							} else {
								if byName == nil {
									byName = nameIndex(high)
								}
								ref, ok := byName[pyRepr(ind)]
								if !ok {
									continue
								}
								indm = map[string]any{ref[1]: ref[0]}
							}
						}
						if len(indm) < 1 {
							continue
						}
						pstate := first(indm)
						pname := pyStr(indm[pstate])
						if pstate == "sls" {
							hinges = findSLSIDs(pname, high)
						} else {
							hinges = append(hinges, [2]string{pname, pstate})
						}
						if strings.Contains(pstate, ".") {
							dotErr(pstate, pname)
						}
						for _, tup := range hinges {
							if done[tup] {
								continue
							}
							done[tup] = true
							name, sState := tup[0], tup[1]
							if key == "prereq_in" {
								ext.appendArg(id, state, map[string]any{"prerequired": []any{map[string]any{sState: name}}})
							}
							switch key {
							case "prereq":
								for _, e := range findName(name, sState, high, true) {
									ext.appendArg(e[0], e[1], map[string]any{"prerequired": []any{map[string]any{state: id}}})
								}
								continue
							case "use_in":
								for _, e := range findName(name, sState, high, true) {
									if e[0] == "" {
										continue
									}
									ignore := stateArgs(e[0], sState, high)
									ext.list(e[0], e[1])
									for _, a := range run {
										if m := useArg(a, ignore); m != nil {
											ext.appendArg(e[0], e[1], m)
										}
									}
								}
								continue
							case "use":
								for _, e := range findName(name, sState, high, true) {
									if e[0] == "" {
										continue
									}
									ignore := stateArgs(id, state, high)
									ext.list(id, state)
									ob, _ := high.ids.m[e[0]].(*omap)
									var src []any
									if ob != nil {
										src, _ = ob.m[e[1]].([]any)
									}
									for _, a := range src {
										if m := useArg(a, ignore); m != nil {
											ext.appendArg(id, state, m)
										}
									}
								}
								continue
							}
							ext.addReq(name, sState, rkey, state, id, env, sls)
						}
					}
				}
			}
		}
	}
	high.extend = nil
	for _, k := range ext.o.keys {
		o := newOmap()
		o.set(k, ext.o.m[k])
		high.extend = append(high.extend, o)
	}
	return append(errs, c.reconcileExtend(high, true)...)
}

// nameIndex maps a name argument's value (repr) to the first (ID, state)
// that has it, as requisite_in's scan for a bare requisite_in name finds.
func nameIndex(high *highData) map[string][2]string {
	out := map[string][2]string{}
	for _, oid := range high.ids.keys {
		ob, ok := high.ids.m[oid].(*omap)
		if !ok {
			continue
		}
		for _, st8 := range ob.keys {
			if strings.HasPrefix(st8, "__") {
				continue
			}
			l, _ := ob.m[st8].([]any)
			for _, j := range l {
				jm, ok := j.(map[string]any)
				if !ok || jm["name"] == nil || !hashable(jm["name"]) {
					continue
				}
				k := pyRepr(jm["name"])
				if _, ok := out[k]; !ok {
					out[k] = [2]string{oid, st8}
				}
			}
		}
	}
	return out
}

// useArg is the argument a use or use_in copies, or nil: one-key
// arguments other than requisites, name, names and those the receiving
// state already has.
func useArg(a any, ignore map[string]bool) map[string]any {
	m, ok := a.(map[string]any)
	if !ok || len(m) != 1 {
		return nil
	}
	k := first(m)
	if reqInAll[k] || ignore[k] || k == "name" || k == "names" {
		return nil
	}
	return deepCopy(m).(map[string]any)
}
