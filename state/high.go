package state

import (
	"fmt"
	"maps"
	"strings"
)

// requisiteKeywords is STATE_REQUISITE_KEYWORDS (salt/state.py).
var requisiteKeywords = map[string]bool{
	"onchanges": true, "onchanges_any": true, "onfail": true, "onfail_any": true,
	"onfail_all": true, "onfail_stop": true, "prereq": true, "prerequired": true,
	"watch": true, "watch_any": true, "require": true, "require_any": true, "listen": true,
}

// findName is salt/state.py find_name: the (ID, state) pairs that name
// (an ID, an SLS when state is "sls", or a name argument) stands for.
func findName(name, state string, high *highData, strict bool) [][2]string {
	var out [][2]string
	check2 := true
	if strict {
		check2 = false
		if b, ok := high.ids.m[name].(*omap); ok {
			check2 = b.has(state)
		}
	}
	if high.ids.has(name) && check2 {
		return [][2]string{{name, state}}
	}
	if state == "sls" {
		for _, nid := range high.ids.keys {
			b, ok := high.ids.m[nid].(*omap)
			if !ok {
				continue
			}
			if s, _ := b.m["__sls__"].(string); s == name && len(b.keys) > 0 {
				out = append(out, [2]string{nid, b.keys[0]})
			}
		}
		return out
	}
	for _, nid := range high.ids.keys {
		b, ok := high.ids.m[nid].(*omap)
		if !ok {
			continue
		}
		args, ok := b.m[state].([]any)
		if !ok {
			continue
		}
		for _, a := range args {
			m, ok := a.(map[string]any)
			if !ok || len(m) != 1 {
				continue
			}
			if equal(m[first(m)], name) {
				out = append(out, [2]string{nid, state})
			}
		}
	}
	return out
}

// findSLSIDs is find_sls_ids: every (ID, state) of an SLS.
func findSLSIDs(slsName string, high *highData) [][2]string {
	var out [][2]string
	for _, nid := range high.ids.keys {
		b, ok := high.ids.m[nid].(*omap)
		if !ok {
			continue
		}
		if s, _ := b.m["__sls__"].(string); s != slsName {
			continue
		}
		for _, st := range b.keys {
			if !strings.HasPrefix(st, "__") {
				out = append(out, [2]string{nid, st})
			}
		}
	}
	return out
}

// stateArgs is state_args: the argument names given to a state.
func stateArgs(id, state string, high *highData) map[string]bool {
	out := map[string]bool{}
	b, ok := high.ids.m[id].(*omap)
	if !ok {
		return out
	}
	args, _ := b.m[state].([]any)
	for _, a := range args {
		if m, ok := a.(map[string]any); ok && len(m) == 1 {
			out[first(m)] = true
		}
	}
	return out
}

