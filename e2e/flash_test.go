package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The flashing tests run real SSH servers (Debian's dropbear, what cameras
// run, and OpenSSH; tools/ci/deps.sh installs both) on loopback, each in
// its own mount namespace (unshare -m, so root is needed) where the
// device's directory is bound on devMount: halite-flash --install-root
// devMount then installs into that device's directory, and the agent it
// starts through the SysV init script runs there too. Nothing is written
// outside the tests' temporary directories but the empty devMount.
const devMount = "/tmp/halite-flash-device"

var flashBin struct {
	once sync.Once
	path string
	err  error
}

// haliteFlash builds cmd/halite-flash once.
func haliteFlash(t *testing.T) string {
	t.Helper()
	flashBin.once.Do(func() {
		flashBin.path = filepath.Join(binDir, "halite-flash")
		out, err := exec.Command("go", "build", "-o", flashBin.path, "../cmd/halite-flash").CombinedOutput()
		if err != nil {
			flashBin.err = fmt.Errorf("build halite-flash: %v\n%s", err, out)
		}
	})
	if flashBin.err != nil {
		t.Fatal(flashBin.err)
	}
	return flashBin.path
}

func needFlashDeps(t *testing.T) {
	t.Helper()
	needSSHServers(t, "dropbear", "openssh")
}

// needSSHServers is needFlashDeps for a test that starts only the SSH
// servers of the kinds given (dropbear, openssh).
func needSSHServers(t *testing.T, kinds ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts SSH servers and agents")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the flashing tests start SSH servers in mount namespaces: run them as root")
	}
	need := []string{"/usr/bin/ssh-keygen", "/usr/bin/unshare"}
	if slices.Contains(kinds, "dropbear") {
		need = append(need, "/usr/sbin/dropbear", "/usr/bin/dropbearkey")
	}
	if slices.Contains(kinds, "openssh") {
		need = append(need, "/usr/sbin/sshd")
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run tools/ci/deps.sh (make test does)", p)
		}
	}
	if err := os.MkdirAll(devMount, 0o755); err != nil {
		t.Fatal(err)
	}
}

// sshDevice is one SSH server standing for a device.
type sshDevice struct {
	kind    string // dropbear or openssh
	addr    string // 127.0.0.1:PORT
	dir     string // the device's files (its / for the flasher)
	hostPub string // "ssh-ed25519 AAAA..."
	cmd     *exec.Cmd
	log     *bytes.Buffer
	mu      *sync.Mutex
}

// clientKey makes the operator's SSH key pair: the private key file and
// the authorized_keys line.
func clientKey(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return key, string(pub)
}

// startDevice starts an SSH server of kind with its own host key and
// authorized (the operator's public key), in a mount namespace where the
// device's directory is on devMount. setup runs in the namespace before
// the server (a small tmpfs, a read-only bind).
func startDevice(t *testing.T, kind, authorized, setup string) *sshDevice {
	t.Helper()
	return startDeviceAt(t, "", fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t)), kind, authorized, setup)
}

