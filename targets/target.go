package targets

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// Limits on what Compile accepts, so that a hostile or mistaken target can
// neither exhaust memory at compile time nor make matching slow.
const (
	// MaxExprLen is the longest target expression accepted, in bytes.
	MaxExprLen = 64 << 10
	// MaxDepth bounds the nesting of parentheses, "not" and nodegroups.
	MaxDepth = 64
	// maxLeaves bounds the number of terms a match may evaluate, counting a
	// nodegroup once per reference.
	maxLeaves = 100_000
	// maxKeyParts bounds the delimiters in one grain or pillar term.
	maxKeyParts = 32
)

// DefaultDelimiter separates grain and pillar keys from each other and from
// the value, as Salt's DEFAULT_TARGET_DELIM.
const DefaultDelimiter = saltdata.DefaultDelimiter

// Minion is what a target is matched against: a minion's id, its grains and
// the pillar the master holds for it. Nil maps match no grain or pillar term.
//
// Index, when set, must be Index(Grains): grain and ipcidr terms then read
// it instead of walking the maps, with the same results. A caller that
// matches many targets against the same grains (the master, which holds
// every minion's) builds it once when the grains change.
type Minion struct {
	ID     string
	Grains map[string]any
	Pillar map[string]any
	Index  *Grains
}

// Options changes how Compile reads an expression.
type Options struct {
	// Delimiter separates nested keys and the value in grain and pillar
	// targets (Salt's --delimiter); "" means ":". Compound terms use ":" or
	// the delimiter written in the term (G|@os|Debian), as in Salt.
	Delimiter string
	// Nodegroups is the master config's nodegroups: value, name to a
	// compound string or a list of compound words.
	Nodegroups map[string]any
}

// SyntaxError reports a target expression that cannot be compiled. Pos is a
// 0-based byte offset into Expr, as in Python's re errors.
type SyntaxError struct {
	Expr string
	Pos  int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("target %q: at position %d: %s", e.Expr, e.Pos, e.Msg)
}

// tgtTypes are Salt's tgt_type names that Compile accepts.
var tgtTypes = map[string]bool{
	"glob": true, "pcre": true, "list": true, "grain": true, "grain_pcre": true,
	"pillar": true, "pillar_pcre": true, "pillar_exact": true, "ipcidr": true,
	"compound": true, "nodegroup": true,
}

// ValidTgtType reports whether s is a tgt_type Compile accepts ("" is glob).
func ValidTgtType(s string) bool {
	return s == "" || tgtTypes[s]
}

// Matcher is a compiled target. It is immutable and safe for concurrent use.
type Matcher struct {
	root        node
	expr        string
	tgtType     string
	needsGrains bool
	needsPillar bool
}

// Match reports whether the target selects mn. It allocates nothing, except
// when a regular expression is matched against a grain or pillar value that
// is not a string (a number, a bool, a map).
func (m *Matcher) Match(mn *Minion) bool {
	return m.root.match(mn)
}

// NeedsGrains reports whether matching reads grains (or pillar): false when
// the target looks only at the minion id, so callers can skip loading them.
func (m *Matcher) NeedsGrains() bool { return m.needsGrains || m.needsPillar }

// NeedsPillar reports whether matching reads the pillar.
func (m *Matcher) NeedsPillar() bool { return m.needsPillar }

// Expr returns the expression and tgt_type the matcher was compiled from.
func (m *Matcher) Expr() (expr, tgtType string) { return m.expr, m.tgtType }

// String returns the target as one compound expression, nodegroups
// expanded. Compiling it as "compound" without nodegroups gives a matcher
// that selects the same minions, provided no pattern holds whitespace
// (compound syntax splits on whitespace, as in Salt).
func (m *Matcher) String() string {
	var b strings.Builder
	m.root.format(&b)
	return b.String()
}

