package state

import (
	"fmt"

	"github.com/halite-fleet/halite/render/sls"
)

// TopFile is one environment's top.sls, rendered: its entries are the
// environments it declares sections for, each a mapping of targets (in
// file order, Entry.Keys) to a list of SLS names and options.
type TopFile struct {
	Env     string // the saltenv whose file_roots the file came from
	File    string
	Entries []sls.Entry
}

// Top is the merged top data (Salt's merge_tops): environments in order,
// each with its targets in order.
type Top struct {
	Envs []TopEnv
	// Avail are the environments that exist; an item "{env: sls}" in a
	// target's list adds sls to env only when env is one of them (as
	// Salt's top_matches does). Nil: every env named exists.
	Avail []string
}

// TopEnv is one environment's section.
type TopEnv struct {
	Env     string
	Targets []TopTarget
}

// TopTarget is one target and its data: SLS names, "{match: type}",
// "{env: sls}", as written.
type TopTarget struct {
	Target string
	Data   any
	File   string
	Line   int
}

// topSection is one env section of one top file.
type topSection struct {
	env  string
	tgts *omap
	file string
	line int
}

func sections(tf TopFile) []topSection {
	var out []topSection
	for _, e := range tf.Entries {
		s := topSection{env: e.ID, file: tf.File, line: e.Line}
		if m, ok := e.Value.(map[string]any); ok {
			s.tgts = fromMap(m, e.Keys)
		}
		out = append(out, s)
	}
	return out
}

// MergeTops merges the environments' top files as Salt's merge_tops
// does with top_file_merging_strategy strategy:
//   - "merge" (Salt's default, also for an unknown strategy): the base
//     top file is authoritative (every section in it counts); another
//     env's top file adds only its own env's section, and only when base
//     did not define that env;
//   - "same": each env's section comes only from its own top file; an env
//     with no top file (no entries) uses defaultTop's section for it;
//   - "merge_all": every section of every file, a target's SLS lists
//     joined (the later match type wins).
//
// tops are in Salt's env order (base first, then file_roots order); with
// state_top_saltenv set, pass only that env's top file. Errors are
// Salt's ("Unable to render top file. No targets found.").
func MergeTops(tops []TopFile, strategy, defaultTop string) (*Top, []string) {
	top := &Top{}
	var errs []string
	envIdx := map[string]int{}
	add := func(s topSection, tgt string, data any, mergeAll bool) {
		i, ok := envIdx[s.env]
		if !ok {
			i = len(top.Envs)
			envIdx[s.env] = i
			top.Envs = append(top.Envs, TopEnv{Env: s.env})
		}
		te := &top.Envs[i]
		line := s.line
		for k := range te.Targets {
			if te.Targets[k].Target == tgt {
				if mergeAll {
					data = mergeTargetData(te.Targets[k].Data, data)
				}
				te.Targets[k] = TopTarget{Target: tgt, Data: data, File: s.file, Line: line}
				return
			}
		}
		te.Targets = append(te.Targets, TopTarget{Target: tgt, Data: data, File: s.file, Line: line})
	}
	addSection := func(s topSection, mergeAll bool) {
		if s.tgts == nil {
			errs = append(errs, "Unable to render top file. No targets found.")
			return
		}
		if _, ok := envIdx[s.env]; !ok && len(s.tgts.keys) == 0 {
			envIdx[s.env] = len(top.Envs)
			top.Envs = append(top.Envs, TopEnv{Env: s.env})
		}
		for _, tgt := range s.tgts.keys {
			add(s, tgt, s.tgts.m[tgt], mergeAll)
		}
	}
	switch strategy {
	case "same":
		byEnv := map[string][]TopFile{}
		for _, tf := range tops {
			byEnv[tf.Env] = append(byEnv[tf.Env], tf)
		}
		for _, tf := range tops {
			if len(tf.Entries) == 0 {
				for _, fb := range byEnv[defaultTop] {
					for _, s := range sections(fb) {
						if s.env == tf.Env {
							addSection(s, false)
							break
						}
					}
				}
				continue
			}
			for _, s := range sections(tf) {
				if s.env == "include" || s.env != tf.Env {
					continue
				}
				addSection(s, false)
			}
		}
	case "merge_all":
		for _, tf := range tops {
			for _, s := range sections(tf) {
				if s.env != "include" {
					addSection(s, true)
				}
			}
		}
	default:
		for _, tf := range tops {
			if tf.Env != "base" {
				continue
			}
			for _, s := range sections(tf) {
				if s.env != "include" {
					addSection(s, false)
				}
			}
		}
		for _, tf := range tops {
			if tf.Env == "base" {
				continue
			}
			for _, s := range sections(tf) {
				if s.env == "include" || s.env != tf.Env {
					continue
				}
				if _, ok := envIdx[s.env]; ok {
					continue
				}
				addSection(s, false)
			}
		}
	}
	return top, errs
}

// mergeTargetData is _merge_tops_merge_all's join of one target's lists.
func mergeTargetData(a, b any) any {
	read := func(v any) (match any, states []any) {
		l, _ := v.([]any)
		for _, it := range l {
			switch x := it.(type) {
			case map[string]any:
				match = x
			case string:
				states = append(states, x)
			}
		}
		return match, states
	}
	m1, s1 := read(a)
	m2, s2 := read(b)
	var out []any
	match := m2
	if match == nil {
		match = m1
	}
	if match != nil {
		out = append(out, match)
	}
	out = append(out, s1...)
	for _, s := range s2 {
		dup := false
		for _, o := range out {
			dup = dup || equal(o, s)
		}
		if !dup {
			out = append(out, s)
		}
	}
	return out
}