// startDeviceAt is startDevice in the network namespace ns ("": the
// test's), the server listening on addr (IPv4:PORT).
func startDeviceAt(t *testing.T, ns, addr, kind, authorized, setup string) *sshDevice {
	t.Helper()
	work := t.TempDir()
	d := &sshDevice{kind: kind, dir: filepath.Join(work, "device"), log: new(bytes.Buffer), mu: new(sync.Mutex)}
	os.MkdirAll(filepath.Join(d.dir, "etc", "init.d"), 0o755)
	d.addr = addr
	host, portS, _ := net.SplitHostPort(addr)
	var port int
	fmt.Sscan(portS, &port)
	auth := filepath.Join(work, "authorized_keys")
	os.WriteFile(auth, []byte(authorized), 0o600)
	var script string
	switch kind {
	case "dropbear":
		hk := filepath.Join(work, "dropbear_ed25519_host_key")
		if out, err := exec.Command("dropbearkey", "-t", "ed25519", "-f", hk).CombinedOutput(); err != nil {
			t.Fatalf("dropbearkey: %v\n%s", err, out)
		}
		out, err := exec.Command("dropbearkey", "-y", "-f", hk).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "ssh-ed25519 ") {
				f := strings.Fields(l)
				d.hostPub = f[0] + " " + f[1]
			}
		}
		// dropbear reads ~root/.ssh/authorized_keys: a tmpfs on /root,
		// in the namespace only, holds the test's.
		script = fmt.Sprintf(`mount -t tmpfs -o mode=0700 tmpfs /root && mkdir -m 700 /root/.ssh && cp %s /root/.ssh/authorized_keys &&
exec /usr/sbin/dropbear -F -E -m -p %s -r %s -P %s`, auth, d.addr, hk, filepath.Join(work, "dropbear.pid"))
	case "openssh":
		hk := filepath.Join(work, "ssh_host_ed25519_key")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hk).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		pub, _ := os.ReadFile(hk + ".pub")
		f := strings.Fields(string(pub))
		d.hostPub = f[0] + " " + f[1]
		conf := filepath.Join(work, "sshd_config")
		os.WriteFile(conf, []byte(fmt.Sprintf(`Port %d
ListenAddress %s
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PermitRootLogin yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
`, port, host, hk, auth, filepath.Join(work, "sshd.pid"))), 0o600)
		// sshd needs its privilege separation directory, /run/sshd.
		script = fmt.Sprintf(`mount -t tmpfs tmpfs /run && mkdir -m 755 /run/sshd && exec /usr/sbin/sshd -D -e -f %s`, conf)
	default:
		t.Fatalf("unknown ssh server %q", kind)
	}
	script = fmt.Sprintf("set -e\nmount --make-rprivate / && mount --bind %s %s\n%s\n%s", d.dir, devMount, setup, script)
	if ns == "" {
		d.cmd = exec.Command("unshare", "-m", "sh", "-c", script)
	} else {
		d.cmd = exec.Command("ip", "netns", "exec", ns, "unshare", "-m", "sh", "-c", script)
	}
	w := lockedWriter{d.mu, d.log}
	d.cmd.Stdout, d.cmd.Stderr = w, w
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// The agent the device's init script started, then the server.
		if b, err := os.ReadFile(filepath.Join(d.dir, "var", "run", "halite-agent.pid")); err == nil {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		d.cmd.Process.Kill()
		<-done
		if t.Failed() {
			d.mu.Lock()
			t.Logf("%s %s log:\n%s", kind, d.addr, d.log.String())
			d.mu.Unlock()
			if b, err := os.ReadFile(filepath.Join(d.dir, "var", "log", "halite", "agent")); err == nil {
				t.Logf("agent log on %s:\n%s", d.addr, b)
			}
		}
	})
	waitFor(t, 10*time.Second, kind+" listening", func() bool {
		select {
		case <-done:
			d.mu.Lock()
			defer d.mu.Unlock()
			t.Fatalf("%s exited:\n%s", kind, d.log.String())
		default:
		}
		if ns != "" {
			return exec.Command("ip", "netns", "exec", ns, "bash", "-c", "exec 3<>/dev/tcp/"+host+"/"+portS).Run() == nil
		}
		c, err := net.Dial("tcp", d.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return d
}

// flashResult is one device's line of halite-flash ssh --out json.
type flashResult struct {
	Host, ID, Arch, Init, Status, Finger, Error, Detail string
	Kind                                                string `json:"error_kind"`
}

// flashSSH runs halite-flash ssh against the cluster's master and returns
// the results by host.
func (c *cluster) flashSSH(env []string, args ...string) (map[string]flashResult, result) {
	c.t.Helper()
	r := c.flashRaw("", env, args...)
	var doc struct{ Results []flashResult }
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		c.t.Fatalf("halite-flash ssh %v: exit %d, output is not JSON: %v\n%s\nstderr: %s", args, r.code, err, r.stdout, r.stderr)
	}
	m := map[string]flashResult{}
	for _, fr := range doc.Results {
		m[fr.Host] = fr
	}
	return m, r
}

// flashRaw runs halite-flash ssh --out json against the cluster's master
// (at 127.0.0.1 in the network namespace ns, "": the test's), in ns.
func (c *cluster) flashRaw(ns string, env []string, args ...string) result {
	c.t.Helper()
	bin := haliteFlash(c.t)
	full := []string{"ssh", "-c", c.masterDir(), "--master", fmt.Sprintf("127.0.0.1:%d", c.port),
		"--install-root", devMount, "--out", "json", "-j", "8"}
	if !slices.Contains(args, "--arch") {
		full = append(full, "--agent-binary", filepath.Join(binDir, "halite-agent"), "--init", "sysv")
	}
	full = append(full, args...)
	cmd := exec.Command(bin, full...)
	if ns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, bin}, full...)...)
	}
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{out.String(), errb.String(), 0}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return r
}

