package keys

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newKey(t *testing.T) ed25519.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

type fixture struct {
	t       *testing.T
	dir     string
	s       *Store
	opts    Options
	mu      sync.Mutex
	changes []Change
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: filepath.Join(t.TempDir(), "pki"), opts: opts}
	f.reopen()
	return f
}

func (f *fixture) reopen() {
	f.t.Helper()
	opts := f.opts
	opts.Log = zaptest.NewLogger(f.t)
	opts.OnChange = func(c Change) {
		f.mu.Lock()
		f.changes = append(f.changes, c)
		f.mu.Unlock()
	}
	s, err := Open(f.dir, opts)
	if err != nil {
		f.t.Fatalf("Open: %v", err)
	}
	f.s = s
}

func (f *fixture) takeChanges() []Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.changes
	f.changes = nil
	return c
}

func (f *fixture) check(id string, pub ed25519.PublicKey, want Decision) {
	f.t.Helper()
	f.checkVia(id, pub, "", want)
}

// checkVia is check for a Hello that came through relay via.
func (f *fixture) checkVia(id string, pub ed25519.PublicKey, via string, want Decision) {
	f.t.Helper()
	got, err := f.s.Check(id, pub, via)
	if err != nil {
		f.t.Fatalf("Check(%s): %v", id, err)
	}
	if got != want {
		f.t.Fatalf("Check(%s): got %+v, want %+v", id, got, want)
	}
	f.consistent()
}

// onDisk reads the fingerprints of the key files under dir, by directory.
func onDisk(t *testing.T, dir string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, d := range stateDirs {
		ents, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(dir, d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			fp := ""
			if pub, err := protocol.ParsePublicKey(b); err == nil {
				fp = protocol.Fingerprint(pub)
			}
			if out[d] == nil {
				out[d] = map[string]string{}
			}
			out[d][e.Name()] = fp
		}
	}
	return out
}

// consistent checks that memory and disk agree, and that a store opened
// afresh on the same directory agrees too.
func (f *fixture) consistent() {
	f.t.Helper()
	mem, err := f.s.Finger("*")
	if err != nil {
		f.t.Fatal(err)
	}
	if d := cmp.Diff(onDisk(f.t, f.dir), mem); d != "" {
		f.t.Fatalf("memory and disk differ: (-disk +memory)\n%s", d)
	}
	s2, err := Open(f.dir, Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	mem2, _ := s2.Finger("*")
	if d := cmp.Diff(mem, mem2); d != "" {
		f.t.Fatalf("store reopened differs: (-before +after)\n%s", d)
	}
	via := f.s.PendingVia()
	if d := cmp.Diff(viaOnDisk(f.t, f.dir), via); d != "" {
		f.t.Fatalf("relays of pending keys: memory and disk differ: (-disk +memory)\n%s", d)
	}
	if d := cmp.Diff(via, s2.PendingVia()); d != "" {
		f.t.Fatalf("relays of pending keys: store reopened differs: (-before +after)\n%s", d)
	}
}

// viaOnDisk reads pki_dir/minions_pre_via: id -> relay.
func viaOnDisk(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, DirPendingVia))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, DirPendingVia, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = strings.TrimSuffix(string(b), "\n")
	}
	return out
}

