package statecomp

import (
	"sort"
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// scan is scanDeps of a file, kept by its content.
func (c *Compiler) scan(sum [32]byte, src []byte) []string {
	c.mu.Lock()
	d, ok := c.scans[sum]
	c.mu.Unlock()
	if ok {
		return d
	}
	d = scanDeps(string(src))
	c.mu.Lock()
	if len(c.scans) > 8192 {
		clear(c.scans)
		clear(c.lists)
	}
	// Files that read the same inputs share one list: a run keys the
	// device's values by list (run.depKey).
	if len(d) > 0 {
		k := strings.Join(d, "\x00")
		if l, ok := c.lists[k]; ok {
			d = l
		} else {
			c.lists[k] = d
		}
	}
	c.scans[sum] = d
	c.mu.Unlock()
	return d
}

// Dependencies of a template on a device's inputs, as cache key parts:
//
//	g:<key>          the grain <key> (its whole top-level value)
//	p:<key>          the pillar key <key>
//	m:<type>:<tgt>   whether the device matches target <tgt> of <type>
//	*g, *p           all of the grains, all of the pillar
//	*id              everything of the device (opts, a salt[] name that is
//	                 not a constant): the key is the device's id, grains
//	                 and pillar
//
// scanDeps finds them in a template's tokens. It over-approximates: any use
// of grains, pillar, opts or salt it cannot name is "all", so that two
// devices that agree on every dependency render the template alike. It
// reads the names Salt gives templates: grains['k'], grains.k,
// grains.get('k'), salt['grains.get']('k:sub'), salt.pillar.get('k'),
// salt['config.get']('k'), salt['match.grain']('os:Debian') and the like.
func scanDeps(src string) []string {
	if !strings.Contains(src, "{{") && !strings.Contains(src, "{%") {
		return nil
	}
	cfg := config.New()
	st := tokens.LexAll(src, cfg)
	var toks []*tokens.Token
	in := false
	for ; !st.End(); st.Next() {
		t := st.Current()
		switch t.Type {
		case tokens.VariableBegin, tokens.BlockBegin:
			in = true
			continue
		case tokens.VariableEnd, tokens.BlockEnd:
			in = false
			toks = append(toks, t)
			continue
		case tokens.Whitespace:
			continue
		case tokens.Error:
			return []string{"*id"} // the render fails, alike for all; be safe
		}
		if in {
			toks = append(toks, t)
		}
	}
	set := map[string]bool{}
	at := func(i int, typ tokens.Type) bool { return i < len(toks) && toks[i].Type == typ }
	str := func(i int) (string, bool) {
		if at(i, tokens.String) {
			return toks[i].Val, true
		}
		return "", false
	}
	name := func(i int) string {
		if at(i, tokens.Name) {
			return toks[i].Val
		}
		return ""
	}
	for i := 0; i < len(toks); i++ {
		if toks[i].Type != tokens.Name || (i > 0 && toks[i-1].Type == tokens.Dot) {
			continue
		}
		switch v := toks[i].Val; v {
		case "grains", "pillar":
			p := v[:1]
			switch {
			case at(i+1, tokens.LeftBracket) && at(i+3, tokens.RightBracket):
				if k, ok := str(i + 2); ok {
					set[p+":"+k] = true
					continue
				}
			case at(i+1, tokens.Dot) && name(i+2) == "get" && at(i+3, tokens.LeftParenthesis):
				if k, ok := str(i + 4); ok {
					set[p+":"+k] = true
					continue
				}
			case at(i+1, tokens.Dot) && name(i+2) != "" && !dictMethod[name(i+2)]:
				set[p+":"+name(i+2)] = true
				continue
			}
			set["*"+p] = true
		case "opts":
			set["*id"] = true
		case "salt":
			fn, j := "", 0
			switch {
			case at(i+1, tokens.LeftBracket) && at(i+3, tokens.RightBracket):
				fn, _ = str(i + 2)
				j = i + 4
			case at(i+1, tokens.Dot) && at(i+3, tokens.Dot) && name(i+2) != "" && name(i+4) != "":
				fn = name(i+2) + "." + name(i+4)
				j = i + 5
			}
			if fn == "" || !at(j, tokens.LeftParenthesis) {
				set["*id"] = true
				continue
			}
			arg, ok := str(j + 1)
			if ok && !at(j+2, tokens.RightParenthesis) && !at(j+2, tokens.Comma) {
				ok = false // 'a' ~ x
			}
			if strings.HasPrefix(fn, "match.") && !at(j+2, tokens.RightParenthesis) {
				ok = false // a delimiter or minion_id: evaluate per device
			}
			for _, d := range funcDeps(fn, arg, ok) {
				set[d] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var dictMethod = map[string]bool{"get": true, "items": true, "keys": true, "values": true, "copy": true, "update": true, "setdefault": true, "pop": true}

// funcDeps are the dependencies of a call of render-time function fn
// whose first argument is the constant arg (constant false: not known).
func funcDeps(fn, arg string, constant bool) []string {
	mod, fun, _ := strings.Cut(fn, ".")
	top, _, _ := strings.Cut(arg, ":")
	switch mod {
	case "grains", "pillar":
		p := mod[:1]
		if (fun == "get" || fun == "fetch") && constant {
			return []string{p + ":" + top}
		}
		if _, ok := renderFuncs[fn]; !ok {
			return nil // refused alike for every device
		}
		return []string{"*" + p}
	case "config":
		if constant {
			return []string{"g:" + top, "p:" + top}
		}
		return []string{"*g", "*p"}
	case "match":
		if _, ok := renderFuncs[fn]; !ok {
			return nil
		}
		if constant {
			return []string{"m:" + fun + ":" + arg}
		}
		return []string{"*id"}
	}
	return nil
}