func writeInventory(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "inventory")
	os.WriteFile(p, []byte("# devices\n"+strings.Join(lines, "\n")+"\n"), 0o644)
	return p
}

// keyLists returns halite-key -L --out json.
func (c *cluster) keyLists() map[string][]string {
	c.t.Helper()
	m, _ := c.jsonOut("halite-key", "-L")
	out := map[string][]string{}
	for k, v := range m {
		l, _ := v.([]any)
		for _, id := range l {
			out[k] = append(out[k], fmt.Sprint(id))
		}
		sort.Strings(out[k])
	}
	return out
}

// TestFlashSSH flashes a dropbear device and an OpenSSH device at once:
// host keys are recorded (first sight, --accept-new-hostkeys), the agents
// are installed under the devices' roots with the SysV init script, start,
// and come up accepted: no key was ever pending, and the accepted key is
// the one on the device. A second run skips both (the state file).
func TestFlashSSH(t *testing.T) {
	needFlashDeps(t)
	key, authorized := clientKey(t)
	db := startDevice(t, "dropbear", authorized, "")
	ossh := startDevice(t, "openssh", authorized, "")
	c := newCluster(t, "")
	c.startMaster()
	work := t.TempDir()
	known := filepath.Join(work, "known_hosts")
	state := filepath.Join(work, "state")
	inv := writeInventory(t, db.addr+" id=cam-db", ossh.addr+" id=gw-ossh")

	res, r := c.flashSSH(nil, "--inventory", inv, "--key", key, "--known-hosts", known, "--accept-new-hostkeys", "--state", state)
	if r.code != 0 {
		t.Fatalf("halite-flash ssh: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, d := range []*sshDevice{db, ossh} {
		fr := res[d.addr]
		if fr.Status != "ok" || fr.Arch != "amd64" || fr.Init != "sysv" {
			t.Errorf("%s (%s): got %+v, want ok amd64 sysv", d.addr, d.kind, fr)
		}
	}
	first := res
	c.waitUp("cam-db", "gw-ossh")
	keys := c.keyLists()
	if got := strings.Join(keys["minions"], ","); got != "cam-db,gw-ossh" {
		t.Errorf("accepted keys: got %q, want cam-db,gw-ossh", got)
	}
	if len(keys["minions_pre"]) != 0 || len(keys["minions_denied"]) != 0 {
		t.Errorf("pending or denied keys after flashing: %v", keys)
	}
	// The accepted key is the device's, and the master's key is pinned.
	fingers, _ := c.jsonOut("halite-key", "-f", "*")
	acc, _ := fingers["minions"].(map[string]any)
	for id, d := range map[string]*sshDevice{"cam-db": db, "gw-ossh": ossh} {
		if acc[id] != res[d.addr].Finger || acc[id] == "" {
			t.Errorf("%s: master accepted %v, flasher reported %q", id, acc[id], res[d.addr].Finger)
		}
		conf, err := readFile(filepath.Join(d.dir, "etc", "halite", "agent"))
		if err != nil || !strings.Contains(conf, "master_finger: ") || !strings.Contains(conf, "id: "+id) {
			t.Errorf("%s: config %q (%v): want master_finger and id", id, conf, err)
		}
		if _, err := readFile(filepath.Join(d.dir, "etc", "halite", "pki", "agent", "minion.pem")); err != nil {
			t.Errorf("%s: no key on the device: %v", id, err)
		}
		if l, err := os.Readlink(filepath.Join(d.dir, "usr", "bin", "halite-call")); err != nil || l != "halite-agent" {
			t.Errorf("%s: halite-call on the device: readlink %q, %v; want a symlink to halite-agent", id, l, err)
		}
		if _, err := readFile(filepath.Join(d.dir, "usr", "bin", ".halite-flash", "install.sh")); err == nil {
			t.Errorf("%s: staging directory left behind", id)
		}
	}
	kh, _ := readFile(known)
	if n := strings.Count(kh, "\n"); n != 2 || !strings.Contains(kh, strings.Fields(db.hostPub)[1]) || !strings.Contains(kh, strings.Fields(ossh.hostPub)[1]) {
		t.Errorf("known_hosts after first sight: %d lines, want both host keys:\n%s", n, kh)
	}
	if rets, r := c.jsonOut("halite", "*", "test.ping"); rets["cam-db"] != true || rets["gw-ossh"] != true {
		t.Errorf("test.ping: exit %d, %v", r.code, rets)
	}

	// Resume: both are in the state file, so skipped.
	res, r = c.flashSSH(nil, "--inventory", inv, "--key", key, "--known-hosts", known, "--state", state)
	for _, d := range []*sshDevice{db, ossh} {
		if res[d.addr].Status != "skipped" {
			t.Errorf("second run, %s: got %+v, want skipped", d.addr, res[d.addr])
		}
	}
	if r.code != 0 {
		t.Errorf("second run: exit %d\n%s", r.code, r.stderr)
	}

	// Flashing again without the state file (an upgrade): the running
	// agent is stopped and replaced, the device keeps its key, which the
	// master still accepts, and the agent comes back.
	again, r := c.flashSSH(nil, "--inventory", inv, "--key", key, "--known-hosts", known, "--state", "")
	for _, d := range []*sshDevice{db, ossh} {
		if got := again[d.addr]; got.Status != "ok" || got.Finger != first[d.addr].Finger {
			t.Errorf("re-flash %s: got %+v", d.addr, got)
		}
	}
	if r.code != 0 {
		t.Errorf("re-flash: exit %d\n%s", r.code, r.stderr)
	}
	fingers2, _ := c.jsonOut("halite-key", "-f", "*")
	if fmt.Sprint(fingers2["minions"]) != fmt.Sprint(fingers["minions"]) {
		t.Errorf("re-flash changed the accepted keys: %v, was %v", fingers2["minions"], fingers["minions"])
	}
	waitFor(t, 30*time.Second, "test.ping after the re-flash", func() bool {
		rets, _ := c.jsonOut("halite", "*", "test.ping")
		return rets["cam-db"] == true && rets["gw-ossh"] == true
	})
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

// tree lists every file under dir with its size and mode, to show that a
// run changed nothing.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, _ := d.Info()
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d\n", rel, fi.Mode(), fi.Size())
		return nil
	})
	return b.String()
}