// Verify is Salt's verify_tops: the top data's shape, in Salt's words.
func (t *Top) Verify() []string {
	var errs []string
	for _, e := range t.Envs {
		if e.Env == "" {
			errs = append(errs, "Empty saltenv statement in top file")
		}
		for _, tg := range e.Targets {
			l, ok := tg.Data.([]any)
			if !ok {
				if _, isStr := tg.Data.(string); isStr {
					continue
				}
				errs = append(errs, "Malformed topfile (state declarations not formed as a list)")
				continue
			}
			for _, it := range l {
				switch x := it.(type) {
				case map[string]any:
					for _, k := range sortedKeys(x) {
						if Truthy(x[k]) {
							continue
						}
						errs = append(errs, fmt.Sprintf("Improperly formatted top file matcher in saltenv %s: %s file", pyStr(x), pyStr(x[k])))
					}
				case string:
					if x == "" {
						errs = append(errs, fmt.Sprintf("Environment %s contains an empty sls index", e.Env))
					}
				}
			}
		}
	}
	return errs
}

// Truthy is Python's bool(v) for decoded SLS and job data; the agent's
// state engine uses it too.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case int:
		return x != 0
	case int64:
		return x != 0
	case uint64:
		return x != 0
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// Matcher tells whether this device is tgt, of tgtType: "compound" (Salt's
// default in a top file), "glob", "pcre", "list", "grain", "grain_pcre",
// "pillar", "pillar_pcre", "pillar_exact", "ipcidr", "nodegroup", "data",
// or whatever "- match:" said.
type Matcher func(tgt, tgtType string) (bool, error)

// topOptions are the dict items of a target's list that are options, not
// "{env: sls}".
var topOptions = map[string]bool{"match": true, "ignore_missing": true, "subfilter": true}

// Match is Salt's top_matches: for each env (only saltenv when it is not
// empty), the SLS names of every target m matches, in order; an item
// "{env: sls}" adds sls to env (when the env exists, see Avail);
// "subfilter" targets are matched as well. A matcher error is reported
// (with the top file and line) and the target counts as not matched.
func (t *Top) Match(saltenv string, m Matcher) ([]EnvSLS, []string) {
	var out []EnvSLS
	var errs []string
	idx := map[string]int{}
	appendTo := func(env string, s ...string) {
		i, ok := idx[env]
		if !ok {
			i = len(out)
			idx[env] = i
			out = append(out, EnvSLS{Env: env})
		}
		out[i].SLS = append(out[i].SLS, s...)
	}
	avail := func(env string) bool {
		if topOptions[env] {
			return false
		}
		if t.Avail == nil {
			return true
		}
		for _, a := range t.Avail {
			if a == env {
				return true
			}
		}
		return false
	}
	budget := 10000 // targets matched, subfilters included
	var filter func(env, tgt string, data any, file string, line, depth int)
	filter = func(env, tgt string, data any, file string, line, depth int) {
		if budget--; budget < 0 {
			if budget == -1 {
				errs = append(errs, Error{Msg: "Top file: too many targets", File: file, Line: line}.String())
			}
			return
		}
		var items []any
		switch x := data.(type) {
		case string:
			items = []any{x}
		case []any:
			items = x
		default:
			return
		}
		typ := "compound"
		for _, it := range items {
			if d, ok := it.(map[string]any); ok {
				if v, ok := d["match"]; ok {
					typ = pyStr(v)
				}
			}
		}
		ok, err := m(tgt, typ)
		if err != nil {
			errs = append(errs, Error{Msg: fmt.Sprintf("Top file target '%s' (match: %s) in saltenv '%s': %v", tgt, typ, env, err), File: file, Line: line}.String())
			return
		}
		if !ok {
			return
		}
		appendTo(env)
		for _, it := range items {
			switch x := it.(type) {
			case string:
				appendTo(env, x)
			case map[string]any:
				if sub, ok := x["subfilter"].(map[string]any); ok && depth < 8 {
					for _, k := range sortedKeys(sub) {
						filter(env, k, sub[k], file, line, depth+1)
					}
				}
				for _, k := range sortedKeys(x) {
					if !avail(k) {
						continue
					}
					appendTo(k, pyStr(x[k]))
				}
			}
		}
	}
	for _, e := range t.Envs {
		if saltenv != "" && e.Env != saltenv {
			continue
		}
		for _, tg := range e.Targets {
			filter(e.Env, tg.Target, tg.Data, tg.File, tg.Line, 0)
		}
	}
	return out, errs
}

// Map is the top data as Salt's state.show_top gives it... for the
// merged top: {env: {target: data}}.
func (t *Top) Map() map[string]any {
	out := map[string]any{}
	for _, e := range t.Envs {
		m := map[string]any{}
		for _, tg := range e.Targets {
			m[tg.Target] = plainValue(tg.Data)
		}
		out[e.Env] = m
	}
	return out
}

// Matched is matches as a map, env -> SLS names (what state.show_top
// returns: Salt's top_matches).
func Matched(matches []EnvSLS) map[string][]string {
	out := make(map[string][]string, len(matches))
	for _, m := range matches {
		out[m.Env] = append([]string{}, m.SLS...)
	}
	return out
}

// ParseTop reads one environment's top.sls from plain YAML text (a
// top file rendered by the caller goes straight into TopFile).
func ParseTop(env, file, text string) (TopFile, error) {
	entries, err := sls.ParseYAML(file, text)
	if err != nil {
		return TopFile{Env: env, File: file}, err
	}
	return TopFile{Env: env, File: file, Entries: entries}, nil
}