func (f *fixture) fingers() map[string]map[string]string {
	f.t.Helper()
	m, err := f.s.Finger("*")
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

var (
	accepted_ = Decision{Status: protocol.KeyAccepted, Act: ActAccept}
	pending_  = Decision{Status: protocol.KeyPending, Act: ActPend}
	rejected_ = Decision{Status: protocol.KeyRejected, Act: ActReject}
	// An id already rejected: Salt's salt/auth is {result: False, id,
	// pub}, without act (_auth in salt/channel/server.py, Salt 3006).
	stillRejected_ = Decision{Status: protocol.KeyRejected}
	denied_        = Decision{Status: protocol.KeyDenied, Act: ActDenied}
)

func changed(d Decision) Decision { d.Changed = true; return d }

func TestCheckPendingAcceptDeny(t *testing.T) {
	f := newFixture(t, Options{})
	k1, k2, k3 := newKey(t), newKey(t), newKey(t)

	f.check("web1", k1, changed(pending_)) // new -> minions_pre
	f.check("web1", k1, pending_)          // same key: still pending, nothing written
	if _, ok := f.s.AcceptedKey("web1"); ok {
		t.Fatalf("AcceptedKey of a pending id: got true, want false")
	}

	// Pending, another key: denied, the new key in minions_denied, the
	// pending key kept (Salt).
	f.check("web1", k2, changed(denied_))
	f.check("web1", k2, denied_) // the same denied key again: nothing new to write
	want := map[string]map[string]string{
		DirPending: {"web1": protocol.Fingerprint(k1)},
		DirDenied:  {"web1": protocol.Fingerprint(k2)},
	}
	if d := cmp.Diff(want, f.fingers()); d != "" {
		t.Fatalf("after a pending id presented another key: (-want +got)\n%s", d)
	}
	f.check("web1", k1, pending_) // the right key is still pending

	got, err := f.s.Accept("web1", false, false)
	if err != nil || !cmp.Equal(got, []string{"web1"}) {
		t.Fatalf("Accept: got %v, %v, want [web1]", got, err)
	}
	f.consistent()
	if pub, ok := f.s.AcceptedKey("web1"); !ok || !pub.Equal(k1) {
		t.Fatalf("AcceptedKey after accept: got %x, %v, want k1", pub, ok)
	}
	f.check("web1", k1, accepted_)

	// Accepted, another key: denied, the accepted key kept.
	f.check("web1", k3, changed(denied_))
	f.check("web1", k1, accepted_)
	want = map[string]map[string]string{
		DirAccepted: {"web1": protocol.Fingerprint(k1)},
		DirDenied:   {"web1": protocol.Fingerprint(k3)},
	}
	if d := cmp.Diff(want, f.fingers()); d != "" {
		t.Fatalf("after an accepted id presented another key: (-want +got)\n%s", d)
	}
	if pub, _ := f.s.AcceptedKey("web1"); !pub.Equal(k1) {
		t.Fatalf("AcceptedKey after a denied attempt: got another key, want k1")
	}
}

func TestCheckRejected(t *testing.T) {
	f := newFixture(t, Options{AutoAccept: true})
	k1, k2 := newKey(t), newKey(t)
	f.check("cam1", k1, changed(accepted_)) // auto_accept
	if _, err := f.s.Reject("cam1", true, false); err != nil {
		t.Fatal(err)
	}
	// Rejected wins over everything, auto_accept included, whatever the key.
	f.check("cam1", k1, stillRejected_)
	f.check("cam1", k2, stillRejected_)
	if _, ok := f.s.AcceptedKey("cam1"); ok {
		t.Errorf("AcceptedKey of a rejected id: got true, want false")
	}
}

func TestCheckDeniedOnlyIsNew(t *testing.T) {
	// Salt does not look in minions_denied: an id whose only key is denied
	// (its accepted key was deleted) enrols anew.
	f := newFixture(t, Options{})
	k1, k2 := newKey(t), newKey(t)
	f.check("x", k1, changed(pending_))
	f.check("x", k2, changed(denied_))
	if _, err := f.s.Delete("x"); err != nil {
		t.Fatal(err)
	}
	f.check("x", k2, changed(pending_))
	f.check("x", k1, changed(denied_))
}

// writeTree writes files (path under dir → content), making directories.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, content, 0o644)
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestAutoSignReject(t *testing.T) {
	dir := t.TempDir()
	sign := filepath.Join(dir, "autosign.conf")
	reject := filepath.Join(dir, "autoreject.conf")
	writeFile(t, sign, "# cameras\ncam-*\n\n  exact.example.com  \nsensor[0-9]+\n#gw*\n", 0o644)
	writeFile(t, reject, "cam-bad*\n", 0o600)

	for _, tc := range []struct {
		id   string
		want Decision
	}{
		{"cam-1", changed(accepted_)},             // glob
		{"exact.example.com", changed(accepted_)}, // exact, spaces trimmed
		{"sensor42", changed(accepted_)},          // regular expression, whole id
		{"sensor42x", changed(pending_)},          // ... anchored at the end
		{"xsensor42", changed(pending_)},          // ... and at the start
		{"gw1", changed(pending_)},                // commented out
		{"cam-bad1", changed(rejected_)},          // autoreject wins over autosign
		{"web1", changed(pending_)},
	} {
		t.Run(tc.id, func(t *testing.T) {
			f := newFixture(t, Options{AutosignFile: sign, AutorejectFile: reject})
			f.check(tc.id, newKey(t), tc.want)
		})
	}

	t.Run("auto_accept", func(t *testing.T) {
		f := newFixture(t, Options{AutoAccept: true, AutorejectFile: reject})
		f.check("anything", newKey(t), changed(accepted_))
		f.check("cam-bad2", newKey(t), changed(rejected_))
	})

	t.Run("pending then autosign", func(t *testing.T) {
		s := filepath.Join(t.TempDir(), "autosign")
		f := newFixture(t, Options{AutosignFile: s}) // the file does not exist yet
		k, other := newKey(t), newKey(t)
		f.check("gw1", k, changed(pending_))
		writeFile(t, s, "gw*\n", 0o644)
		// Another key for a pending id is denied even when autosign matches;
		// Salt's salt/auth then has no act (the auto-sign branch of _auth in
		// salt/channel/server.py).
		f.check("gw1", other, changed(Decision{Status: protocol.KeyDenied}))
		f.check("gw1", k, changed(accepted_)) // moved from pending
		if d := cmp.Diff(map[string]map[string]string{
			DirAccepted: {"gw1": protocol.Fingerprint(k)},
			DirDenied:   {"gw1": protocol.Fingerprint(other)},
		}, f.fingers()); d != "" {
			t.Errorf("keys: (-want +got)\n%s", d)
		}
	})

	t.Run("pending then autoreject", func(t *testing.T) {
		r := filepath.Join(t.TempDir(), "autoreject")
		f := newFixture(t, Options{AutorejectFile: r})
		k := newKey(t)
		f.check("gw1", k, changed(pending_))
		writeFile(t, r, "gw1\n", 0o644)
		// Whatever the key, the pending key moves to rejected.
		f.check("gw1", newKey(t), changed(rejected_))
		if d := cmp.Diff(map[string]map[string]string{
			DirRejected: {"gw1": protocol.Fingerprint(k)},
		}, f.fingers()); d != "" {
			t.Errorf("keys: (-want +got)\n%s", d)
		}
	})

	t.Run("writable by others is ignored", func(t *testing.T) {
		s := filepath.Join(t.TempDir(), "autosign")
		writeFile(t, s, "*\n", 0o666)
		f := newFixture(t, Options{AutosignFile: s})
		f.check("a", newKey(t), changed(pending_))
		writeFile(t, s, "*\n", 0o664)
		f.check("b", newKey(t), changed(pending_))
		writeFile(t, s, "*\n", 0o640)
		f.check("c", newKey(t), changed(accepted_))
	})

	t.Run("reloaded on change", func(t *testing.T) {
		s := filepath.Join(t.TempDir(), "autosign")
		writeFile(t, s, "a\n", 0o600)
		f := newFixture(t, Options{AutosignFile: s})
		f.check("a", newKey(t), changed(accepted_))
		writeFile(t, s, "bb\n", 0o600) // another size, so seen even within one mtime tick
		f.check("bb", newKey(t), changed(accepted_))
		f.check("a2", newKey(t), changed(pending_))
	})
}

func TestOperations(t *testing.T) {
	f := newFixture(t, Options{})
	keys := map[string]ed25519.PublicKey{}
	for _, id := range []string{"web1", "web2", "db1", "Cam1", "cam2"} {
		keys[id] = newKey(t)
		f.check(id, keys[id], changed(pending_))
	}
	list := func() map[string][]string {
		t.Helper()
		l, err := f.s.List()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	want := map[string][]string{
		DirAccepted: {}, DirPending: {"Cam1", "cam2", "db1", "web1", "web2"},
		DirRejected: {}, DirDenied: {},
	}
	if d := cmp.Diff(want, list()); d != "" {
		t.Fatalf("List: (-want +got)\n%s", d)
	}

	steps := []struct {
		name    string
		op      func() ([]string, error)
		want    []string
		changes []Change
	}{
		{"accept glob list", func() ([]string, error) { return f.s.Accept("web*,db1", false, false) },
			[]string{"db1", "web1", "web2"},
			[]Change{{"db1", ActAccept, "pending", "accepted", false}, {"web1", ActAccept, "pending", "accepted", false}, {"web2", ActAccept, "pending", "accepted", false}}},
		{"accept matches nothing", func() ([]string, error) { return f.s.Accept("nope*", true, true) }, []string{}, nil},
		{"reject pending only", func() ([]string, error) { return f.s.Reject("*1", false, false) },
			[]string{"Cam1"}, []Change{{"Cam1", ActReject, "pending", "rejected", false}}},
		{"reject accepted too", func() ([]string, error) { return f.s.Reject("web1", true, false) },
			[]string{"web1"}, []Change{{"web1", ActReject, "accepted", "rejected", false}}},
		{"accept without rejected", func() ([]string, error) { return f.s.Accept("*", false, false) },
			[]string{"cam2"}, []Change{{"cam2", ActAccept, "pending", "accepted", false}}},
		{"accept with rejected", func() ([]string, error) { return f.s.Accept("*", true, false) },
			[]string{"Cam1", "web1"}, []Change{{"Cam1", ActAccept, "rejected", "accepted", false}, {"web1", ActAccept, "rejected", "accepted", false}}},
		{"delete", func() ([]string, error) { return f.s.Delete("c?m*") },
			[]string{"cam2"}, []Change{{"cam2", ActDelete, "accepted", "", false}}},
	}
	for _, st := range steps {
		got, err := st.op()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if d := cmp.Diff(st.want, got); d != "" {
			t.Fatalf("%s: ids (-want +got)\n%s", st.name, d)
		}
		if d := cmp.Diff(st.changes, f.takeChanges()); d != "" {
			t.Fatalf("%s: changes (-want +got)\n%s", st.name, d)
		}
		f.consistent()
	}
	want = map[string][]string{
		DirAccepted: {"Cam1", "db1", "web1", "web2"}, DirPending: {}, DirRejected: {}, DirDenied: {},
	}
	if d := cmp.Diff(want, list()); d != "" {
		t.Fatalf("List at the end: (-want +got)\n%s", d)
	}
	if _, ok := f.s.AcceptedKey("cam2"); ok {
		t.Errorf("AcceptedKey of a deleted id: got true, want false")
	}
	fp, err := f.s.Finger("web1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]map[string]string{DirAccepted: {"web1": protocol.Fingerprint(keys["web1"])}}, fp); d != "" {
		t.Errorf("Finger(web1): (-want +got)\n%s", d)
	}
	if fp, _ := f.s.Finger("nope"); fp == nil || len(fp) != 0 {
		t.Errorf("Finger(nope): got %v, want an empty map", fp)
	}
	for _, bad := range []string{"", " ", ",", " , "} {
		if _, err := f.s.Accept(bad, true, true); err == nil {
			t.Errorf("Accept(%q): got nil error, want one", bad)
		}
	}
}

func TestIncludeDenied(t *testing.T) {
	f := newFixture(t, Options{AutoAccept: true})
	old, renewed := newKey(t), newKey(t)
	f.check("dev", old, changed(accepted_))
	f.check("dev", renewed, changed(denied_)) // the device was re-flashed
	if got, _ := f.s.Accept("dev", false, false); len(got) != 0 {
		t.Fatalf("Accept without include denied: got %v, want none", got)
	}
	// salt-key -a dev --include-denied: the denied key replaces the accepted one.
	got, err := f.s.Accept("dev", false, true)
	if err != nil || !cmp.Equal(got, []string{"dev"}) {
		t.Fatalf("Accept with include denied: got %v, %v, want [dev]", got, err)
	}
	if pub, _ := f.s.AcceptedKey("dev"); !pub.Equal(renewed) {
		t.Fatalf("AcceptedKey: got the old key, want the renewed one")
	}
	f.check("dev", old, changed(denied_))
	got, err = f.s.Reject("dev", false, true)
	if err != nil || !cmp.Equal(got, []string{"dev"}) {
		t.Fatalf("Reject with include denied: got %v, %v, want [dev]", got, err)
	}
	if d := cmp.Diff(map[string]map[string]string{
		DirAccepted: {"dev": protocol.Fingerprint(renewed)},
		DirRejected: {"dev": protocol.Fingerprint(old)},
	}, f.fingers()); d != "" {
		t.Errorf("keys: (-want +got)\n%s", d)
	}
	f.check("dev", renewed, stillRejected_) // rejected wins, as in Salt
}

func TestBadIDsAndKeys(t *testing.T) {
	f := newFixture(t, Options{AutoAccept: true})
	for _, id := range []string{"", ".", "..", "../etc/passwd", "a/b", `a\b`, "a\x00b", "a\nb", strings.Repeat("x", protocol.MaxIDLen+1),
		"cam9,evil", "cam*", "-L", "a b", "G@os:x"} {
		if d, err := f.s.Check(id, newKey(t), ""); err == nil {
			t.Errorf("Check(%q): got %+v, nil error, want an error", id, d)
		}
	}
	for _, pub := range []ed25519.PublicKey{nil, make([]byte, 31), make([]byte, 33)} {
		if _, err := f.s.Check("ok", pub, ""); err == nil {
			t.Errorf("Check with a %d-byte key: got nil error, want one", len(pub))
		}
	}
	if d := cmp.Diff(map[string]map[string]string{}, f.fingers()); d != "" {
		t.Errorf("keys after bad checks: (-want +got)\n%s", d)
	}
}

func TestLoadFromDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	k1, k2 := newKey(t), newKey(t)
	for _, d := range stateDirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"minions/web1":               string(protocol.EncodePublicKey(k1)),
		"minions/corrupt":            "not a key",
		"minions_rejected/bad":       "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----\n",
		"minions_pre/.hidden":        string(protocol.EncodePublicKey(k2)),
		"minions_pre/.tmp-123":       "half written",
		"minions_pre/web2":           string(protocol.EncodePublicKey(k2)),
		"minions_denied/" + "a\x01b": string(protocol.EncodePublicKey(k2)), // an id we refuse
		// Ids valid before ValidID refused Salt's match characters.
		"minions_pre/cam9,evil":   string(protocol.EncodePublicKey(k2)),
		"minions_pre/web*":        string(protocol.EncodePublicKey(k2)),
		"minions/-L":              string(protocol.EncodePublicKey(k1)),
		"minions_rejected/web 2":  string(protocol.EncodePublicKey(k1)),
		"minions_pre/subdir/web3": string(protocol.EncodePublicKey(k2)),
	}
	writeTree(t, dir, files)
	s, err := Open(dir, Options{Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.List()
	want := map[string][]string{
		DirAccepted: {"corrupt", "web1"}, DirPending: {"web2"}, DirRejected: {"bad"}, DirDenied: {},
	}
	if d := cmp.Diff(want, l); d != "" {
		t.Errorf("List: (-want +got)\n%s", d)
	}
	wantInvalid := map[string][]string{
		DirAccepted: {"-L"}, DirPending: {"cam9,evil", "web*"}, DirRejected: {"web 2"}, DirDenied: {"a\x01b"},
	}
	if d := cmp.Diff(wantInvalid, s.Invalid()); d != "" {
		t.Errorf("Invalid: (-want +got)\n%s", d)
	}
	// Refused: no Hello, no match and no exact name acts on them, and their
	// files stay for the operator.
	if _, err := s.Check("cam9,evil", k2, ""); protocol.KindOf(err) != protocol.KindMalformed {
		t.Errorf("Check(cam9,evil): got %v, want a malformed id error", err)
	}
	if _, ok := s.AcceptedKey("-L"); ok {
		t.Errorf("AcceptedKey(-L): got true, want false")
	}
	if got, err := s.Accept("*", false, false); err != nil || !cmp.Equal(got, []string{"web2"}) {
		t.Errorf("Accept(*): got %v, %v, want [web2]", got, err)
	}
	if got, err := s.DeleteDict(EveryState("cam9,evil", "-L", "web*")); err != nil || len(got) != 0 {
		t.Errorf("DeleteDict of invalid ids: got %v, %v, want none", got, err)
	}
	for _, f := range []string{"minions_pre/cam9,evil", "minions_pre/web*", "minions/-L", "minions_rejected/web 2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("invalid key file %s: got %v, want it left in place", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "minions_pre/.tmp-123")); !os.IsNotExist(err) {
		t.Errorf("stale temporary file: got %v, want it removed", err)
	}
	for _, d := range stateDirs {
		fi, err := os.Stat(filepath.Join(dir, d))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("mode of %s: got %v, %v, want 0700", d, fi.Mode().Perm(), err)
		}
	}
	// A key file that does not parse keeps its id's state and accepts no key.
	if _, ok := s.AcceptedKey("corrupt"); ok {
		t.Errorf("AcceptedKey(corrupt): got true, want false")
	}
	for _, tc := range []struct {
		id   string
		want Decision
	}{
		{"corrupt", changed(denied_)},
		{"bad", stillRejected_},
		{"web1", accepted_},
	} {
		pub := newKey(t)
		if tc.id == "web1" {
			pub = k1
		}
		if got, err := s.Check(tc.id, pub, ""); err != nil || got != tc.want {
			t.Errorf("Check(%s): got %+v, %v, want %+v", tc.id, got, err, tc.want)
		}
	}
	if fp, _ := s.Finger("corrupt"); fp[DirAccepted]["corrupt"] != "" {
		t.Errorf("Finger of a corrupt key: got %q, want empty", fp[DirAccepted]["corrupt"])
	}
}

func TestFileModes(t *testing.T) {
	f := newFixture(t, Options{})
	f.check("web1", newKey(t), changed(pending_))
	if _, err := f.s.Accept("*", false, false); err != nil {
		t.Fatal(err)
	}
	f.check("web1", newKey(t), changed(denied_))
	for _, p := range []string{"minions/web1", "minions_denied/web1"} {
		fi, err := os.Stat(filepath.Join(f.dir, p))
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("mode of %s: got %v, %v, want 0644", p, fi.Mode().Perm(), err)
		}
	}
	for _, d := range stateDirs {
		ents, _ := os.ReadDir(filepath.Join(f.dir, d))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("left in %s: %s", d, e.Name())
			}
		}
	}
}

