package targets

import (
	"regexp"
	"strings"
)

// node is one compiled term or operator of a target.
type node interface {
	match(mn *Minion) bool
	// weight is the number of terms one match may evaluate.
	weight() int
	// format writes the node in compound syntax.
	format(b *strings.Builder)
}

// walk calls f for n and every node under it.
func walk(n node, f func(node)) {
	f(n)
	switch n := n.(type) {
	case *andNode:
		for _, k := range n.kids {
			walk(k, f)
		}
	case *orNode:
		for _, k := range n.kids {
			walk(k, f)
		}
	case *notNode:
		walk(n.kid, f)
	case *groupNode:
		walk(n.kid, f)
	}
}

// groupNode is a compiled nodegroup, shared by every reference to it; it
// is never flattened into its parent, so that sharing stays cheap.
type groupNode struct {
	kid node
	w   int
}

func (n *groupNode) match(mn *Minion) bool     { return n.kid.match(mn) }
func (n *groupNode) weight() int               { return n.w }
func (n *groupNode) format(b *strings.Builder) { formatKid(b, n.kid) }

type andNode struct{ kids []node }

func (n *andNode) match(mn *Minion) bool {
	for _, k := range n.kids {
		if !k.match(mn) {
			return false
		}
	}
	return true
}

type orNode struct{ kids []node }

func (n *orNode) match(mn *Minion) bool {
	for _, k := range n.kids {
		if k.match(mn) {
			return true
		}
	}
	return false
}

type notNode struct{ kid node }

func (n *notNode) match(mn *Minion) bool { return !n.kid.match(mn) }

func (n *andNode) weight() int { return sumWeight(n.kids) }
func (n *orNode) weight() int  { return sumWeight(n.kids) }
func (n *notNode) weight() int { return n.kid.weight() }

func sumWeight(kids []node) int {
	w := 0
	for _, k := range kids {
		w += k.weight()
		if w > maxLeaves {
			return w // saturate early: shared nodegroups may multiply
		}
	}
	return w
}

func (n *andNode) format(b *strings.Builder) { formatJoin(b, n.kids, " and ") }
func (n *orNode) format(b *strings.Builder)  { formatJoin(b, n.kids, " or ") }
func (n *notNode) format(b *strings.Builder) {
	b.WriteString("not ")
	formatKid(b, n.kid)
}

func formatJoin(b *strings.Builder, kids []node, sep string) {
	for i, k := range kids {
		if i > 0 {
			b.WriteString(sep)
		}
		formatKid(b, k)
	}
}

// formatKid writes k, in parentheses when it is an and/or.
func formatKid(b *strings.Builder, k node) {
	switch k.(type) {
	case *andNode, *orNode:
		b.WriteString("( ")
		k.format(b)
		b.WriteString(" )")
	default:
		k.format(b)
	}
}

// globNode matches the minion id with fnmatch.
type globNode struct {
	pat    string
	prefix string // pattern is prefix + "*" with no other metacharacter
	lit    bool   // pattern has no metacharacter
}

func newGlob(pat string) *globNode {
	g := &globNode{pat: pat}
	switch {
	case !HasGlobMeta(pat):
		g.lit = true
	case strings.HasSuffix(pat, "*") && !HasGlobMeta(pat[:len(pat)-1]):
		g.prefix = pat[:len(pat)-1]
	}
	return g
}

func (n *globNode) match(mn *Minion) bool {
	switch {
	case n.lit:
		return mn.ID == n.pat
	case n.prefix != "":
		return strings.HasPrefix(mn.ID, n.prefix)
	}
	return matchGlob(n.pat, mn.ID, false)
}

func (n *globNode) weight() int { return 1 }

func (n *globNode) format(b *strings.Builder) {
	if bareWordOK(n.pat) {
		b.WriteString(n.pat)
		return
	}
	b.WriteString("E@")
	b.WriteString(globToRegexp(n.pat))
}

// bareWordOK reports whether w, written alone in a compound expression, is
// read back as a glob on the id.
func bareWordOK(w string) bool {
	if w == "" || strings.ContainsFunc(w, isSpace) || isOperator(w) ||
		strings.HasPrefix(w, "(") || strings.HasSuffix(w, ")") {
		return false
	}
	_, _, _, ok := splitEngine(w)
	return !ok
}

// pcreNode matches the minion id with a regular expression anchored at the
// start (Python's re.match).
type pcreNode struct {
	pat string
	re  *regexp.Regexp
}

func (n *pcreNode) match(mn *Minion) bool { return n.re.MatchString(mn.ID) }
func (n *pcreNode) weight() int           { return 1 }
func (n *pcreNode) format(b *strings.Builder) {
	b.WriteString("E@")
	b.WriteString(n.pat)
}

// listNode matches a minion id that is one of a list.
type listNode struct {
	ids []string
	set map[string]struct{} // for long lists
}

func newList(ids []string) *listNode {
	n := &listNode{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			n.ids = append(n.ids, id)
		}
	}
	if len(n.ids) > 8 {
		n.set = make(map[string]struct{}, len(n.ids))
		for _, id := range n.ids {
			n.set[id] = struct{}{}
		}
	}
	return n
}

func (n *listNode) match(mn *Minion) bool {
	if n.set != nil {
		_, ok := n.set[mn.ID]
		return ok
	}
	for _, id := range n.ids {
		if id == mn.ID {
			return true
		}
	}
	return false
}

func (n *listNode) weight() int { return 1 }

func (n *listNode) format(b *strings.Builder) {
	if len(n.ids) == 0 {
		b.WriteString(`E@[^\x{0}-\x{10FFFF}]`) // matches nothing
		return
	}
	plain := true
	for _, id := range n.ids {
		if strings.ContainsFunc(id, isSpace) || strings.Contains(id, ",") {
			plain = false
		}
	}
	if plain {
		b.WriteString("L@")
		b.WriteString(strings.Join(n.ids, ","))
		return
	}
	b.WriteString("E@(?:")
	for i, id := range n.ids {
		if i > 0 {
			b.WriteByte('|')
		}
		for j := 0; j < len(id); {
			r, w := decodeRune(id, j)
			writeRegexpRune(b, r)
			j += w
		}
	}
	b.WriteString(`)\z`)
}
