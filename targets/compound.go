package targets

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// Compound expressions follow Salt's compound matcher: the expression is
// split on whitespace into words; a word is an operator (and, or, not, and
// parentheses, which must stand alone), an engine-prefixed term (G@ P@ I@ J@
// L@ S@ E@ N@, with G, P, I, J taking an optional one-character delimiter
// as in G|@os|Debian), or else a glob on the minion id. Precedence is
// Python's: not binds tighter than and, and tighter than or. A "not" that
// follows a term means "and not", as in Salt; "not not" is an error, as it
// is in Salt.

type token struct {
	text string
	pos  int
}

func isSpace(r rune) bool {
	// Python's str.split() also splits on the information separators.
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func isOperator(w string) bool {
	switch w {
	case "and", "or", "not", "(", ")":
		return true
	}
	return false
}

// tokenize splits s on whitespace, recording where each word starts.
func tokenize(s string) []token {
	var toks []token
	start := -1
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if isSpace(r) {
			if start >= 0 {
				toks = append(toks, token{s[start:i], start})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
		i += w
	}
	if start >= 0 {
		toks = append(toks, token{s[start:], start})
	}
	return toks
}

// splitEngine splits a compound word into its engine letter, delimiter and
// pattern, as Salt's TARGET_REX. ok is false for a bare glob. The pattern
// may be empty ("G@"), which the caller refuses.
func splitEngine(w string) (engine byte, delim, pattern string, ok bool) {
	if len(w) < 2 || !strings.ContainsRune("GPIJLNSER", rune(w[0])) {
		return 0, "", "", false
	}
	e := w[0]
	if strings.ContainsRune("GPIJ", rune(e)) {
		_, sz := utf8.DecodeRuneInString(w[1:])
		if 1+sz < len(w) && w[1+sz] == '@' && (len(w) > 2+sz || w[1] != '@') {
			return e, w[1 : 1+sz], w[2+sz:], true
		}
	}
	if w[1] == '@' {
		return e, "", w[2:], true
	}
	return 0, "", "", false
}

type compiler struct {
	nodegroups map[string]any
	groups     map[string]node // compiled nodegroups, shared by reference
	stack      []string        // nodegroups being compiled, for cycles
}

func (c *compiler) compound(expr string, depth int) (node, error) {
	return c.parse(expr, tokenize(expr), depth)
}

func (c *compiler) parse(expr string, toks []token, depth int) (node, error) {
	if len(toks) == 0 {
		return nil, &SyntaxError{Expr: expr, Pos: 0, Msg: "expected a target, got an empty expression"}
	}
	p := &parser{c: c, expr: expr, toks: toks, depth: depth}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t, ok := p.peek(); ok {
		if t.text == ")" {
			return nil, p.errAt(t.pos, `unbalanced ")"`)
		}
		return nil, p.errAt(t.pos, fmt.Sprintf("expected and, or, or the end of the expression, got %q", t.text))
	}
	return n, nil
}

type parser struct {
	c     *compiler
	expr  string
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

func (p *parser) errAt(pos int, msg string) error {
	return &SyntaxError{Expr: p.expr, Pos: pos, Msg: msg}
}

func (p *parser) endPos() int { return len(p.expr) }

func (p *parser) or() (node, error) {
	n, err := p.and()
	if err != nil {
		return nil, err
	}
	kids := []node{n}
	for {
		t, ok := p.peek()
		if !ok || t.text != "or" {
			break
		}
		p.i++
		n, err := p.and()
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return kids[0], nil
	}
	return &orNode{kids: flatten[*orNode](kids)}, nil
}

func (p *parser) and() (node, error) {
	n, err := p.not()
	if err != nil {
		return nil, err
	}
	kids := []node{n}
	for {
		t, ok := p.peek()
		if !ok {
			break
		}
		switch t.text {
		case "and":
			p.i++
		case "not": // Salt reads "a not b" as "a and not b"
		default:
			goto done
		}
		n, err := p.not()
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
done:
	if len(kids) == 1 {
		return kids[0], nil
	}
	return &andNode{kids: flatten[*andNode](kids)}, nil
}

// flatten merges nested nodes of the same operator, from parentheses, so
// that matching recurses less.
func flatten[T interface {
	*andNode | *orNode
	node
}](kids []node) []node {
	out := make([]node, 0, len(kids))
	for _, k := range kids {
		if t, ok := k.(T); ok {
			switch x := any(t).(type) {
			case *andNode:
				out = append(out, x.kids...)
				continue
			case *orNode:
				out = append(out, x.kids...)
				continue
			}
		}
		out = append(out, k)
	}
	return out
}

func (p *parser) not() (node, error) {
	t, ok := p.peek()
	if !ok || t.text != "not" {
		return p.primary()
	}
	p.i++
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	if n, ok := p.peek(); ok && n.text == "not" {
		return nil, p.errAt(n.pos, `expected a target or "(" after "not", got "not" (Salt reads "not not" as "not and not")`)
	}
	kid, err := p.primary()
	if err != nil {
		return nil, err
	}
	if k, ok := kid.(*notNode); ok {
		return k.kid, nil
	}
	return &notNode{kid: kid}, nil
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(pos, fmt.Sprintf("expected at most %d levels of nesting", MaxDepth))
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) primary() (node, error) {
	t, ok := p.peek()
	if !ok {
		return nil, p.errAt(p.endPos(), "expected a target, got the end of the expression")
	}
	p.i++
	switch t.text {
	case "(":
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		if n, ok := p.peek(); ok && (n.text == "and" || n.text == "or") {
			return nil, p.errAt(n.pos, fmt.Sprintf(`expected a target after "(", got %q`, n.text))
		}
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		c, ok := p.peek()
		if !ok {
			return nil, p.errAt(p.endPos(), `expected ")", got the end of the expression`)
		}
		if c.text != ")" {
			return nil, p.errAt(c.pos, fmt.Sprintf(`expected and, or, or ")", got %q`, c.text))
		}
		p.i++
		return n, nil
	case ")", "and", "or":
		return nil, p.errAt(t.pos, fmt.Sprintf("expected a target, got %q", t.text))
	}
	return p.term(t)
}

func (p *parser) term(t token) (node, error) {
	w := t.text
	e, delim, pat, ok := splitEngine(w)
	if !ok {
		if strings.HasPrefix(w, "(") || strings.HasSuffix(w, ")") {
			return nil, p.errAt(t.pos, fmt.Sprintf("expected parentheses separated by spaces, got %q", w))
		}
		return newGlob(w), nil
	}
	ppos := t.pos + len(w) - len(pat)
	if pat == "" {
		return nil, p.errAt(ppos, fmt.Sprintf("expected a pattern after %q", w))
	}
	switch e {
	case 'G', 'P', 'I', 'J':
		if delim == "" {
			delim = DefaultDelimiter
		}
		kind := map[byte]string{'G': "grain", 'P': "grain_pcre", 'I': "pillar", 'J': "pillar_pcre"}[e]
		return newData(kind, pat, delim, p.expr, ppos)
	case 'L':
		l := newList(strings.Split(pat, ","))
		if len(l.ids) == 0 {
			return nil, p.errAt(ppos, "expected a comma-separated list of minion ids")
		}
		return l, nil
	case 'E':
		return newPCRE(pat, p.expr, ppos)
	case 'S':
		return newCIDR(pat, p.expr, ppos)
	case 'N':
		return p.c.nodegroup(pat, p.expr, ppos, p.depth)
	case 'R':
		return nil, p.errAt(t.pos, "range targeting (R@) is not supported")
	}
	return nil, p.errAt(t.pos, fmt.Sprintf("unknown target engine %q", string(e)))
}

// nodegroup compiles the nodegroup name, referenced at pos in expr.
func (c *compiler) nodegroup(name, expr string, pos, depth int) (node, error) {
	if n, ok := c.groups[name]; ok {
		return n, nil
	}
	for i, s := range c.stack {
		if s == name {
			chain := append(append([]string{}, c.stack[i:]...), name)
			return nil, &SyntaxError{Expr: expr, Pos: pos, Msg: "nodegroup cycle: " + strings.Join(chain, " -> ")}
		}
	}
	def, ok := c.nodegroups[name]
	if !ok {
		return nil, &SyntaxError{Expr: expr, Pos: pos, Msg: fmt.Sprintf("unknown nodegroup %q", name)}
	}
	if depth+1 > MaxDepth {
		return nil, &SyntaxError{Expr: expr, Pos: pos, Msg: fmt.Sprintf("expected at most %d levels of nesting", MaxDepth)}
	}
	text, toks, err := nodegroupWords(name, def)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, &SyntaxError{Expr: expr, Pos: pos, Msg: fmt.Sprintf("nodegroup %q is empty", name)}
	}
	c.stack = append(c.stack, name)
	n, err := c.nodegroupBody(text, toks, depth+1)
	c.stack = c.stack[:len(c.stack)-1]
	if err != nil {
		return nil, fmt.Errorf("nodegroup %s: %w", name, err)
	}
	g := &groupNode{kid: n, w: n.weight()}
	c.groups[name] = g
	return g, nil
}

// nodegroupWords tokenizes a nodegroup definition: a string is split on
// whitespace, a list gives one word per element (which may hold spaces).
// text is the definition as one string, for error positions.
func nodegroupWords(name string, def any) (string, []token, error) {
	var words []string
	switch d := def.(type) {
	case string:
		return d, tokenize(d), nil
	case []string:
		words = d
	case []any:
		for _, e := range d {
			words = append(words, saltdata.Str(e))
		}
	default:
		return "", nil, fmt.Errorf("nodegroup %s: neither a string nor a list of strings but %T", name, def)
	}
	var b strings.Builder
	toks := make([]token, 0, len(words))
	for _, w := range words {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if strings.TrimSpace(w) == "" {
			continue
		}
		toks = append(toks, token{w, b.Len()})
		b.WriteString(w)
	}
	return b.String(), toks, nil
}

// nodegroupBody compiles a nodegroup's words. As in Salt, words with no
// operator, no '*' and no engine prefix are a list of minion ids (L@), or
// a regular expression (E@) when one of them holds ( [ { \ ? } ] ).
func (c *compiler) nodegroupBody(text string, toks []token, depth int) (node, error) {
	plain, regex := true, false
	for _, t := range toks {
		w := t.text
		if isOperator(w) || strings.Contains(w, "*") || (len(w) >= 2 && w[0] >= 'A' && w[0] <= 'Z' && w[1] == '@') {
			plain = false
			break
		}
		if strings.ContainsAny(w, `([{\?}])`) {
			regex = true
		}
	}
	if !plain {
		return c.parse(text, toks, depth)
	}
	ids := make([]string, len(toks))
	for i, t := range toks {
		ids[i] = t.text
	}
	if regex {
		return newPCRE(strings.Join(ids, ","), text, 0)
	}
	return newList(strings.Split(strings.Join(ids, ","), ",")), nil
}