// reconcileExtend is State.reconcile_extend: extend declarations (and
// what requisite_in made) merged into the IDs they name.
func (c *compiler) reconcileExtend(high *highData, strict bool) []Error {
	var errs []Error
	ext := high.extend
	high.extend = nil
	var slsExcludes []string
	for _, e := range high.exclude {
		switch x := e.(type) {
		case string:
			slsExcludes = append(slsExcludes, x)
		case map[string]any:
			if s, ok := x["sls"]; ok && s != nil && s != "" {
				slsExcludes = append(slsExcludes, pyStr(s))
			}
		}
	}
	for _, chunk := range ext {
		for _, name := range chunk.keys {
			body, ok := chunk.m[name].(*omap)
			if !ok {
				continue
			}
			stateType := ""
			for _, k := range body.keys {
				if !strings.HasPrefix(k, "__") {
					stateType = k
					break
				}
			}
			if stateType == "" {
				continue
			}
			target, ok := high.ids.m[name].(*omap)
			if !ok || !target.has(stateType) {
				ids := findName(name, stateType, high, strict)
				if len(ids) != 1 {
					env, sls := "base", "base"
					if v, ok := body.get("__env__"); ok {
						env = pyStr(v)
					}
					if v, ok := body.get("__sls__"); ok {
						sls = pyStr(v)
					}
					e := Error{Msg: fmt.Sprintf("Cannot extend ID '%s' in '%s:%s'. It is not part of the high state.\nThis is likely due to a missing include statement or an incorrectly typed ID.\nEnsure that a state with an ID of '%s' is available\nin environment '%s' and to SLS '%s'", name, env, sls, name, env, sls)}
					e.File = c.mods[envSLS{env, sls}]
					errs = append(errs, e)
					continue
				}
				name = ids[0][0]
				target, ok = high.ids.m[name].(*omap)
				if !ok {
					continue
				}
			}
			excluded := false
			for _, x := range slsExcludes {
				if v, ok := body.get("__sls__"); ok && equal(v, x) {
					excluded = true
				}
			}
			if excluded {
				continue
			}
			target = c.own(high, name, target)
			for _, state := range body.keys {
				if strings.HasPrefix(state, "__") {
					continue
				}
				run := body.m[state]
				if !target.has(state) {
					target.set(state, deepCopy(run))
					continue
				}
				have, ok1 := target.m[state].([]any)
				runl, ok2 := run.([]any)
				if !ok1 || !ok2 {
					continue
				}
				have = appendCopy(have)
				for _, arg := range runl {
					update := false
					for hind := range have {
						val := have[hind]
						as, aStr := arg.(string)
						_, vStr := val.(string)
						if aStr && vStr {
							have[hind] = as
							update = true
							continue
						}
						am, aMap := arg.(map[string]any)
						vm, vMap := val.(map[string]any)
						if !aMap || !vMap || len(am) == 0 || len(vm) == 0 {
							continue
						}
						argfirst := first(am)
						if argfirst == first(vm) {
							if requisiteKeywords[argfirst] {
								l, _ := vm[argfirst].([]any)
								add, ok := am[argfirst].([]any)
								if !ok {
									add = []any{am[argfirst]}
								}
								nm := make(map[string]any, len(vm))
								for k, v := range vm {
									nm[k] = v
								}
								nm[argfirst] = appendCopy(l, add...)
								have[hind] = nm
							} else {
								have[hind] = deepCopy(am)
							}
							update = true
						}
						if argfirst == "name" && first(vm) == "names" {
							have[hind] = deepCopy(am)
						}
					}
					if !update {
						have = append(have, deepCopy(arg))
					}
				}
				target.m[state] = have
			}
		}
	}
	return errs
}

// applyExclude is State.apply_exclude: excluded SLS (globs) and IDs go.
func applyExclude(high *highData) {
	if high.exclude == nil {
		return
	}
	exclude := high.exclude
	high.exclude = nil
	var exSLS []string
	var exID []string
	for _, e := range exclude {
		switch x := e.(type) {
		case string:
			exSLS = append(exSLS, x)
		case map[string]any:
			if len(x) != 1 {
				continue
			}
			if v, ok := x["sls"]; ok {
				exSLS = append(exSLS, pyStr(v))
			} else if v, ok := x["id"]; ok {
				exID = append(exID, pyStr(v))
			}
		}
	}
	for _, id := range high.ids.list() {
		b, ok := high.ids.m[id].(*omap)
		if !ok || strings.HasPrefix(id, "__") {
			continue
		}
		s, _ := b.m["__sls__"].(string)
		if s == "" {
			continue
		}
		for _, x := range exSLS {
			if fnmatch(s, x) {
				exID = append(exID, id)
				break
			}
		}
	}
	for _, id := range exID {
		high.ids.del(id)
	}
}

// verifyHigh is State.verify_high: the structure of the high data, with
// Salt's messages.
func (c *compiler) verifyHigh(high *highData) []Error {
	var errs []Error
	reqs := map[string]map[string]string{}
	for _, name := range high.ids.keys {
		if strings.HasPrefix(name, "__") {
			continue
		}
		add := func(msg string) { errs = append(errs, c.at(name, msg)) }
		body, ok := high.ids.m[name].(*omap)
		if !ok {
			add(fmt.Sprintf("The type %s in %s is not formatted as a dictionary", name, pyStr(high.ids.m[name])))
			continue
		}
		if f := body.facts.get(name); f != nil && !f.verifyReqs {
			for _, msg := range f.verifyMsgs {
				add(msg)
			}
			continue
		}
		verifyBody(name, body, reqs, add)
	}
	return errs
}

