package targets

import (
	"strings"
	"testing"
	"time"
)

// FuzzCompile checks that no expression makes Compile or Match panic or
// run long, and that String() of a compiled compound target compiles.
func FuzzCompile(f *testing.F) {
	seeds := []string{
		"*", "web[1-5]", "web[!", "[]]", "E@web\\d+", "G@os:Debian", "G|@a|b|c", "G@@x", "G|@", "P@os:(Red",
		"webserv* and G@os:Debian or E@web-dc1-srv.*", "not web-dc1-srv", "( ms-1 or G@id:ms-3 ) and G@id:ms-3",
		"J|@foo|bar|^foo:bar$ or J!@gitrepo!https://github.com:example/project.git", "S@10.0.0.0/8 or S@::1",
		"S@10.0.0.1/8", "L@a,b,,c", "N@group3 and not N@group4", "N@cyc", "( ( (", ") )", "not not x", "a b",
		"G@*:*:prod*", "I@foo:bar:baz*", "R@%foo", "G@ipv6:fe80::1", "(x", "x)", "and", "or or", "not",
		strings.Repeat("( ", 70) + "x", strings.Repeat("not ", 70) + "x", "G@" + strings.Repeat(":", 40),
		"\xff\xfe", "G@os:\xffx", "web?\u00e9",
	}
	types := []string{"", "glob", "pcre", "list", "grain", "grain_pcre", "pillar", "pillar_pcre", "pillar_exact", "ipcidr", "compound", "nodegroup"}
	for i, s := range seeds {
		f.Add(s, uint8(i))
		f.Add(s, uint8(10)) // compound
	}
	groups := map[string]any{
		"group1": "L@foo.domain.com,bar.domain.com or bl*.domain.com",
		"group3": "G@os:Debian and N@group1",
		"group4": []any{"G@foo:bar", "or", "G@foo:baz"},
		"cyc":    "N@cyc2", "cyc2": "N@cyc",
	}
	minions := fleet()
	f.Fuzz(func(t *testing.T, expr string, ty uint8) {
		if len(expr) > MaxExprLen+10 {
			return
		}
		tgtType := types[int(ty)%len(types)]
		start := time.Now()
		m, err := Compile(expr, tgtType, Options{Nodegroups: groups})
		if err != nil {
			if m != nil {
				t.Fatalf("Compile(%q, %q) returned a matcher and an error", expr, tgtType)
			}
			return
		}
		for _, mn := range minions {
			m.Match(mn)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Compile+Match(%q, %q) took %v", expr, tgtType, d)
		}
		s := m.String()
		if strings.ContainsFunc(expr, isSpace) && tgtType != "compound" || strings.Contains(expr, `\Q`) {
			return // whitespace inside a pattern cannot be written in compound syntax
		}
		m2, err := Compile(s, "compound", Options{})
		if err != nil {
			// A nodegroup or compound list may hold spaced words.
			if tgtType == "compound" || tgtType == "nodegroup" {
				return
			}
			t.Fatalf("Compile(%q, %q).String() = %q, which does not compile: %v", expr, tgtType, s, err)
		}
		for _, mn := range minions {
			if a, b := m.Match(mn), m2.Match(mn); a != b {
				t.Fatalf("Compile(%q, %q) matches %s: %v, its String() %q: %v", expr, tgtType, mn.ID, a, s, b)
			}
		}
	})
}
