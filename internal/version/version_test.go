package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestRevision(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	tests := []struct {
		name, commit string
		bi           *debug.BuildInfo
		want         string
	}{
		{"ldflags win", "abc", vcs("vcs.revision", "def"), "abc"},
		{"vcs revision", "", vcs("vcs.revision", "def", "vcs.modified", "false"), "def"},
		{"dirty tree", "", vcs("vcs.revision", "def", "vcs.modified", "true"), "def-dirty"},
		{"no vcs", "", vcs("GOOS", "linux"), "unknown"},
		{"no build info", "", nil, "unknown"},
	}
	defer func(c string) { Commit = c }(Commit)
	for _, tt := range tests {
		Commit = tt.commit
		if got := revision(tt.bi); got != tt.want {
			t.Errorf("%s: revision: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestLine: what -ldflags -X stamps is what --version prints.
func TestLine(t *testing.T) {
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v1.2.3-4-gabcdef0", "abcdef0123"
	want := "halite-agent v1.2.3-4-gabcdef0 (commit abcdef0123, " + runtime.Version() + ")"
	if got := Line("halite-agent"); got != want {
		t.Errorf("Line: got %q, want %q", got, want)
	}
}

// TestReportShape pins Salt's versions_report layout (salt/version.py):
// "{0:>{pad}}: {1}" with pad the longest dependency or system name (at
// least len("Not Installed")) plus one, names sorted case-insensitively,
// " " after each section.
func TestReportShape(t *testing.T) {
	var b strings.Builder
	if err := Report(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	var headings []string
	width := -1
	for i, l := range lines {
		switch {
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			headings = append(headings, l)
		case l == " ":
			if i > 0 && lines[i-1] == " " {
				t.Errorf("line %d: two blank lines", i)
			}
		default:
			name, _, ok := strings.Cut(l, ": ")
			if !ok {
				t.Errorf("line %d %q: no \"name: value\"", i, l)
				continue
			}
			if width == -1 {
				width = len(name)
			}
			if len(name) != width || name[0] != ' ' {
				t.Errorf("line %d %q: name is %d wide, want %d, right-aligned", i, l, len(name), width)
			}
		}
	}
	want := []string{"Halite Version:", "Go Version:", "Dependency Versions:", "System Versions:"}
	if strings.Join(headings, "|") != strings.Join(want, "|") {
		t.Errorf("headings: got %q, want %q", headings, want)
	}
	if width < len("Not Installed")+1 {
		t.Errorf("pad %d, want at least len(\"Not Installed\")+1", width)
	}
	if !strings.Contains(b.String(), "\n"+strings.Repeat(" ", width-len("Go"))+"Go: "+runtime.Version()+"\n") {
		t.Errorf("no Go line in\n%s", b.String())
	}
	if lines[len(lines)-1] != " " {
		t.Errorf("last line %q, want \" \"", lines[len(lines)-1])
	}
}