// TestFlashRefusals: each device fails for its own reason, with a message
// that says what to do, and the batch goes on: a changed host key (refused,
// nothing sent), an unknown one without --accept-new-hostkeys, no space (a
// 2 MiB tmpfs under the install directory), a read-only install directory,
// while a good device in the same run is flashed. Then a wrong password.
// A failed device is tried again by the next run; the done one is skipped.
func TestFlashRefusals(t *testing.T) {
	needFlashDeps(t)
	key, authorized := clientKey(t)
	changed := startDevice(t, "dropbear", authorized, "")
	unknown := startDevice(t, "openssh", authorized, "")
	full := startDevice(t, "dropbear", authorized, "mkdir -p "+devMount+"/usr/bin && mount -t tmpfs -o size=2m tmpfs "+devMount+"/usr/bin")
	ro := startDevice(t, "openssh", authorized, "mkdir -p "+devMount+"/usr/bin && mount --bind "+devMount+"/usr/bin "+devMount+"/usr/bin && mount -o remount,bind,ro "+devMount+"/usr/bin")
	good := startDevice(t, "dropbear", authorized, "")
	c := newCluster(t, "")
	c.startMaster()
	work := t.TempDir()
	known := filepath.Join(work, "known_hosts")
	state := filepath.Join(work, "state")
	_, otherKey := clientKey(t) // an ed25519 key that is not changed's host key
	f := strings.Fields(otherKey)
	lines := []string{}
	for _, d := range []*sshDevice{changed, full, ro, good} {
		pub := d.hostPub
		if d == changed {
			pub = f[0] + " " + f[1]
		}
		_, port, _ := net.SplitHostPort(d.addr)
		lines = append(lines, fmt.Sprintf("[127.0.0.1]:%s %s", port, pub))
	}
	os.WriteFile(known, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	before := tree(t, changed.dir)
	inv := writeInventory(t, changed.addr+" id=changed", unknown.addr+" id=unknown", full.addr+" id=full", ro.addr+" id=ro", good.addr+" id=good")

	res, r := c.flashSSH(nil, "--inventory", inv, "--key", key, "--known-hosts", known, "--state", state)
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (some devices failed)", r.code)
	}
	want := []struct {
		d          *sshDevice
		kind, text string
	}{
		{changed, "hostkey-changed", "HOST KEY CHANGED"},
		{unknown, "hostkey-unknown", "--accept-new-hostkeys"},
		{full, "nospace", "no space"},
		{ro, "readonly", "not writable"},
	}
	for _, w := range want {
		got := res[w.d.addr]
		if got.Status != "failed" || got.Kind != w.kind || !strings.Contains(got.Error, w.text) {
			t.Errorf("%s: got %+v, want failed %s with %q", w.d.addr, got, w.kind, w.text)
		}
	}
	if got := res[good.addr]; got.Status != "ok" {
		t.Errorf("the good device in the same batch: %+v", got)
	}
	if after := tree(t, changed.dir); after != before {
		t.Errorf("the device with a changed host key was written to:\nbefore\n%s\nafter\n%s", before, after)
	}
	kh, _ := readFile(known)
	if strings.Contains(kh, strings.Fields(unknown.hostPub)[1]) {
		t.Errorf("an unknown host key was recorded without --accept-new-hostkeys")
	}
	c.waitUp("good")
	keys := c.keyLists()
	if strings.Join(keys["minions"], ",") != "good" {
		t.Errorf("accepted keys: %v, want good only", keys)
	}

	// Resume: good is skipped, the others are tried again.
	res, _ = c.flashSSH(nil, "--inventory", inv, "--key", key, "--known-hosts", known, "--state", state)
	if res[good.addr].Status != "skipped" || res[full.addr].Kind != "nospace" {
		t.Errorf("second run: good %+v, full %+v; want skipped, nospace", res[good.addr], res[full.addr])
	}

	// A wrong password.
	res, _ = c.flashSSH([]string{"HALITE_TEST_PW=not-the-password"}, good.addr, "--password-env", "HALITE_TEST_PW", "--known-hosts", known, "--state", "")
	if got := res[good.addr]; got.Kind != "auth" || !strings.Contains(got.Error, "wrong password") {
		t.Errorf("wrong password: got %+v, want auth: wrong password", got)
	}
}