// verifyBody is verify_high for one ID: its errors through add, and its
// requisites into reqs (for the recursive requisite error).
func verifyBody(name string, body *omap, reqs map[string]map[string]string, add func(string)) {
	sls := pyStr(body.m["__sls__"])
	for _, state := range body.keys {
		if strings.HasPrefix(state, "__") {
			continue
		}
		v := body.m[state]
		if v == nil {
			add(fmt.Sprintf("ID '%s' in SLS '%s' contains a short declaration (%s) with a trailing colon. When not passing any arguments to a state, the colon must be omitted.", name, sls, state))
			continue
		}
		run, ok := v.([]any)
		if !ok {
			add(fmt.Sprintf("State '%s' in SLS '%s' is not formed as a list", name, sls))
			continue
		}
		fun := 0
		if strings.Contains(state, ".") {
			fun++
		}
		for _, arg := range run {
			switch a := arg.(type) {
			case string:
				fun++
				if strings.Contains(strings.TrimSpace(a), " ") {
					add(fmt.Sprintf(`The function "%s" in state "%s" in SLS "%s" has whitespace, a function with whitespace is not supported, perhaps this is an argument that is missing a ":"`, a, name, sls))
				}
			case map[string]any:
				if len(a) == 0 {
					continue
				}
				argfirst := first(a)
				if argfirst == "names" {
					if _, ok := a[argfirst].([]any); !ok {
						add(fmt.Sprintf("The 'names' argument in state '%s' in SLS '%s' needs to be formed as a list", name, sls))
					}
				}
				switch argfirst {
				case "require", "watch", "prereq", "onchanges":
					list, ok := a[argfirst].([]any)
					if !ok {
						add(fmt.Sprintf("The %s statement in state '%s' in SLS '%s' needs to be formed as a list", argfirst, name, sls))
						break
					}
					reqs[name] = map[string]string{"state": state}
					for _, req := range list {
						if s, ok := req.(string); ok {
							req = map[string]any{"id": s}
						}
						rm, ok := req.(map[string]any)
						if !ok || len(rm) == 0 {
							add(fmt.Sprintf("Requisite declaration %s in SLS %s is not formed as a single key dictionary", pyStr(req), sls))
							continue
						}
						reqKey := first(rm)
						reqVal := rm[reqKey]
						if i := strings.Index(reqKey, "."); i >= 0 {
							add(fmt.Sprintf("Invalid requisite type '%s' in state '%s', in SLS '%s'. Requisite types must not contain dots, did you mean '%s'?", reqKey, name, sls, reqKey[:i]))
						}
						if !hashable(reqVal) {
							add(fmt.Sprintf("Illegal requisite \"%s\", please check your syntax.\n", pyStr(reqVal)))
							continue
						}
						rv := pyStr(reqVal)
						reqs[name][rv] = reqKey
						if other, ok := reqs[rv]; ok {
							if k, ok := other[name]; ok && k == state && other["state"] == reqs[name][rv] {
								add(fmt.Sprintf(`A recursive requisite was found, SLS "%s" ID "%s" ID "%s"`, sls, name, rv))
							}
						}
					}
				}
				if len(a) != 1 {
					add(fmt.Sprintf("Multiple dictionaries defined in argument of state '%s' in SLS '%s'", name, sls))
				}
			}
		}
		if fun == 0 {
			if state == "require" || state == "watch" {
				continue
			}
			add(fmt.Sprintf("No function declared in state '%s' in SLS '%s'", state, sls))
		} else if fun > 1 {
			add(fmt.Sprintf("Too many functions declared in state '%s' in SLS '%s'", state, sls))
		}
	}
}

// MaxChunks bounds the low state one compile makes.
const MaxChunks = 10000

var errTooMany = fmt.Errorf("Too many states: more than %d", MaxChunks)