// Compile parses expr as a target of Salt's tgt_type ("" is glob).
// A malformed expression yields a *SyntaxError (possibly wrapped, for a
// nodegroup's definition).
func Compile(expr, tgtType string, opts Options) (*Matcher, error) {
	if !ValidTgtType(tgtType) {
		return nil, fmt.Errorf("compile target: unknown tgt_type %q (want one of glob, pcre, list, grain, grain_pcre, pillar, pillar_pcre, pillar_exact, ipcidr, compound, nodegroup)", tgtType)
	}
	if tgtType == "" {
		tgtType = "glob"
	}
	if len(expr) > MaxExprLen {
		return nil, &SyntaxError{Expr: expr[:64] + "...", Pos: MaxExprLen, Msg: fmt.Sprintf("expression longer than %d bytes", MaxExprLen)}
	}
	if strings.TrimSpace(expr) == "" {
		return nil, &SyntaxError{Expr: expr, Pos: 0, Msg: "expected a target, got an empty expression"}
	}
	delim := opts.Delimiter
	if delim == "" {
		delim = DefaultDelimiter
	}
	c := &compiler{nodegroups: opts.Nodegroups, groups: map[string]node{}}
	var (
		n   node
		err error
	)
	switch tgtType {
	case "glob":
		n = newGlob(expr)
	case "pcre":
		n, err = newPCRE(expr, expr, 0)
	case "list":
		l := newList(strings.Split(expr, ","))
		if len(l.ids) == 0 {
			return nil, &SyntaxError{Expr: expr, Pos: 0, Msg: "expected a comma-separated list of minion ids"}
		}
		n = l
	case "grain", "grain_pcre", "pillar", "pillar_pcre", "pillar_exact":
		n, err = newData(tgtType, expr, delim, expr, 0)
	case "ipcidr":
		n, err = newCIDR(expr, expr, 0)
	case "compound":
		n, err = c.compound(expr, 0)
	case "nodegroup":
		n, err = c.nodegroup(expr, expr, 0, 0)
	}
	if err != nil {
		return nil, err
	}
	if w := n.weight(); w > maxLeaves {
		return nil, &SyntaxError{Expr: expr, Pos: 0, Msg: fmt.Sprintf("target too complex: %d terms to evaluate, at most %d", w, maxLeaves)}
	}
	m := &Matcher{root: n, expr: expr, tgtType: tgtType}
	walk(n, func(n node) {
		if d, ok := n.(*dataNode); ok {
			if d.pillar {
				m.needsPillar = true
			} else {
				m.needsGrains = true
			}
		}
		if _, ok := n.(*cidrNode); ok {
			m.needsGrains = true
		}
	})
	return m, nil
}

// CompileList compiles a list target given as its members (salt -L with a
// Python list).
func CompileList(ids []string) (*Matcher, error) {
	if len(ids) == 0 {
		return nil, &SyntaxError{Msg: "expected at least one minion id in list"}
	}
	n := newList(ids)
	if len(n.ids) == 0 {
		return nil, &SyntaxError{Msg: "expected at least one minion id in list"}
	}
	return &Matcher{root: n, expr: strings.Join(ids, ","), tgtType: "list"}, nil
}

// CLIList splits the argument of salt -L as Salt's command line does
// (salt/utils/parsers.py SaltCMDOptionParser._mixin_after_parsed): with a
// comma, every space is removed and the text split at the commas ("web1,
// web2" is web1 and web2); without one, it is split at white space
// ("web1 web2"). Empty names are dropped, as no minion has one.
func CLIList(arg string) []string {
	var parts []string
	if strings.Contains(arg, ",") {
		parts = strings.Split(strings.ReplaceAll(arg, " ", ""), ",")
	} else {
		parts = strings.Fields(arg)
	}
	ids := parts[:0]
	for _, p := range parts {
		if p != "" {
			ids = append(ids, p)
		}
	}
	return ids
}

// IsSyntaxError reports whether err is or wraps a *SyntaxError.
func IsSyntaxError(err error) bool {
	var se *SyntaxError
	return errors.As(err, &se)
}

func newPCRE(pat, expr string, pos int) (node, error) {
	re, err := regexp.Compile(`^(?:` + pat + `)`)
	if err != nil {
		return nil, &SyntaxError{Expr: expr, Pos: pos, Msg: "expected a regular expression: " + reErrMsg(pat, err)}
	}
	return &pcreNode{pat: pat, re: re}, nil
}

// reErrMsg describes why pat does not compile, in terms of pat itself
// rather than of the anchored form Compile builds.
func reErrMsg(pat string, err error) string {
	if _, err2 := regexp.Compile(pat); err2 != nil {
		err = err2
	}
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}
