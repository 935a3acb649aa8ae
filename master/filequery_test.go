package master

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFileQueryAnswers: the master's answers to each op, signed over the
// question, from file_roots with two roots (the first holding a path
// wins, as Salt's roots.find_file) and a second environment; the files
// it names by manifest are served by chunk; paths that leave the roots are
// refused.
func TestFileQueryAnswers(t *testing.T) {
	first, second, prod := t.TempDir(), t.TempDir(), t.TempDir()
	big := strings.Repeat("0123456789abcdef", 40_000) // 640,000 bytes: 3 chunks
	writeFiles(t, first, map[string]string{"web/app.conf": "first\n", "web/big.bin": big, "top.sls": "base: {}\n"})
	writeFiles(t, second, map[string]string{"web/app.conf": "second\n", "web/sub/x": "x", "db/init.sls": "a: b\n"})
	writeFiles(t, prod, map[string]string{"web/app.conf": "prod\n"})
	if err := os.MkdirAll(filepath.Join(second, "web", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Dir(first), map[string]string{"secret": "not served"})
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.FileRoots = map[string][]string{"base": {first, second}, "prod": {prod}}
	}, nil)
	tm.startAgent(t, "cam1", map[string]any{"site": "harbour"})
	tm.waitConnected(t, "cam1")
	s := tm.minions.session("cam1")
	nonce := bytes.Repeat([]byte{5}, protocol.MinFileNonce)
	ask := func(op, path, env string) *protocol.FileAnswerBody {
		t.Helper()
		q := &protocol.FileQuery{Req: 1, Op: op, Path: path, Saltenv: env, Nonce: nonce}
		b := tm.fileAnswer(context.Background(), s, q)
		signed, err := protocol.SignFileAnswer(tm.id.Priv, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := protocol.OpenFileAnswer(tm.id.Pub, signed)
		if err != nil {
			t.Fatalf("%s %s: the signed answer does not open: %v", op, path, err)
		}
		if got.ID != "cam1" || !bytes.Equal(got.Nonce, nonce) || got.Op != op || got.Path != path || got.Saltenv != env {
			t.Fatalf("%s %s: the answer is not over the question: %+v", op, path, got)
		}
		return got
	}

	b := ask(protocol.FileFind, "salt://web/app.conf", "")
	sum := sha256.Sum256([]byte("first\n"))
	if b.Err != "" || len(b.Files) != 1 || b.Files[0].Path != "web/app.conf" || b.Files[0].Manifest == nil ||
		!bytes.Equal(b.Files[0].Manifest.SHA256, sum[:]) {
		t.Fatalf("find web/app.conf = %+v, want the first root's file by manifest", b)
	}
	b = ask(protocol.FileFind, "salt://web/app.conf?saltenv=prod", "")
	if b.Env != "prod" || b.Files[0].Size != int64(len("prod\n")) {
		t.Errorf("find ?saltenv=prod = %+v, want prod's file", b)
	}
	b = ask(protocol.FileFind, "web/big.bin", "base")
	m := b.Files[0].Manifest
	if m == nil || m.Size != int64(len(big)) || len(m.Chunks) != 3 {
		t.Fatalf("find web/big.bin = %+v", b)
	}
	var got []byte
	for _, h := range m.Chunks {
		c, err := tm.Blobs().Read(h)
		if err != nil {
			t.Fatalf("chunk of a file the master named is not served: %v", err)
		}
		got = append(got, c...)
	}
	if string(got) != big {
		t.Error("the chunks do not make the file")
	}

	b = ask(protocol.FileHash, "salt://db/init.sls", "")
	if sum := sha256.Sum256([]byte("a: b\n")); len(b.Files) != 1 || hex.EncodeToString(b.Files[0].SHA256) != hex.EncodeToString(sum[:]) || b.Files[0].Manifest != nil {
		t.Errorf("hash db/init.sls = %+v", b)
	}
	b = ask(protocol.FileFind, "salt://nope", "")
	if !b.Missing || b.Err == "" || len(b.Files) != 0 {
		t.Errorf("find salt://nope = %+v, want Missing", b)
	}
	for _, bad := range []string{"salt://../secret", "salt://web/../../secret", "salt:///etc/passwd", "salt://../etc/passwd"} {
		b = ask(protocol.FileFind, bad, "")
		if b.Missing || !strings.Contains(b.Err, "refused") || len(b.Files) != 0 {
			t.Errorf("find %s = %+v, want refused", bad, b)
		}
	}

	b = ask(protocol.FileList, "", "")
	var paths []string
	for _, f := range b.Files {
		paths = append(paths, f.Path)
	}
	want := []string{"db/init.sls", "top.sls", "web/app.conf", "web/big.bin", "web/sub/x"}
	if d := cmp.Diff(want, paths); d != "" {
		t.Errorf("list (-want +got):\n%s", d)
	}
	b = ask(protocol.FileList, "web/s", "")
	if len(b.Files) != 1 || b.Files[0].Path != "web/sub/x" {
		t.Errorf("list web/s = %+v", b.Files)
	}
	b = ask(protocol.FileDirs, "web", "")
	if d := cmp.Diff([]string{"web", "web/empty", "web/sub"}, b.Dirs); d != "" {
		t.Errorf("dirs web (-want +got):\n%s", d)
	}
	b = ask(protocol.FileDir, "salt://web/", "")
	paths = nil
	for _, f := range b.Files {
		if f.Manifest == nil {
			t.Errorf("dir: %s without a manifest", f.Path)
		}
		paths = append(paths, f.Path)
	}
	if d := cmp.Diff([]string{"web/app.conf", "web/big.bin", "web/sub/x"}, paths); d != "" {
		t.Errorf("dir web files (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"web/empty"}, b.Dirs); d != "" {
		t.Errorf("dir web empty dirs (-want +got):\n%s", d)
	}
	if b = ask(protocol.FileDir, "salt://nodir", ""); !b.Missing {
		t.Errorf("dir salt://nodir = %+v, want Missing", b)
	}
}

// TestCPThroughAgent: the agent's cp.* functions against the master's
// file server, end to end in one process (real QUIC on loopback): files
// fetched by chunk and verified, a template rendered for the device with
// its grains and the call's variables, listings in Salt's shapes.
func TestCPThroughAgent(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat("halite ", 100_000) // 700,000 bytes
	writeFiles(t, root, map[string]string{
		"files/big.txt":   big,
		"files/d/a.txt":   "a",
		"tmpl/motd.j2":    "site={{ grains['site'] }} port={{ port }}\n",
		"tmpl/broken.j2":  "{{ nope(",
		"states/web.sls":  "x: {}\n",
		"states/init.sls": "y: {}\n",
	})
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.FileRoots = map[string][]string{"base": {root}}
	}, nil)
	tm.startAgent(t, "cam1", map[string]any{"site": "harbour"})
	tm.waitConnected(t, "cam1")
	out := t.TempDir()
	call := func(fun string, args ...any) any {
		t.Helper()
		res := tm.publish(t, &api.Request{Tgt: "cam1", Fun: fun, Arg: args})
		_, rets, _ := returnsOf(t, res)
		r, ok := rets["cam1"]
		if !ok {
			t.Fatalf("%s: no return from cam1", fun)
		}
		return r["return"]
	}
	// Grains reach the master before cp.get_template needs them.
	waitFor(t, "cam1's grains on the master", func() bool { return tm.minions.grainsOf("cam1")["site"] == "harbour" })

	dest := filepath.Join(out, "big.txt")
	if got := call("cp.get_file", "salt://files/big.txt", dest); got != dest {
		t.Fatalf("cp.get_file = %v, want %s", got, dest)
	}
	if b, err := os.ReadFile(dest); err != nil || string(b) != big {
		t.Fatalf("fetched file differs (err %v)", err)
	}
	if got := call("cp.get_file", "salt://files/missing", dest); got != "" {
		t.Errorf("cp.get_file of a missing file = %v, want \"\"", got)
	}
	if got := call("cp.get_file", "salt://files/d/a.txt", filepath.Join(out, "no", "dir", "a")); got != false {
		t.Errorf("cp.get_file into a missing folder = %v, want False", got)
	}
	sum := sha256.Sum256([]byte(big))
	if got, want := call("cp.hash_file", "salt://files/big.txt"), map[string]any{"hash_type": "sha256", "hsum": hex.EncodeToString(sum[:])}; !cmp.Equal(got, want) {
		t.Errorf("cp.hash_file = %v, want %v", got, want)
	}
	if got := call("cp.list_master"); !cmp.Equal(got, []any{"files/big.txt", "files/d/a.txt", "states/init.sls", "states/web.sls", "tmpl/broken.j2", "tmpl/motd.j2"}) {
		t.Errorf("cp.list_master = %v", got)
	}
	if got := call("cp.list_master_dirs", "base", "files"); !cmp.Equal(got, []any{"files", "files/d"}) {
		t.Errorf("cp.list_master_dirs = %v", got)
	}
	if got := call("cp.list_states"); !cmp.Equal(got, []any{"states", "states.web"}) {
		t.Errorf("cp.list_states = %v", got)
	}
	tdest := filepath.Join(out, "motd")
	res := tm.publish(t, &api.Request{Tgt: "cam1", Fun: "cp.get_template", Arg: []any{"salt://tmpl/motd.j2", tdest}, Kwarg: map[string]any{"port": int64(8080)}})
	_, rets, _ := returnsOf(t, res)
	if got := rets["cam1"]["return"]; got != tdest {
		t.Fatalf("cp.get_template = %v, want %s", got, tdest)
	}
	if b, _ := os.ReadFile(tdest); string(b) != "site=harbour port=8080\n" {
		t.Errorf("rendered template = %q", b)
	}
	if got := call("cp.get_template", "salt://tmpl/broken.j2", filepath.Join(out, "broken")); got != "" {
		t.Errorf("cp.get_template of a broken template = %v, want \"\"", got)
	}
	got := call("cp.get_dir", "salt://files/d", out)
	if want := []any{filepath.Join(out, "d", "a.txt")}; !cmp.Equal(got, want) {
		t.Errorf("cp.get_dir = %v, want %v", got, want)
	}
	cached, ok := call("cp.cache_file", "salt://files/d/a.txt").(string)
	if !ok || !strings.HasSuffix(cached, filepath.Join("files", "base", "files", "d", "a.txt")) {
		t.Errorf("cp.cache_file = %v", cached)
	}
	if got := call("cp.is_cached", "salt://files/d/a.txt"); got != cached {
		t.Errorf("cp.is_cached = %v, want %v", got, cached)
	}
	if got := call("cp.cache_file", "salt://../etc/passwd"); !strings.Contains(toStr(got), "refused") {
		t.Errorf("cp.cache_file salt://../etc/passwd = %v, want refused", got)
	}
}

func toStr(v any) string {
	s, _ := v.(string)
	return s
}