// compileHighData is State.compile_high_data without the ordering: one
// chunk per state function and name. A chunk's values are the high
// data's, shared with the Loader's entries: a caller that changes a
// chunk sets its keys, never changes a list or map inside. The chunks of
// an ID whose body a Memo keeps are the Memo's, the same for every
// compile (read only): marked in shared.
func compileHighData(high *highData) (chunks []Chunk, shared []bool, err error) {
	for _, name := range high.ids.keys {
		if strings.HasPrefix(name, "__") {
			continue
		}
		body, ok := high.ids.m[name].(*omap)
		if !ok {
			continue
		}
		if f := body.facts.get(name); f != nil {
			if f.err != nil {
				return nil, nil, f.err
			}
			chunks = append(chunks, f.chunks...)
			for range f.chunks {
				shared = append(shared, true)
			}
		} else {
			if chunks, err = bodyChunks(chunks, name, body); err != nil {
				return nil, nil, err
			}
			for len(shared) < len(chunks) {
				shared = append(shared, false)
			}
		}
		if len(chunks) > MaxChunks {
			return nil, nil, errTooMany
		}
	}
	return chunks, shared, nil
}

// bodyChunks appends the chunks of one ID to chunks.
func bodyChunks(chunks []Chunk, name string, body *omap) ([]Chunk, error) {
	var nameV any = name // boxed once for the chunks of the ID
	for _, state := range body.keys {
		if strings.HasPrefix(state, "__") {
			continue
		}
		run, _ := body.m[state].([]any)
		var fbuf [2]any
		funcs := fbuf[:0] // the function names (strings) as run has them
		var names []any
		var seenNames map[string]bool
		// state, name, __sls__, __env__, __id__, fun, order and the
		// arguments: one map that need not grow (and, up to 8 keys, a
		// map of one group).
		size, order := 6, 1
		for _, arg := range run {
			if a, ok := arg.(map[string]any); ok {
				size += len(a)
				if _, ok := a["name"]; ok {
					size--
				}
				if _, ok := a["order"]; ok {
					order = 0
				}
			}
		}
		chunk := make(Chunk, size+order)
		chunk["state"], chunk["name"] = state, nameV
		if v, ok := body.get("__sls__"); ok {
			chunk["__sls__"] = v
		}
		if v, ok := body.get("__env__"); ok {
			chunk["__env__"] = v
		}
		chunk["__id__"] = nameV
		for _, arg := range run {
			switch a := arg.(type) {
			case string:
				dup := false
				for _, f := range funcs {
					dup = dup || f.(string) == a
				}
				if !dup {
					funcs = append(funcs, arg)
				}
			case map[string]any:
				var one [1]string
				keys := one[:0]
				if len(a) == 1 {
					for k := range a {
						keys = append(keys, k)
					}
				} else {
					keys = sortedKeys(a)
				}
				for _, key := range keys {
					val := a[key]
					switch {
					case key == "names":
						l, _ := val.([]any)
						if seenNames == nil {
							seenNames = make(map[string]bool, len(l))
						}
						for _, n := range l {
							k := pyRepr(n)
							if len(k) > 256 {
								k = fmt.Sprintf("%p%d", l, len(names))
							}
							if !seenNames[k] {
								seenNames[k] = true
								names = append(names, n)
							}
							if len(names) > MaxChunks {
								return nil, errTooMany
							}
						}
					case key == "state":
					case key == "name":
						if _, ok := val.(string); !ok {
							chunk[key] = nameV
						} else {
							chunk[key] = val
						}
					default:
						chunk[key] = val
					}
				}
			}
		}
		if len(names) > 0 {
			for i, entry := range names {
				live := maps.Clone(map[string]any(chunk))
				if m, ok := entry.(map[string]any); ok && len(m) > 0 {
					low := first(m)
					live["name"] = low
					switch opts := m[low].(type) {
					case []any:
						for _, o := range opts {
							if om, ok := o.(map[string]any); ok {
								for k, v := range om {
									live[k] = v
								}
							}
						}
					case map[string]any:
						for k, v := range opts {
							live[k] = v
						}
					}
				} else {
					live["name"] = entry
				}
				live["name_order"] = i + 1
				for k, fun := range funcs {
					l := Chunk(live)
					if k > 0 {
						l = Chunk(maps.Clone(live))
					}
					l["fun"] = fun
					chunks = append(chunks, l)
				}
				if len(chunks) > MaxChunks {
					return nil, errTooMany
				}
			}
			continue
		}
		for k, fun := range funcs {
			l := chunk
			if k > 0 {
				l = Chunk(maps.Clone(map[string]any(chunk)))
			}
			l["fun"] = fun
			chunks = append(chunks, l)
		}
		if len(chunks) > MaxChunks {
			return nil, errTooMany
		}
	}
	return chunks, nil
}