// TestFlashDryRun: --dry-run connects, probes and says what it would do
// (here with the id read from a file on the device, --id-from file:PATH);
// the device, the master's keys and the known_hosts file are unchanged.
func TestFlashDryRun(t *testing.T) {
	needSSHServers(t, "dropbear")
	key, authorized := clientKey(t)
	d := startDevice(t, "dropbear", authorized, "")
	c := newCluster(t, "")
	c.startMaster()
	known := filepath.Join(t.TempDir(), "known_hosts")
	_, port, _ := net.SplitHostPort(d.addr)
	os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%s %s\n", port, d.hostPub)), 0o600)
	os.WriteFile(filepath.Join(d.dir, "etc", "halite-id"), []byte("cam-from-file\n"), 0o644)
	before, khBefore := tree(t, d.dir), tree(t, filepath.Dir(known))
	keysBefore := c.keyLists()
	res, r := c.flashSSH(nil, d.addr, "--key", key, "--known-hosts", known, "--dry-run", "--id-from", "file:/etc/halite-id")
	got := res[d.addr]
	if r.code != 0 || got.Status != "dry-run" || got.ID != "cam-from-file" || !strings.Contains(got.Detail, "would send amd64 agent") {
		t.Errorf("dry run: exit %d, %+v", r.code, got)
	}
	if after := tree(t, d.dir); after != before {
		t.Errorf("dry run changed the device:\nbefore\n%s\nafter\n%s", before, after)
	}
	if after := tree(t, filepath.Dir(known)); after != khBefore {
		t.Errorf("dry run changed known_hosts or wrote a state file:\n%s", after)
	}
	if fmt.Sprint(c.keyLists()) != fmt.Sprint(keysBefore) {
		t.Errorf("dry run changed the master's keys: %v", c.keyLists())
	}
}

