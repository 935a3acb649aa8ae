package targets

import (
	"regexp"
	"testing"
)

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pat, name string
		want      bool
	}{
		{"*", "", true},
		{"*", "web1", true},
		{"web*", "web1", true},
		{"web*", "db1", false},
		{"salt/job/*/ret/*", "salt/job/20261122115704123456/ret/cam1", true},
		{"salt/job/*/ret/*", "salt/job/1/new", false},
		{"web?", "web1", true},
		{"web?", "web12", false},
		{"web[12]", "web2", true},
		{"web[12]", "web3", false},
		{"web[!12]", "web3", true},
		{"web[!12]", "web1", false},
		{"web[1-3]x", "web2x", true},
		{"web[1-3]x", "web4x", false},
		{"web[", "web[", true},
		{"web[", "web1", false},
		{"[]]", "]", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"**", "x", true},
		{"", "", true},
		{"", "a", false},
	}
	for _, tt := range tests {
		if got := MatchGlob(tt.pat, tt.name); got != tt.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", tt.pat, tt.name, got, tt.want)
		}
	}
}

// TestGlobToRegexp checks that the translation String() uses for globs that
// cannot stand alone in a compound expression agrees with MatchGlob.
func TestGlobToRegexp(t *testing.T) {
	pats := []string{"*", "web?", "web[12]", "web[!12]", "web[1-3]x", "web[", "[]]", "a*b*c", "[z-a]", "[!z-a]", "a.b+c", "é?", "a b*", "[^x]"}
	names := []string{"", "web1", "web3", "web2x", "web[", "]", "axxbyyc", "a", "b", "a.b+c", "éx", "a bcd", "^", "x", "\xff"}
	for _, p := range pats {
		re := regexp.MustCompile(`^` + globToRegexp(p))
		for _, n := range names {
			if got, want := re.MatchString(n), MatchGlob(p, n); got != want {
				t.Errorf("globToRegexp(%q) = %q matches %q: %v, want %v", p, globToRegexp(p), n, got, want)
			}
		}
	}
}

func TestMatchGlobUnicodeAndFold(t *testing.T) {
	tests := []struct {
		pat, name string
		fold      bool
		want      bool
	}{
		{"caf?", "café", false, true}, // '?' is one code point, as in Python
		{"caf[é]", "café", false, true},
		{"caf[à-ê]", "café", false, true},
		{"debian*", "Debian-12", true, true},
		{"debian*", "Debian-12", false, false},
		{"ärger", "ÄRGER", true, true},
		{"\xff", "\xfe", false, false}, // distinct invalid bytes never compare equal
		{"?", "\xff", false, true},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pat, tt.name, tt.fold); got != tt.want {
			t.Errorf("matchGlob(%q, %q, %v) = %v, want %v", tt.pat, tt.name, tt.fold, got, tt.want)
		}
	}
}
