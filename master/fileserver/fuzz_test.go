package fileserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// FuzzOpen: whatever the URL and saltenv (hostile: a template may build
// them from a device's grains), the file server serves only files under
// its roots, never the secret beside them, and never panics.
func FuzzOpen(f *testing.F) {
	for _, seed := range []string{
		"salt://ok", "salt://../secret", "salt://|../secret", "salt://%2e%2e/secret", "salt:///etc/passwd",
		"salt://link", "salt://dirlink/secret", "salt://ok?saltenv=..", "salt://ok?saltenv=../x",
		"salt://sub/../../secret", "salt://ok\x00", "salt://", "salt://ok?env=dev", "salt://a?b=c&saltenv=base",
		"salt://" + strings.Repeat("../", 100) + "secret",
	} {
		f.Add(seed, "base")
	}
	f.Add("salt://ok", "..")
	f.Add("salt://secret", "../top")
	top := f.TempDir()
	root := filepath.Join(top, "root")
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "ok"), []byte("ok"), 0o644)
	os.WriteFile(filepath.Join(top, "secret"), []byte("SECRET"), 0o644)
	os.Symlink("../secret", filepath.Join(root, "link"))
	os.Symlink("..", filepath.Join(root, "dirlink"))
	s := New(map[string][]string{"base": {root}, "__env__": {filepath.Join(top, "envs", "__env__")}})
	f.Fuzz(func(t *testing.T, url, env string) {
		check := func(p string, data []byte) {
			if strings.Contains(string(data), "SECRET") {
				t.Fatalf("%q in %q served the secret from %s", url, env, p)
			}
			if p != "" && !strings.HasPrefix(p, root+string(filepath.Separator)) && !strings.HasPrefix(p, filepath.Join(top, "envs")+string(filepath.Separator)) {
				t.Fatalf("%q in %q: path %s is not under a root", url, env, p)
			}
		}
		fi, data, _ := s.Read(url, env, -1)
		check(fi.Path, data)
		files, _, _ := s.ListDir(url, env)
		for _, rel := range files {
			if strings.Contains(rel, "..") {
				t.Fatalf("ListDir(%q) lists %q", url, rel)
			}
		}
		sls, _ := s.SLSPath(env, strings.TrimPrefix(url, "salt://"))
		check(sls, nil)
		c := state.Chunk{"state": "file.managed", "fun": "managed", "source": url, "__env__": env}
		c["state"] = "file"
		s.Inline([]state.Chunk{c}, env, nil)
		if m, ok := c[KeyFiles].(map[string]any); ok {
			for _, v := range m {
				check("", v.(map[string]any)["data"].([]byte))
			}
		}
	})
}

// BenchmarkInline: what one device's compile costs in the file server: a
// job of five file.managed states (one templated) whose files are cached,
// as for the ten-thousandth device of a highstate.
func BenchmarkInline(b *testing.B) {
	files := map[string]string{}
	for i := 0; i < 5; i++ {
		files["etc/f"+string(rune('0'+i))] = strings.Repeat("line of a config file\n", 200)
	}
	root := b.TempDir()
	for p, d := range files {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(d), 0o644)
	}
	s := New(map[string][]string{"base": {root}})
	render := func(path string, src []byte, ctx map[string]any) ([]byte, error) { return src, nil }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var cs []state.Chunk
		for j := 0; j < 5; j++ {
			c := state.Chunk{"state": "file", "fun": "managed", "name": "/etc/x", "source": "salt://etc/f" + string(rune('0'+j))}
			if j == 0 {
				c["template"] = "jinja"
			}
			cs = append(cs, c)
		}
		if err := s.Inline(cs, "base", render); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/device")
}

// BenchmarkOpen: a cached hash, as state compiles and cp.hash_file ask it.
func BenchmarkOpen(b *testing.B) {
	root := b.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(root, "a", "b", "c.conf"), []byte(strings.Repeat("x", 64<<10)), 0o644)
	s := New(map[string][]string{"base": {root}})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := s.Open("salt://a/b/c.conf", "base"); err != nil {
			b.Fatal(err)
		}
	}
}