// TestBundlePreseedBusyBox: halite-flash bundle --preseed writes two key
// pairs into the stopped master's key store (accepted: Salt's preseeded
// keys) and a tarball; install.sh, run by BusyBox's sh with only BusyBox's
// applets on PATH, installs the agent, its configuration (master_finger
// pinned) and the SysV init script under a fake root and starts it; the
// agent comes up accepted, without any halite-key step.
func TestBundlePreseedBusyBox(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a master and an agent")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox is not installed: run tools/ci/deps.sh (make test does)")
	}
	c := newCluster(t, "")
	c.startMaster() // makes the master's key
	c.stop(c.master)
	work := t.TempDir()
	tgz := filepath.Join(work, "cams.tar.gz")
	r := runCmd(t, strings.TrimPrefix(haliteFlash(t), binDir+"/"), "bundle", "-c", c.masterDir(), "--arch", "amd64",
		"--master", fmt.Sprintf("127.0.0.1:%d", c.port), "--preseed", "2", "--id-prefix", "cam",
		"--agent-binary", filepath.Join(binDir, "halite-agent"), "--out", tgz)
	if r.code != 0 || !strings.Contains(r.stdout, "2 preseeded keys accepted (cam-001 .. cam-002)") {
		t.Fatalf("bundle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out, err := exec.Command("tar", "-C", work, "-xzf", tgz).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	dir := filepath.Join(work, "cams")
	for _, f := range []string{"install.sh", "agent", "halite-agent", "init/halite-agent.service", "init/halite-agent.init", "init/halite-agent.procd", "keys/cam-001.pem", "keys/cam-002.pub"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("bundle lacks %s: %v", f, err)
		}
	}
	for _, sh := range [][]string{{"sh", "-n"}, {bb, "sh", "-n"}} {
		if out, err := exec.Command(sh[0], append(sh[1:], filepath.Join(dir, "install.sh"))...).CombinedOutput(); err != nil {
			t.Errorf("%v install.sh: %v\n%s", sh, err, out)
		}
	}
	c.startMaster()
	// BusyBox's applets only.
	applets := filepath.Join(work, "bin")
	os.MkdirAll(applets, 0o755)
	if out, err := exec.Command(bb, "--install", "-s", applets).CombinedOutput(); err != nil {
		t.Fatalf("busybox --install: %v\n%s", err, out)
	}
	root := filepath.Join(work, "root")
	os.MkdirAll(filepath.Join(root, "etc", "init.d"), 0o755)
	cmd := exec.Command(bb, "sh", filepath.Join(dir, "install.sh"), "--root", root, "--id", "cam-001")
	cmd.Env = []string{"PATH=" + applets}
	out, err := cmd.CombinedOutput()
	pidFile := filepath.Join(root, "var", "run", "halite-agent.pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			var pid int
			if fmt.Sscan(string(b), &pid); pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if err != nil || !strings.Contains(string(out), "HALITE-INSTALL ok id=cam-001 arch=amd64 init=sysv") {
		t.Fatalf("busybox sh install.sh: %v\n%s", err, out)
	}
	conf, _ := readFile(filepath.Join(root, "etc", "halite", "agent"))
	if !strings.Contains(conf, "master_finger: \"") || !strings.Contains(conf, "id: cam-001") || !strings.Contains(conf, "root_dir: "+root) {
		t.Errorf("installed config:\n%s", conf)
	}
	if l, err := os.Readlink(filepath.Join(root, "etc", "init.d", "S95halite-agent")); err != nil || l != "halite-agent" {
		t.Errorf("boot link: %q %v", l, err)
	}
	// One binary: halite-call is BusyBox ln -sf's link to the agent, and
	// runs the caller from it.
	if l, err := os.Readlink(filepath.Join(root, "usr", "bin", "halite-call")); err != nil || l != "halite-agent" {
		t.Errorf("halite-call: readlink %q, %v; want a symlink to halite-agent", l, err)
	}
	if out, err := exec.Command(filepath.Join(root, "usr", "bin", "halite-call"), "-c", filepath.Join(root, "etc", "halite"),
		"--local", "test.ping", "--out", "json").CombinedOutput(); err != nil || !strings.Contains(string(out), `"local": true`) {
		t.Errorf("the installed halite-call --local test.ping: %v\n%s", err, out)
	}
	c.waitUp("cam-001")
	keys := c.keyLists()
	if strings.Join(keys["minions"], ",") != "cam-001,cam-002" || len(keys["minions_pre"]) != 0 {
		t.Errorf("keys: %v, want cam-001 and cam-002 accepted, none pending", keys)
	}
	if rets, r := c.jsonOut("halite", "cam-001", "test.ping"); rets["cam-001"] != true {
		t.Errorf("test.ping: exit %d, %v", r.code, rets)
	}
	// A bundle with two keys needs --id.
	cmd = exec.Command(bb, "sh", filepath.Join(dir, "install.sh"), "--root", filepath.Join(work, "root2"), "--no-start")
	cmd.Env = []string{"PATH=" + applets}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "give --id, one of: cam-001 cam-002") {
		t.Errorf("install.sh without --id in a two-key bundle: %v\n%s", err, out)
	}
}