func TestConcurrent(t *testing.T) {
	f := newFixture(t, Options{})
	const agents = 50
	pubs := make([]ed25519.PublicKey, agents)
	for i := range pubs {
		pubs[i] = newKey(t)
	}
	var wg sync.WaitGroup
	errs := make(chan error, agents*20)
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("agent%02d", i)
			for range 10 {
				if _, err := f.s.Check(id, pubs[i], ""); err != nil {
					errs <- err
				}
				f.s.AcceptedKey(id)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 10 {
			if _, err := f.s.Accept("*", false, false); err != nil {
				errs <- err
			}
			if _, err := f.s.List(); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := f.s.Accept("*", false, false); err != nil {
		t.Fatal(err)
	}
	for i := range agents {
		id := fmt.Sprintf("agent%02d", i)
		if pub, ok := f.s.AcceptedKey(id); !ok || !pub.Equal(pubs[i]) {
			t.Errorf("AcceptedKey(%s): got %v, want its key", id, ok)
		}
	}
	f.consistent()
}

func TestPendingVia(t *testing.T) {
	f := newFixture(t, Options{})
	k1, k2, k3, k4, k5 := newKey(t), newKey(t), newKey(t), newKey(t), newKey(t)
	wantVia := func(what string, want map[string]string) {
		t.Helper()
		if d := cmp.Diff(want, f.s.PendingVia()); d != "" {
			t.Fatalf("PendingVia %s: (-want +got)\n%s", what, d)
		}
	}
	f.checkVia("d1", k1, "r1", changed(pending_))
	f.check("direct", k2, changed(pending_))
	wantVia("after d1 came through r1", map[string]string{"d1": "r1"})
	f.checkVia("d1", k1, "r2", pending_) // the device moved to another relay
	wantVia("after d1 moved to r2", map[string]string{"d1": "r2"})
	f.check("d1", k1, pending_) // and then came directly
	wantVia("after d1 came directly", map[string]string{})
	f.checkVia("d1", k1, "r1", pending_)
	f.checkVia("d3", k3, "r1", changed(pending_))
	f.checkVia("d4", k4, "r2", changed(pending_))
	// Another key for d1, through another relay: denied; the pending key
	// keeps its relay.
	f.checkVia("d1", k5, "r2", changed(denied_))
	wantVia("after a denied attempt", map[string]string{"d1": "r1", "d3": "r1", "d4": "r2"})

	f.reopen()
	wantVia("after reopening", map[string]string{"d1": "r1", "d3": "r1", "d4": "r2"})

	if got, err := f.s.Accept("d1", false, false); err != nil || !cmp.Equal(got, []string{"d1"}) {
		t.Fatalf("Accept d1: got %v, %v", got, err)
	}
	f.consistent()
	f.checkVia("d1", k1, "r1", accepted_)
	if got, err := f.s.Reject("d3", false, false); err != nil || !cmp.Equal(got, []string{"d3"}) {
		t.Fatalf("Reject d3: got %v, %v", got, err)
	}
	f.consistent()
	if got, err := f.s.Delete("d4"); err != nil || !cmp.Equal(got, []string{"d4"}) {
		t.Fatalf("Delete d4: got %v, %v", got, err)
	}
	f.consistent()
	wantVia("after accept, reject and delete", map[string]string{})

	// Deleted, it comes back through a relay: pending again, with it.
	f.checkVia("d4", k4, "r1", changed(pending_))
	wantVia("after d4 came back", map[string]string{"d4": "r1"})
}

func TestPendingViaAutoSign(t *testing.T) {
	f := newFixture(t, Options{AutoAccept: true})
	f.checkVia("d1", newKey(t), "r1", changed(accepted_))
	if got := f.s.PendingVia(); len(got) != 0 {
		t.Errorf("PendingVia with auto_accept: got %v, want none", got)
	}
}

func TestPendingViaStaleFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	k1 := newKey(t)
	files := map[string]string{
		"minions_pre/d1":            string(protocol.EncodePublicKey(k1)),
		"minions/acc":               string(protocol.EncodePublicKey(k1)),
		DirPendingVia + "/d1":       "r1\n",
		DirPendingVia + "/acc":      "r1\n", // the key moved on; the file stayed (a crash)
		DirPendingVia + "/gone":     "r1\n",
		DirPendingVia + "/.tmp-123": "r",
	}
	writeTree(t, dir, files)
	s, err := Open(dir, Options{Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"d1": "r1"}, s.PendingVia()); d != "" {
		t.Errorf("PendingVia: (-want +got)\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"d1": "r1"}, viaOnDisk(t, dir)); d != "" {
		t.Errorf("stale relay files: (-want +got on disk)\n%s", d)
	}
}

// TestDict: the Dict operations (Salt's match_dict, salt/key.py Key.accept
// with match_dict) compare ids exactly: a glob character in them matches
// itself only, and an id named under another state is left alone.
func TestDict(t *testing.T) {
	f := newFixture(t, Options{})
	for _, id := range []string{"cam9", "cam90", "evil", "web1"} {
		f.check(id, newKey(t), changed(pending_))
	}
	steps := []struct {
		name    string
		op      func() ([]string, error)
		want    []string
		changes []Change
	}{
		{"accept one id", func() ([]string, error) { return f.s.AcceptDict(Dict{DirPending: {"cam9"}}, false, false) },
			[]string{"cam9"}, []Change{{"cam9", ActAccept, "pending", "accepted", false}}},
		{"accept a glob: no such id", func() ([]string, error) {
			return f.s.AcceptDict(Dict{DirPending: {"cam*", "*", "cam9,evil"}}, true, true)
		},
			[]string{}, nil},
		{"accept an id of another state", func() ([]string, error) { return f.s.AcceptDict(Dict{DirRejected: {"evil"}}, true, true) },
			[]string{}, nil},
		{"reject", func() ([]string, error) { return f.s.RejectDict(Dict{DirPending: {"evil", "evil"}}, false, false) },
			[]string{"evil"}, []Change{{"evil", ActReject, "pending", "rejected", false}}},
		{"delete named in accepted only", func() ([]string, error) { return f.s.DeleteDict(Dict{DirAccepted: {"cam9", "cam90"}}) },
			[]string{"cam9"}, []Change{{"cam9", ActDelete, "accepted", "", false}}},
		{"delete everywhere", func() ([]string, error) { return f.s.DeleteDict(EveryState("cam90")) },
			[]string{"cam90"}, []Change{{"cam90", ActDelete, "pending", "", false}}},
	}
	for _, st := range steps {
		got, err := st.op()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if d := cmp.Diff(st.want, got); d != "" {
			t.Fatalf("%s: ids (-want +got)\n%s", st.name, d)
		}
		if d := cmp.Diff(st.changes, f.takeChanges()); d != "" {
			t.Fatalf("%s: changes (-want +got)\n%s", st.name, d)
		}
		f.consistent()
	}
	l, _ := f.s.List()
	want := map[string][]string{DirAccepted: {}, DirPending: {"web1"}, DirRejected: {"evil"}, DirDenied: {}}
	if d := cmp.Diff(want, l); d != "" {
		t.Errorf("List at the end: (-want +got)\n%s", d)
	}
}

// TestMaxPending: a new key beyond max_pending_keys is refused with
// KindPendingFull and nothing is written; keys that do not go to pending
// (auto-accepted, known ids) are not counted against it.
func TestMaxPending(t *testing.T) {
	f := newFixture(t, Options{MaxPending: 2})
	ka, kc := newKey(t), newKey(t)
	f.check("a", ka, changed(pending_))
	f.check("b", newKey(t), changed(pending_))
	if d, err := f.s.Check("c", kc, ""); protocol.KindOf(err) != protocol.KindPendingFull {
		t.Fatalf("Check(c) over the cap: got %+v, %v, want a %v error", d, err, protocol.KindPendingFull)
	}
	f.check("a", ka, pending_) // a known pending id is served as before
	if f.s.Known("c") {
		t.Errorf("Known(c) after a refusal: got true, want false")
	}
	if got := onDisk(t, f.dir)[DirPending]; len(got) != 2 {
		t.Errorf("pending files: got %v, want a and b only", got)
	}
	if _, err := f.s.Accept("a", false, false); err != nil {
		t.Fatal(err)
	}
	f.check("c", kc, changed(pending_))
	f.consistent()

	auto := newFixture(t, Options{MaxPending: 1, AutoAccept: true})
	auto.check("x", newKey(t), changed(accepted_))
	auto.check("y", newKey(t), changed(accepted_))
}
