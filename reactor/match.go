package reactor

import (
	"strings"

	"github.com/halite-fleet/halite/targets"
)

// matcher finds the rules whose tag glob matches a tag (fnmatch, '*'
// crossing '/', as Salt's reactor). Exact tags are a map lookup; a glob is
// tried only when the tag has the glob's literal prefix and suffix, so most
// globs cost a few byte comparisons.
type matcher struct {
	exact map[string][]int
	globs []glob
}

type glob struct {
	pattern, prefix, suffix string
	middle                  []string // literal parts between stars, when '*' is the only meta
	starOnly                bool
	rule                    int
}

// matchStars matches a pattern whose only meta is '*' once prefix and
// suffix are known to match: the middle parts must appear in order
// (leftmost first is always right for '*'-only patterns).
func (g *glob) matchStars(tag string) bool {
	rest := tag[len(g.prefix) : len(tag)-len(g.suffix)]
	for _, part := range g.middle {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}

func newMatcher(rules []Rule) *matcher {
	m := &matcher{exact: map[string][]int{}}
	for i, r := range rules {
		if !targets.HasGlobMeta(r.Tag) {
			m.exact[r.Tag] = append(m.exact[r.Tag], i)
			continue
		}
		first := strings.IndexAny(r.Tag, "*?[")
		last := strings.LastIndexAny(r.Tag, "*?]")
		g := glob{pattern: r.Tag, prefix: r.Tag[:first], suffix: r.Tag[last+1:], rule: i}
		if !strings.ContainsAny(r.Tag, "?[]\\") {
			g.starOnly = true
			for _, part := range strings.Split(r.Tag[first:last+1], "*") {
				if part != "" {
					g.middle = append(g.middle, part)
				}
			}
		}
		m.globs = append(m.globs, g)
	}
	return m
}

// match appends to dst the indexes of the matching rules, in rule order.
func (m *matcher) match(tag string, dst []int) []int {
	ex := m.exact[tag]
	j := 0
	for k := range m.globs {
		g := &m.globs[k]
		if len(tag) < len(g.prefix)+len(g.suffix) || !strings.HasPrefix(tag, g.prefix) || !strings.HasSuffix(tag, g.suffix) {
			continue
		}
		if g.starOnly {
			if !g.matchStars(tag) {
				continue
			}
		} else if !targets.MatchGlob(g.pattern, tag) {
			continue
		}
		for j < len(ex) && ex[j] < g.rule {
			dst = append(dst, ex[j])
			j++
		}
		dst = append(dst, g.rule)
	}
	return append(dst, ex[j:]...)
}