// TestFlashThroughput is the figure in docs/BENCHMARKS.md: devices flashed
// per minute against N local dropbear servers (HALITE_FLASH_BENCH=N; skipped
// without it), -j N, each device getting the e2e agent build, installed and
// started with the SysV script, and enrolled with a real master. It reports
// the run's wall time and the time until manage.up lists every device.
//
//	HALITE_FLASH_BENCH=20 go test -count=1 -run TestFlashThroughput -v ./e2e/
func TestFlashThroughput(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("HALITE_FLASH_BENCH"), &n)
	if n <= 0 {
		t.Skip("set HALITE_FLASH_BENCH=N to flash N local dropbear servers")
	}
	needFlashDeps(t)
	key, authorized := clientKey(t)
	c := newCluster(t, "")
	c.startMaster()
	var lines, ids []string
	for i := range n {
		d := startDevice(t, "dropbear", authorized, "")
		id := fmt.Sprintf("bench-%02d", i)
		lines = append(lines, d.addr+" id="+id)
		ids = append(ids, id)
	}
	inv := writeInventory(t, lines...)
	known := filepath.Join(t.TempDir(), "known_hosts")
	fi, _ := os.Stat(filepath.Join(binDir, "halite-agent"))
	start := time.Now()
	res, r := c.flashSSH(nil, "--inventory", inv, "--key", key, "--known-hosts", known, "--accept-new-hostkeys", "--state", "", "-j", fmt.Sprint(n))
	flashed := time.Since(start)
	ok := 0
	for _, fr := range res {
		if fr.Status == "ok" {
			ok++
		}
	}
	if ok != n {
		t.Fatalf("%d of %d flashed: exit %d\n%s", ok, n, r.code, r.stdout)
	}
	c.waitUp(ids...)
	up := time.Since(start)
	t.Logf("flashed %d devices (agent %d bytes each, -j %d) in %v: %.0f devices/minute; all up (accepted, manage.up) after %v",
		n, fi.Size(), n, flashed.Round(time.Millisecond), float64(n)/flashed.Minutes(), up.Round(time.Millisecond))
}

