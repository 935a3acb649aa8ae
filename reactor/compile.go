package reactor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/render/sls"
)

// Reaction types.
const (
	TypeLocal  = "local"  // publish a job to agents
	TypeRunner = "runner" // run a master runner
	TypeWheel  = "wheel"  // run a master wheel function (keys)
	TypeCaller = "caller" // run an execution function on this agent

	// typeCmdAlias is Salt's alias of local (Reactor.aliases in
	// salt/utils/reactor.py): "cmd.cmd.run" is "local.cmd.run".
	typeCmdAlias = "cmd"
)

// Reaction is one call a reactor file asks for, with its arguments already
// in the shape the target interface takes (Salt's ReactWrap): Arg and
// Kwarg for every type, and for local reactions the publish options.
type Reaction struct {
	ID    string         `json:"id"`
	Type  string         `json:"type"`
	Fun   string         `json:"fun"`
	Arg   []any          `json:"arg"`
	Kwarg map[string]any `json:"kwarg"`

	// Local reactions only.
	Tgt     string         `json:"tgt,omitempty"`
	TgtType string         `json:"tgt_type,omitempty"`
	Ret     string         `json:"ret,omitempty"`
	Timeout float64        `json:"timeout,omitempty"`
	Batch   string         `json:"batch,omitempty"`
	Options map[string]any `json:"options,omitempty"` // other LocalClient options, as given

	File string `json:"-"`
	Line int    `json:"-"`
	Tag  string `json:"-"`

	// claim is set by the engine while the reaction is dispatched: see
	// Claim.
	claim func(jid string)
}

// Claim tells the engine that the call this reaction is starting has
// the id jid. A dispatcher calls it as soon as it has the jid and before
// it publishes anything under salt/job/<jid>/, salt/run/<jid>/ or
// salt/wheel/<jid>/, so that the loop guard knows the depth of those
// events however fast they come back. A dispatcher that starts several
// calls (batch) claims each. Claiming is optional: the engine claims
// the jid Dispatch returns, but only after it returned.
func (r *Reaction) Claim(jid string) {
	if r.claim != nil {
		r.claim(jid)
	}
}

// reactorInternal are the keys of a reaction's low data that are not
// arguments of the function (Salt's REACTOR_INTERNAL_KEYWORDS and the
// state compiler's own).
var reactorInternal = map[string]bool{
	"name": true, "state": true, "fun": true, "__id__": true, "__sls__": true, "__env__": true,
	"order": true, "arg": true, "kwarg": true, "args": true, "__user__": true, "__state__": true,
}

// localOptions are the LocalClient publish options a local reaction takes
// beside tgt, arg and kwarg.
var localOptions = map[string]bool{
	"tgt_type": true, "expr_form": true, "ret": true, "timeout": true, "batch": true,
	"jid": true, "kwarg": true, "delimiter": true, "metadata": true, "full_return": true,
	"ret_config": true, "ret_kwargs": true, "listen": true, "io_loop": true,
}

// Compile turns a rendered file's entries into reactions, in file order,
// as Salt's reactor does: each ID holds one "<type>.<function>" key whose
// value is a list of one-key mappings (merged), or a mapping. Arguments
// come from `args:` (a list of one-key mappings: keyword arguments; for
// caller also a plain list: positional arguments), or from the old
// `arg:`/`kwarg:` keys, or for runner and wheel from inline keywords.
func Compile(file, tag string, entries []sls.Entry) ([]*Reaction, error) {
	var out []*Reaction
	for _, e := range entries {
		body, ok := e.Value.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s line %d: ID %q: expected a mapping of a reaction type and function, got %s", file, e.Line, e.ID, typeName(e.Value))
		}
		keys := make([]string, 0, len(body))
		for k := range body {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			r, err := compileOne(e.ID, k, body[k])
			if err != nil {
				return nil, fmt.Errorf("%s line %d: ID %q: %w", file, e.Line, e.ID, err)
			}
			r.File, r.Line, r.Tag = file, e.Line, tag
			out = append(out, r)
		}
	}
	return out, nil
}

