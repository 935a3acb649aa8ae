package targets

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/halite-fleet/halite/internal/saltdata"
)

// fleet is a fixed set of minions whose ids and grains cover the examples
// of Salt's targeting documentation.
func fleet() []*Minion {
	g := func(id string, kv ...any) map[string]any {
		m := map[string]any{"id": id, "kernel": "Linux"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	return []*Minion{
		{ID: "webserv1", Grains: g("webserv1", "os", "Debian", "roles", []any{"web"}, "cpuarch", "x86_64", "num_cpus", 4,
			"ipv4", []any{"127.0.0.1", "192.168.1.10"}, "ipv6", []any{"::1", "2001:db8::10"},
			"ec2_tags", map[string]any{"environment": "production-east"}, "virtual", false, "mem_gib", 7.5),
			Pillar: map[string]any{"pdata": "foobar", "somekey": "specialvalue",
				"foo": map[string]any{"bar": "foo:bar"}}},
		{ID: "webserv2", Grains: g("webserv2", "os", "Ubuntu", "roles", []any{"web", "cache"}, "osrelease", "22.04",
			"num_cpus", 2, "ipv4", []any{"10.0.0.5"}, "ec2_tags", map[string]any{"environment": "staging"}),
			Pillar: map[string]any{"pdata": "bar", "gitrepo": "https://github.com:example/project.git"}},
		{ID: "web-dc1-srv", Grains: g("web-dc1-srv", "os", "Debian", "ipv4", []any{"192.168.1.100"}),
			Pillar: map[string]any{"pdata": "foo", "foo": "bar:baz"}},
		{ID: "web-dc1-srv2", Grains: g("web-dc1-srv2", "os", "CentOS", "ipv4", []any{"192.168.40.20"}, "virtual", true)},
		{ID: "web1.dev.loc", Grains: g("web1.dev.loc", "os", "Fedora", "cpuarch", "x86_64", "ipv4", []any{"10.0.0.20"},
			"ipv6", []any{"2001:db8::1", "fe80::1"})},
		{ID: "web2.prod.loc", Grains: g("web2.prod.loc", "os", "RedHat", "cpuarch", "aarch64")},
		{ID: "web1-prod", Grains: g("web1-prod", "os", "Ubuntu")},
		{ID: "web1-devel", Grains: g("web1-devel", "os", "Arch")},
		{ID: "minion1.example.com", Grains: g("minion1.example.com", "os", "Windows", "kernel", "Windows")},
		{ID: "minion3.domain.com", Grains: g("minion3.domain.com", "os", "MacOS", "kernel", "Darwin")},
		{ID: "bl1.domain.com", Grains: g("bl1.domain.com", "os", "Debian")},
		{ID: "foo.domain.com", Grains: g("foo.domain.com", "os", "Debian", "foo", "bar")},
		{ID: "bar.domain.com", Grains: g("bar.domain.com", "os", "Ubuntu", "foo", "baz")},
		{ID: "ms-1", Grains: g("ms-1", "os", "Debian")},
		{ID: "ms-3", Grains: g("ms-3", "os", "Debian")},
		{ID: "web-x", Grains: nil}, // a minion whose grains the master does not hold
	}
}

// docNodegroups is the nodegroups: example of Salt's documentation, plus
// the list-of-ids forms.
var docNodegroups = map[string]any{
	"group1": "L@foo.domain.com,bar.domain.com,baz.domain.com or bl*.domain.com",
	"group2": "G@os:Debian and foo.domain.com",
	"group3": "G@os:Debian and N@group1",
	"group4": []any{"G@foo:bar", "or", "G@foo:baz"},
	"hosts":  []any{"ms-1", "ms-3", "webserv1"},
	"hosts2": "ms-1,web-dc1-srv",
	"rx":     "web[12]\\.(dev|prod)\\.loc",
	"nested": "N@group4 and not N@group2",
	"deep":   []any{"(", "N@nested", ")", "or", "N@hosts"},
	"spaced": []any{"G@os:Red Hat", "or", "ms-1"},
}

func matchAll(t *testing.T, m *Matcher) []string {
	t.Helper()
	var got []string
	for _, mn := range fleet() {
		if m.Match(mn) {
			got = append(got, mn.ID)
		}
	}
	slices.Sort(got)
	return got
}

func ids(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.Fields(s)
	slices.Sort(out)
	return out
}

// TestSaltDocExamples runs the examples of Salt's targeting documentation
// (globbing, pcre, list, grains, pillar, ipcidr, compound, nodegroups) and
// more against the fixed fleet.
func TestSaltDocExamples(t *testing.T) {
	tests := saltDocExamples
	for _, tt := range tests {
		m, err := Compile(tt.expr, tt.tgtType, Options{Delimiter: tt.delim, Nodegroups: docNodegroups})
		if err != nil {
			t.Errorf("Compile(%q, %q): %v", tt.expr, tt.tgtType, err)
			continue
		}
		want := ids(tt.want)
		if got := matchAll(t, m); !slices.Equal(got, want) {
			t.Errorf("Compile(%q, %q) matched %v, want %v", tt.expr, tt.tgtType, got, want)
		}
		// String() is a compound expression that selects the same minions
		// (no pattern here holds whitespace, except the "spaced" group).
		if tt.expr == "spaced" {
			continue
		}
		s := m.String()
		m2, err := Compile(s, "compound", Options{})
		if err != nil {
			t.Errorf("Compile(%q, %q).String() = %q, which does not compile: %v", tt.expr, tt.tgtType, s, err)
			continue
		}
		if got := matchAll(t, m2); !slices.Equal(got, want) {
			t.Errorf("String() of %q (%s) = %q, which matched %v, want %v", tt.expr, tt.tgtType, s, got, want)
		}
	}
}

// saltDocExamples is TestSaltDocExamples' table, which TestIndexDocExamples
// also runs against the indexed fleet.
var saltDocExamples = []struct {
	expr, tgtType string
	delim         string
	want          string // space-separated ids
}{
	// Globbing.
	{"*", "", "", "webserv1 webserv2 web-dc1-srv web-dc1-srv2 web1.dev.loc web2.prod.loc web1-prod web1-devel minion1.example.com minion3.domain.com bl1.domain.com foo.domain.com bar.domain.com ms-1 ms-3 web-x"},
	{"*.domain.com", "glob", "", "minion3.domain.com bl1.domain.com foo.domain.com bar.domain.com"},
	{"*.example.*", "glob", "", "minion1.example.com"},
	{"web?.*.loc", "glob", "", "web1.dev.loc web2.prod.loc"},
	{"webserv[1-5]", "glob", "", "webserv1 webserv2"},
	{"webserv[1,3]", "glob", "", "webserv1"},
	{"web-[x-z]", "glob", "", "web-x"},
	{"WEBSERV1", "glob", "", ""}, // glob on the id is case-sensitive
	{"ms-1", "glob", "", "ms-1"},
	// PCRE on the id: anchored at the start only, like re.match.
	{`web1-(prod|devel)`, "pcre", "", "web1-prod web1-devel"},
	{`web\d+\.(dev|qa|prod)\.loc`, "pcre", "", "web1.dev.loc web2.prod.loc"},
	{`^(memcache|web).(qa|prod).loc$`, "pcre", "", ""},
	{`web-dc1`, "pcre", "", "web-dc1-srv web-dc1-srv2"},
	{`dc1`, "pcre", "", ""},
	{`ms-1|ms-3`, "pcre", "", "ms-1 ms-3"},
	// Lists.
	{"webserv1,webserv2,nosuch", "list", "", "webserv1 webserv2"},
	{"ms-1", "list", "", "ms-1"},
	{"ms-*", "list", "", ""},
	// Grains: glob, case-insensitive, nested, lists, numbers, bools.
	{"os:Fedora", "grain", "", "web1.dev.loc"},
	{"os:debian", "grain", "", "webserv1 web-dc1-srv bl1.domain.com foo.domain.com ms-1 ms-3"},
	{"cpuarch:x86_64", "grain", "", "webserv1 web1.dev.loc"},
	{"ec2_tags:environment:*production*", "grain", "", "webserv1"},
	{"roles:web", "grain", "", "webserv1 webserv2"},
	{"roles:cache", "grain", "", "webserv2"},
	{"roles:1:cache", "grain", "", "webserv2"}, // a list indexed by position
	{"num_cpus:4", "grain", "", "webserv1"},
	{"num_cpus:[2-3]", "grain", "", "webserv2"},
	{"mem_gib:7.5", "grain", "", "webserv1"},
	{"virtual:false", "grain", "", "webserv1"},
	{"virtual:True", "grain", "", "web-dc1-srv2"},
	{"ec2_tags:*", "grain", "", "webserv1 webserv2"},           // the key exists
	{"ec2_tags:environment", "grain", "", "webserv1 webserv2"}, // a key of the map
	{"*:fedora", "grain", "", "web1.dev.loc"},                  // any top-level value
	{"*:*:production*", "grain", "", "webserv1"},               // one level down
	{"osrelease:22.04", "grain", "", "webserv2"},
	{"ipv6:2001:db8::10", "grain", "", "webserv1"},  // value holds the delimiter
	{"ipv6|2001:db8::10", "grain", "|", "webserv1"}, // salt '*' match.grain 'ipv6|2001:db8::...' delimiter='|'
	{"ec2_tags|environment|staging", "grain", "|", "webserv2"},
	{"nosuch:*", "grain", "", ""},
	// Grains PCRE: anchored at the start, case-insensitive.
	{"os:(RedHat|Fedora|CentOS)", "grain_pcre", "", "web-dc1-srv2 web1.dev.loc web2.prod.loc"},
	{"os:Arch.*", "grain_pcre", "", "web1-devel"},
	{"os:deb", "grain_pcre", "", "webserv1 web-dc1-srv bl1.domain.com foo.domain.com ms-1 ms-3"},
	{`num_cpus:\d`, "grain_pcre", "", "webserv1 webserv2"},
	// Pillar.
	{"somekey:specialvalue", "pillar", "", "webserv1"},
	{"foo:bar:baz*", "pillar", "", "web-dc1-srv"}, // a value holding ':'
	{"foo:bar:foo:*", "pillar", "", "webserv1"},   // a nested key
	{"pdata:foo*", "pillar", "", "webserv1 web-dc1-srv"},
	{"pdata:^(foo|bar)$", "pillar_pcre", "", "webserv2 web-dc1-srv"},
	{"pdata:foo", "pillar_exact", "", "web-dc1-srv"},
	{"pdata:fo*", "pillar_exact", "", ""},
	// Subnet / IP address.
	{"192.168.40.20", "ipcidr", "", "web-dc1-srv2"},
	{"192.168.1.0/24", "ipcidr", "", "webserv1 web-dc1-srv"},
	{"10.0.0.0/255.0.0.0", "ipcidr", "", "webserv2 web1.dev.loc"},
	{"2001:db8::/64", "ipcidr", "", "webserv1 web1.dev.loc"},
	{"2001:db8::1", "ipcidr", "", "web1.dev.loc"},
	{"0.0.0.0/0", "ipcidr", "", "webserv1 webserv2 web-dc1-srv web-dc1-srv2 web1.dev.loc"},
	// Compound: the documentation's examples.
	{"webserv* and G@os:Debian or E@web-dc1-srv.*", "compound", "", "webserv1 web-dc1-srv web-dc1-srv2"},
	{"not web-dc1-srv", "compound", "", "webserv1 webserv2 web-dc1-srv2 web1.dev.loc web2.prod.loc web1-prod web1-devel minion1.example.com minion3.domain.com bl1.domain.com foo.domain.com bar.domain.com ms-1 ms-3 web-x"},
	{"* and not G@kernel:Darwin", "compound", "", "webserv1 webserv2 web-dc1-srv web-dc1-srv2 web1.dev.loc web2.prod.loc web1-prod web1-devel minion1.example.com bl1.domain.com foo.domain.com bar.domain.com ms-1 ms-3 web-x"},
	{"* and not web-dc1-srv", "compound", "", "webserv1 webserv2 web-dc1-srv2 web1.dev.loc web2.prod.loc web1-prod web1-devel minion1.example.com minion3.domain.com bl1.domain.com foo.domain.com bar.domain.com ms-1 ms-3 web-x"},
	{"( ms-1 or G@id:ms-3 ) and G@id:ms-3", "compound", "", "ms-3"},
	{"G@os:Ubuntu", "compound", "", "webserv2 web1-prod bar.domain.com"},
	{`E@web\d+\.(dev|qa|prod)\.loc`, "compound", "", "web1.dev.loc web2.prod.loc"},
	{"P@os:(RedHat|Fedora|CentOS)", "compound", "", "web-dc1-srv2 web1.dev.loc web2.prod.loc"},
	{"L@minion1.example.com,minion3.domain.com or bl*.domain.com", "compound", "", "minion1.example.com minion3.domain.com bl1.domain.com"},
	{"I@pdata:foobar", "compound", "", "webserv1"},
	{"J@pdata:^(foo|bar)$", "compound", "", "webserv2 web-dc1-srv"},
	{"S@192.168.1.0/24 or S@192.168.1.100", "compound", "", "webserv1 web-dc1-srv"},
	{"S@10.0.0.0/24 and G@os:Ubuntu", "compound", "", "webserv2"},
	{"G@os:Fedora and S@2001:db8::/64", "compound", "", "web1.dev.loc"},
	{"N@group1", "compound", "", "bl1.domain.com foo.domain.com bar.domain.com"},
	{"J|@foo|bar|^foo:bar$ or J!@gitrepo!https://github.com:example/project.git", "compound", "", "webserv1 webserv2 web-dc1-srv"}, // "bar|^foo" is an alternation
	{"G|@ec2_tags|environment|prod*", "compound", "", "webserv1"},
	// Compound beyond the documentation: precedence, implicit "and not".
	{"ms-1 or ms-3 and G@os:Ubuntu", "compound", "", "ms-1"},
	{"( ms-1 or ms-3 ) and not G@id:ms-1", "compound", "", "ms-3"},
	{"ms-* not ms-1", "compound", "", "ms-3"},
	{"not ( ms-* or web* or *.com )", "compound", "", ""},
	{"not G@os:Debian and ms-*", "compound", "", ""},
	{"( ( ms-1 ) )", "compound", "", "ms-1"},
	{"G@nosuch:* or web-x", "compound", "", "web-x"},
	{"not G@os:*", "compound", "", "web-x"},
	// Nodegroups.
	{"group1", "nodegroup", "", "bl1.domain.com foo.domain.com bar.domain.com"},
	{"group2", "nodegroup", "", "foo.domain.com"},
	{"group3", "nodegroup", "", "bl1.domain.com foo.domain.com"},
	{"group4", "nodegroup", "", "foo.domain.com bar.domain.com"},
	{"hosts", "nodegroup", "", "ms-1 ms-3 webserv1"},
	{"hosts2", "nodegroup", "", "ms-1 web-dc1-srv"},
	{"rx", "nodegroup", "", "web1.dev.loc web2.prod.loc"},
	{"nested", "nodegroup", "", "bar.domain.com"},
	{"deep", "nodegroup", "", "bar.domain.com ms-1 ms-3 webserv1"},
	{"spaced", "nodegroup", "", "ms-1"},
	{"N@group2 or N@hosts2", "compound", "", "foo.domain.com ms-1 web-dc1-srv"},
}

func TestCompileList(t *testing.T) {
	m, err := CompileList([]string{"ms-1", " webserv2 ", ""})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := matchAll(t, m), ids("ms-1 webserv2"); !slices.Equal(got, want) {
		t.Errorf("CompileList matched %v, want %v", got, want)
	}
	if _, err := CompileList(nil); !IsSyntaxError(err) {
		t.Errorf("CompileList(nil) error = %v, want a SyntaxError", err)
	}
	long := make([]string, 50)
	for i := range long {
		long[i] = "x" + strings.Repeat("y", i)
	}
	long[17] = "ms-3"
	m, err = CompileList(long)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := matchAll(t, m), ids("ms-3"); !slices.Equal(got, want) {
		t.Errorf("CompileList(long) matched %v, want %v", got, want)
	}
}

func TestNeedsGrains(t *testing.T) {
	tests := []struct {
		expr, tgtType  string
		grains, pillar bool
	}{
		{"web*", "glob", false, false},
		{"web.*", "pcre", false, false},
		{"a,b", "list", false, false},
		{"web* and not E@db.* or L@a,b", "compound", false, false},
		{"web* and G@os:Debian", "compound", true, false},
		{"I@role:web", "compound", true, true},
		{"S@10.0.0.0/8", "compound", true, false},
		{"10.0.0.0/8", "ipcidr", true, false},
		{"group2", "nodegroup", true, false},
		{"hosts", "nodegroup", false, false},
	}
	for _, tt := range tests {
		m, err := Compile(tt.expr, tt.tgtType, Options{Nodegroups: docNodegroups})
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, err)
		}
		if got := m.NeedsGrains(); got != tt.grains {
			t.Errorf("Compile(%q).NeedsGrains() = %v, want %v", tt.expr, got, tt.grains)
		}
		if got := m.NeedsPillar(); got != tt.pillar {
			t.Errorf("Compile(%q).NeedsPillar() = %v, want %v", tt.expr, got, tt.pillar)
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		expr, tgtType string
		pos           int
		msg           string // a substring of the message
	}{
		{"", "glob", 0, "empty expression"},
		{"   ", "compound", 0, "empty expression"},
		{"web[", "pcre", 0, "missing closing ]"},
		{"os", "grain", 2, `expected grain key:value`},
		{"os:(Deb", "grain_pcre", 3, "missing closing )"},
		{"role", "pillar", 4, "expected pillar key:value"},
		{"10.0.0.1/8", "ipcidr", 0, "host bits set (did you mean 10.0.0.0/8?)"},
		{"10.0.0.0/33", "ipcidr", 0, "expected an IP address or network"},
		{"nosuch", "ipcidr", 0, "expected an IP address or network"},
		{",,", "list", 0, "expected a comma-separated list"},
		{"and web*", "compound", 0, `expected a target, got "and"`},
		{"web* and", "compound", 8, "expected a target, got the end"},
		{"web* or or db*", "compound", 8, `expected a target, got "or"`},
		{"web* db*", "compound", 5, `expected and, or, or the end of the expression, got "db*"`},
		{"( web*", "compound", 6, `expected ")"`},
		{"web* )", "compound", 5, `unbalanced ")"`},
		{"( and web* )", "compound", 2, `expected a target after "("`},
		{"( )", "compound", 2, `expected a target, got ")"`},
		{"(web* or db*)", "compound", 0, "expected parentheses separated by spaces"},
		{"not not web*", "compound", 4, `after "not", got "not"`},
		{"G@os", "compound", 4, "expected grain key:value"},
		{"G@", "compound", 2, `expected a pattern after "G@"`},
		{"web* and G|@os", "compound", 14, `expected grain key|value`},
		{"ms-1 or E@(web", "compound", 10, "missing closing )"},
		{"ms-1 or P@os:(web", "compound", 13, "missing closing )"},
		{"S@300.0.0.0/8", "compound", 2, "expected an IP address or network"},
		{"L@,", "compound", 2, "expected a comma-separated list"},
		{"R@%foo.bar", "compound", 0, "range targeting (R@) is not supported"},
		{"web* and N@nosuch", "compound", 11, `unknown nodegroup "nosuch"`},
		{"nosuch", "nodegroup", 0, `unknown nodegroup "nosuch"`},
		{strings.Repeat("( ", MaxDepth+1) + "x" + strings.Repeat(" )", MaxDepth+1), "compound", 2 * MaxDepth, "levels of nesting"},
		{strings.Repeat("x", MaxExprLen+1), "glob", MaxExprLen, "expression longer than"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.expr, tt.tgtType, Options{Nodegroups: docNodegroups})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%.40q, %q) error = %v, want a *SyntaxError", tt.expr, tt.tgtType, err)
			continue
		}
		if se.Pos != tt.pos || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("Compile(%.40q, %q) error at %d %q, want at %d containing %q", tt.expr, tt.tgtType, se.Pos, se.Msg, tt.pos, tt.msg)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	_, err := Compile("web* db*", "compound", Options{})
	want := `target "web* db*": at position 5: expected and, or, or the end of the expression, got "db*"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestUnknownTgtType(t *testing.T) {
	if _, err := Compile("x", "range", Options{}); err == nil || IsSyntaxError(err) {
		t.Errorf("Compile with tgt_type range: error = %v, want a tgt_type error", err)
	}
	for _, s := range []string{"", "glob", "pcre", "list", "grain", "grain_pcre", "pillar", "pillar_pcre", "ipcidr", "compound", "nodegroup"} {
		if !ValidTgtType(s) {
			t.Errorf("ValidTgtType(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"Glob", "regex", "range", "data"} {
		if ValidTgtType(s) {
			t.Errorf("ValidTgtType(%q) = true, want false", s)
		}
	}
}

func TestNodegroupCycles(t *testing.T) {
	groups := map[string]any{
		"a":    "N@b or ms-1",
		"b":    []any{"ms-3", "and", "N@c"},
		"c":    "G@os:Debian and N@a",
		"self": "N@self",
		"ok1":  "N@ok2 or N@ok2", // a diamond is not a cycle
		"ok2":  "N@ok3 and N@ok3",
		"ok3":  "ms-*",
		"bad":  42,
		"none": "",
		"err":  "ms-1 and",
	}
	tests := []struct {
		expr, tgtType string
		msg           string
	}{
		{"a", "nodegroup", "nodegroup a: nodegroup b: nodegroup c: " + `target "G@os:Debian and N@a": at position 18: nodegroup cycle: a -> b -> c -> a`},
		{"self", "nodegroup", `nodegroup self: target "N@self": at position 2: nodegroup cycle: self -> self`},
		{"ms-1 or N@c", "compound", "nodegroup c: nodegroup a: nodegroup b: " + `target "ms-3 and N@c": at position 11: nodegroup cycle: c -> a -> b -> c`},
		{"bad", "nodegroup", "neither a string nor a list"},
		{"none", "nodegroup", `nodegroup "none" is empty`},
		{"err", "nodegroup", `nodegroup err: target "ms-1 and": at position 8: expected a target`},
	}
	for _, tt := range tests {
		_, err := Compile(tt.expr, tt.tgtType, Options{Nodegroups: groups})
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Compile(%q, %q) error = %v, want one containing %q", tt.expr, tt.tgtType, err, tt.msg)
		}
	}
	m, err := Compile("ok1", "nodegroup", Options{Nodegroups: groups})
	if err != nil {
		t.Fatalf("diamond nodegroups: %v", err)
	}
	if got, want := matchAll(t, m), ids("ms-1 ms-3"); !slices.Equal(got, want) {
		t.Errorf("ok1 matched %v, want %v", got, want)
	}
}

func TestNodegroupBlowupRefused(t *testing.T) {
	// Each level references the one below twice: 2^40 terms if unfolded.
	groups := map[string]any{"g0": "ms-*"}
	for i := 1; i <= 40; i++ {
		groups["g"+itoa(i)] = "N@g" + itoa(i-1) + " or N@g" + itoa(i-1)
	}
	_, err := Compile("g40", "nodegroup", Options{Nodegroups: groups})
	if err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Errorf("error = %v, want target too complex", err)
	}
	if _, err := Compile("g10", "nodegroup", Options{Nodegroups: groups}); err != nil {
		t.Errorf("g10 (1024 terms): %v", err)
	}
}

func itoa(i int) string {
	b, _ := saltdata.AppendNumber(nil, i)
	return string(b)
}

func TestGrainValueFormats(t *testing.T) {
	mn := &Minion{ID: "x", Grains: valueFormatGrains()}
	tests := grainValueFormats
	for _, tt := range tests {
		m, err := Compile(tt.expr, tt.tgtType, Options{})
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, err)
		}
		if got := m.Match(mn); got != tt.want {
			t.Errorf("Compile(%q, %q).Match = %v, want %v", tt.expr, tt.tgtType, got, tt.want)
		}
	}
}

// valueFormatGrains and grainValueFormats are TestGrainValueFormats' minion
// and table, which TestIndexValueFormats also runs against the index.
func valueFormatGrains() map[string]any {
	return map[string]any{
		"f1": 3.0, "f2": 1e16, "f3": 0.00001, "f4": 0.1, "n": nil, "i8": int8(-3), "u": uint64(18446744073709551615),
		"l":   []any{map[string]any{"name": "eth0", "mac": "AA:BB"}, "plain"},
		"ss":  []string{"a", "B"},
		"mm":  map[any]any{"k": "V", "sub": map[any]any{"deep": 1}},
		"uni": "ÄRGER",
	}
}

var grainValueFormats = []struct {
	expr, tgtType string
	want          bool
}{
	{"f1:3.0", "grain", true},
	{"f1:3", "grain", false},
	{"f2:1e+16", "grain", true},
	{"f3:1e-05", "grain", true},
	{"f4:0.1", "grain", true},
	{"n:None", "grain", true},
	{"n:none", "grain", true},
	{"i8:-3", "grain", true},
	{"u:18446744073709551615", "grain", true},
	{"l:name:eth0", "grain", true},
	{"l:mac:aa:bb", "grain", true},
	{"l:plain", "grain", true},
	{"l:0:name:eth0", "grain", true},
	{"l:-1", "grain", false}, // "plain" is not a map; -1 indexes it, then nothing is left
	{"ss:b", "grain", true},
	{"ss:-1:b", "grain", true}, // Python's negative index
	{"mm:k:v", "grain", true},
	{"mm:sub:deep:1", "grain", true},
	{"mm:sub:deep", "grain", true},
	{"uni:ärger", "grain", true},
	{"uni:ä*", "grain", true},
	{`f1:3\.0`, "grain_pcre", true},
	{`i8:-\d`, "grain_pcre", true},
	{"f1:3.0", "pillar", false},
}

func TestMultiCharDelimiterString(t *testing.T) {
	m, err := Compile("ec2_tags::environment::prod*", "grain", Options{Delimiter: "::"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("G|@ec2_tags|environment|prod*", m.String()); diff != "" {
		t.Errorf("String() (-want +got):\n%s", diff)
	}
	if got, want := matchAll(t, m), ids("webserv1"); !slices.Equal(got, want) {
		t.Errorf("matched %v, want %v", got, want)
	}
}

func TestMatchAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race, so regexp matching allocates")
	}
	exprs := []string{
		"G@os:Debian and G@roles:web and not E@db.* or L@a,b,ms-1 and S@192.168.0.0/16",
		"G@num_cpus:4 or G@virtual:false or G@mem_gib:7.*",
		"G@ec2_tags:environment:prod* or G@*:staging or I@foo:bar:baz*",
		"webserv? or web*.loc or P@os:deb.* or S@2001:db8::/64",
		"N@group3 or N@hosts",
	}
	minions := fleet()
	for _, e := range exprs {
		m, err := Compile(e, "compound", Options{Nodegroups: docNodegroups})
		if err != nil {
			t.Fatalf("Compile(%q): %v", e, err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			for _, mn := range minions {
				m.Match(mn)
			}
		})
		if allocs != 0 {
			t.Errorf("Match(%q) allocates %v times per fleet, want 0", e, allocs)
		}
	}
}

// TestCLIList pins how salt -L splits its argument: salt/utils/parsers.py
// SaltCMDOptionParser._mixin_after_parsed removes the spaces and splits at
// the commas when there is one, else splits at white space.
func TestCLIList(t *testing.T) {
	tests := []struct {
		arg  string
		want []string
	}{
		{"web1,web2", []string{"web1", "web2"}},
		{"web1, web2", []string{"web1", "web2"}},
		{" web1 ,web2 ", []string{"web1", "web2"}},
		{"we b1,web2", []string{"web1", "web2"}}, // every space goes, inside names too
		{"web1 web2", []string{"web1", "web2"}},
		{"web1\tweb2", []string{"web1", "web2"}},
		{"web1", []string{"web1"}},
		{"web1,,web2,", []string{"web1", "web2"}},
		{",", []string{}},
		{"", []string{}},
	}
	for _, tt := range tests {
		got := CLIList(tt.arg)
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("CLIList(%q) (-want +got):\n%s", tt.arg, d)
		}
	}
}