// TestFlashARMv7UnderQEMU: halite-flash takes the linux/arm v7 agent from a
// make-cross style directory (--dist; built as TestARMv7AgentUnderQEMU
// builds it, so the build cache serves both), sends it to a dropbear device
// with its key, and that agent, run under qemu-arm from the device's files,
// enrols accepted with no pending step. (halite-flash's own build, with the
// Makefile's flags, is what it does without --dist or --agent-binary; it is
// left out here for time: a cold build of the agent for ARM with -l takes
// minutes on a loaded machine.)
func TestFlashARMv7UnderQEMU(t *testing.T) {
	needFlashDeps(t)
	qemu, err := exec.LookPath("qemu-arm-static")
	if err != nil {
		if qemu, err = exec.LookPath("qemu-arm"); err != nil {
			t.Fatal("qemu-arm is not installed: run tools/ci/deps.sh (make test does)")
		}
	}
	key, authorized := clientKey(t)
	d := startDevice(t, "dropbear", authorized, "")
	c := newCluster(t, "")
	c.startMaster()
	known := filepath.Join(t.TempDir(), "known_hosts")
	dist := t.TempDir()
	built := filepath.Join(dist, "linux-armv7", "halite-agent")
	overlay, err := deviceOverlay()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-overlay="+overlay, "-ldflags", "-s -w", "-o", built, "../cmd/halite-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm", "GOARM=7")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cross-build: %v\n%s", err, out)
	}
	res, r := c.flashSSH(nil, d.addr, "--key", key, "--known-hosts", known, "--accept-new-hostkeys",
		"--state", "", "--arch", "armv7", "--dist", dist, "--init", "none")
	fr := res[d.addr]
	if r.code != 0 || fr.Status != "ok" || fr.Arch != "armv7" {
		t.Fatalf("flash armv7: exit %d, %+v\n%s", r.code, fr, r.stderr)
	}
	// The agent runs where the device's files are: devMount in a mount
	// namespace, as the SSH server saw them.
	p := c.startRaw("unshare", "-m", "sh", "-c", fmt.Sprintf("mount --make-rprivate / && mount --bind %s %s && exec %s %s/usr/bin/halite-agent -c %s/etc/halite -l info",
		d.dir, devMount, qemu, devMount, devMount))
	c.agents["armcam"] = p
	c.waitUp(fr.ID)
	keys := c.keyLists()
	if len(keys["minions_pre"]) != 0 || !slices.Contains(keys["minions"], fr.ID) {
		t.Errorf("keys: %v, want %s accepted, none pending", keys, fr.ID)
	}
	rets, _ := c.jsonOut("halite", fr.ID, "grains.item", "cpuarch")
	if g, _ := rets[fr.ID].(map[string]any); g["cpuarch"] != "armv7l" && g["cpuarch"] != "arm" {
		t.Errorf("cpuarch of the flashed agent: %v", rets)
	}
}