func compileOne(id, key string, v any) (*Reaction, error) {
	typ, fun, _ := strings.Cut(key, ".")
	if typ == typeCmdAlias {
		typ = TypeLocal
	}
	low := map[string]any{}
	switch v := v.(type) {
	case nil:
	case []any:
		for _, item := range v {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: expected a list of one-key mappings, got %v", key, item)
			}
			for k, x := range m {
				low[k] = x
			}
		}
	case map[string]any:
		low = v
	default:
		return nil, fmt.Errorf("%s: expected a list of arguments, got %s", key, typeName(v))
	}
	if fun == "" {
		f, _ := low["fun"].(string)
		fun = f
	}
	switch typ {
	case TypeLocal, TypeRunner, TypeWheel, TypeCaller:
	default:
		return nil, fmt.Errorf("unknown reaction type %q (local or its alias cmd, runner, wheel or caller)", typ)
	}
	if fun == "" {
		return nil, fmt.Errorf("%s: no function", key)
	}
	r := &Reaction{ID: id, Type: typ, Fun: fun, Arg: []any{}, Kwarg: map[string]any{}}
	if a, ok := low["args"]; ok {
		// The 2017.7.2 schema.
		list, isList := a.([]any)
		switch {
		case typ == TypeCaller && isList && !isDictList(list):
			r.Arg = list
		case isList:
			kw, ok := repackDictList(list)
			if !ok {
				return nil, fmt.Errorf("%s: args must be a list of one-key mappings, got %v", key, a)
			}
			r.Kwarg = kw
		default:
			m, ok := a.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: args must be a list of one-key mappings, got %s", key, typeName(a))
			}
			r.Kwarg = m
		}
	} else {
		if a, ok := low["arg"]; ok {
			list, ok := a.([]any)
			if !ok {
				list = []any{a}
			}
			r.Arg = list
		}
		if kw, ok := low["kwarg"]; ok {
			m, ok := kw.(map[string]any)
			if !ok {
				if l, isList := kw.([]any); isList {
					m, ok = repackDictList(l)
				}
				if !ok {
					return nil, fmt.Errorf("%s: kwarg must be a mapping, got %s", key, typeName(kw))
				}
			}
			r.Kwarg = m
		}
		if typ == TypeRunner || typ == TypeWheel {
			// The old inline form: every other key is a keyword argument.
			for k, x := range low {
				if !reactorInternal[k] {
					r.Kwarg[k] = x
				}
			}
		}
	}
	if typ == TypeLocal {
		tgt, ok := low["tgt"]
		if !ok {
			return nil, fmt.Errorf("%s: a local reaction needs tgt", key)
		}
		r.Tgt = scalarString(tgt)
		if l, ok := tgt.([]any); ok {
			parts := make([]string, len(l))
			for i, x := range l {
				parts[i] = scalarString(x)
			}
			r.Tgt = strings.Join(parts, ",")
			r.TgtType = "list"
		}
		if t, ok := low["tgt_type"]; ok {
			r.TgtType = scalarString(t)
		} else if t, ok := low["expr_form"]; ok {
			r.TgtType = scalarString(t)
		}
		if x, ok := low["ret"]; ok {
			r.Ret = scalarString(x)
		}
		if x, ok := low["batch"]; ok {
			r.Batch = scalarString(x)
		}
		if x, ok := low["timeout"]; ok {
			switch t := x.(type) {
			case int:
				r.Timeout = float64(t)
			case float64:
				r.Timeout = t
			default:
				return nil, fmt.Errorf("%s: timeout must be a number, got %v", key, x)
			}
		}
		for k, x := range low {
			switch {
			case k == "tgt" || k == "tgt_type" || k == "expr_form" || k == "ret" || k == "batch" || k == "timeout" || k == "kwarg":
			case localOptions[k]:
				if r.Options == nil {
					r.Options = map[string]any{}
				}
				r.Options[k] = x
			}
		}
	}
	return r, nil
}

func isDictList(l []any) bool {
	for _, x := range l {
		if _, ok := x.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// repackDictList merges a list of one-key mappings into one mapping
// (salt.utils.data.repack_dictlist).
func repackDictList(l []any) (map[string]any, bool) {
	out := make(map[string]any, len(l))
	for _, x := range l {
		m, ok := x.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, false
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, true
}

func scalarString(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
