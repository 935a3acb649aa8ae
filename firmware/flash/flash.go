package flash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/halite-fleet/halite/internal/sshhost"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/halite-fleet/halite/firmware"
	"github.com/halite-fleet/halite/protocol"
)

// trace prints each remote command's time (HALITE_FLASH_TRACE=1).
var trace = os.Getenv("HALITE_FLASH_TRACE") != ""

// Kinds of per-device failure: stable words for --out json and tests.
const (
	KindUnreachable    = "unreachable"
	KindAuth           = "auth"
	KindHostKeyUnknown = "hostkey-unknown"
	KindHostKeyChanged = "hostkey-changed"
	KindArch           = "arch"
	KindNoSpace        = "nospace"
	KindReadOnly       = "readonly"
	KindKey            = "key"
	KindInstall        = "install"
	KindOther          = "other"
)

// Statuses of a Result.
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"
	StatusSkipped = "skipped" // done by an earlier run (state file)
	StatusDryRun  = "dry-run"
)

// Target is one device to flash.
type Target struct {
	Addr string // host or host:port (22 when none)
	ID   string // agent id; "" takes the device's host name
	User string // "" takes Options.User
	Arch string // "" detects it
}

// Options configure a run.
type Options struct {
	User       string
	Signers    []ssh.Signer // --key
	Password   string       // --password-env
	KnownHosts string
	AcceptNew  bool
	Jobs       int
	DryRun     bool
	Timeout    time.Duration // per device; 0: 5 minutes
	// StateFile lists devices done (one JSON line each); they are skipped.
	StateFile string
	// Root installs under this directory of each device instead of / (tests,
	// images); BinDir is where the binary goes (default /usr/bin).
	Root   string
	BinDir string
	Init   string // force an init system: systemd, procd, sysv, none
	// ReplaceKeys lets the master's key for an id be replaced by the
	// device's (or a new one) when they differ.
	ReplaceKeys bool

	Profile firmware.Profile
	Source  firmware.Source
	Master  *firmware.Master

	// Progress, when set, is called after each device with the counts.
	Progress func(done, total int, r Result)
}

// Result is one device's outcome.
type Result struct {
	Addr    string  `json:"host"`
	ID      string  `json:"id,omitempty"`
	Arch    string  `json:"arch,omitempty"`
	Init    string  `json:"init,omitempty"`
	Status  string  `json:"status"`
	Kind    string  `json:"error_kind,omitempty"`
	Error   string  `json:"error,omitempty"`
	Finger  string  `json:"finger,omitempty"` // the agent key the master accepted
	Bytes   int64   `json:"bytes,omitempty"`  // agent binary sent
	Seconds float64 `json:"seconds"`
	KeyMade bool    `json:"key_made,omitempty"` // a new key pair was written to the device
	Detail  string  `json:"detail,omitempty"`
}

// flashError is a failure with its kind.
type flashError struct {
	kind string
	msg  string
}

func (e *flashError) Error() string { return e.msg }

func fail(kind, format string, a ...any) error {
	return &flashError{kind: kind, msg: fmt.Sprintf(format, a...)}
}

// Run flashes every target, Jobs at a time, and returns their results in
// the targets' order. It returns an error only for what stops the whole
// run (the state file); each device's failure is in its Result.
func Run(ctx context.Context, o Options, targets []Target) ([]Result, error) {
	if o.Jobs < 1 {
		o.Jobs = 1
	}
	if o.BinDir == "" {
		o.BinDir = "/usr/bin"
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	hk, err := sshhost.New(o.KnownHosts, o.AcceptNew && !o.DryRun)
	if err != nil {
		return nil, err
	}
	st, err := openState(o.StateFile)
	if err != nil {
		return nil, err
	}
	defer st.close()
	f := &flasher{o: o, hk: hk, st: st, bins: map[string]*binResult{}}
	results := make([]Result, len(targets))
	idx := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range min(o.Jobs, len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				r := f.one(ctx, targets[i])
				results[i] = r
				mu.Lock()
				done++
				if o.Progress != nil {
					o.Progress(done, len(targets), r)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range targets {
		select {
		case idx <- i:
			continue
		case <-ctx.Done():
		}
		for j := i; j < len(targets); j++ { // never handed to a worker
			results[j] = Result{Addr: targets[j].Addr, Status: StatusFailed, Kind: KindOther, Error: "not tried: the run was interrupted; run again to go on"}
		}
		break
	}
	close(idx)
	wg.Wait()
	return results, nil
}

type flasher struct {
	o  Options
	hk *sshhost.Checker
	st *state

	mu   sync.Mutex
	bins map[string]*binResult // by arch: built or found once
}

type binResult struct {
	once sync.Once
	path string
	size int64
	err  error
}

func (f *flasher) binary(ctx context.Context, arch firmware.Arch) (string, int64, error) {
	f.mu.Lock()
	b := f.bins[arch.Name]
	if b == nil {
		b = &binResult{}
		f.bins[arch.Name] = b
	}
	f.mu.Unlock()
	b.once.Do(func() {
		b.path, b.err = f.o.Source.AgentBinary(ctx, arch)
		if b.err == nil {
			var fi os.FileInfo
			if fi, b.err = os.Stat(b.path); b.err == nil {
				b.size = fi.Size()
			}
		}
	})
	return b.path, b.size, b.err
}

func hostPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), "22")
}

// one flashes one device; it never panics on what the device says.
func (f *flasher) one(ctx context.Context, t Target) (r Result) {
	start := time.Now()
	r = Result{Addr: t.Addr, ID: t.ID}
	defer func() {
		r.Seconds = time.Since(start).Seconds()
		if p := recover(); p != nil {
			r.Status, r.Kind, r.Error = StatusFailed, KindOther, fmt.Sprintf("internal error: %v", p)
		}
	}()
	if f.st.done(t.Addr) && !f.o.DryRun {
		r.Status, r.Detail = StatusSkipped, "done by an earlier run (state file "+f.o.StateFile+")"
		return r
	}
	dctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	defer cancel()
	err := f.flash(dctx, ctx, t, &r)
	if err != nil {
		r.Status = StatusFailed
		var fe *flashError
		if errors.As(err, &fe) {
			r.Kind, r.Error = fe.kind, fe.msg
		} else {
			r.Kind, r.Error = KindOther, err.Error()
		}
		return r
	}
	if f.o.DryRun {
		r.Status = StatusDryRun
		return r
	}
	r.Status = StatusOK
	if err := f.st.record(r); err != nil {
		r.Detail = "flashed, but not recorded in the state file: " + err.Error()
	}
	return r
}

// dial opens the authenticated SSH connection.
func (f *flasher) dial(ctx context.Context, t Target) (*ssh.Client, error) {
	addr := hostPort(t.Addr)
	user := t.User
	if user == "" {
		user = f.o.User
	}
	var auth []ssh.AuthMethod
	if len(f.o.Signers) > 0 {
		auth = append(auth, ssh.PublicKeys(f.o.Signers...))
	}
	if f.o.Password != "" {
		pw := f.o.Password
		auth = append(auth, ssh.Password(pw), ssh.KeyboardInteractive(func(_, _ string, qs []string, _ []bool) ([]string, error) {
			a := make([]string, len(qs))
			for i := range a {
				a[i] = pw
			}
			return a, nil
		}))
	}
	cfg := &ssh.ClientConfig{
		User:              user,
		Auth:              auth,
		HostKeyCallback:   f.hk.Callback,
		HostKeyAlgorithms: f.hk.Algorithms(addr),
		Timeout:           30 * time.Second,
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fail(KindUnreachable, "cannot reach %s: %v: check the address and that sshd or dropbear runs", addr, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		var he *sshhost.Error
		switch {
		case errors.As(err, &he) && he.Changed:
			return nil, fail(KindHostKeyChanged, "%s", he.Error())
		case errors.As(err, &he):
			return nil, fail(KindHostKeyUnknown, "%s", he.Error())
		case strings.Contains(err.Error(), "unable to authenticate"):
			var how string
			switch {
			case len(f.o.Signers) > 0 && f.o.Password != "":
				how = "--key and the --password-env password"
			case len(f.o.Signers) > 0:
				how = "--key (is its public key in the device's authorized_keys?)"
			case f.o.Password != "":
				how = "the --password-env password"
			default:
				how = "nothing: give --key or --password-env"
			}
			return nil, fail(KindAuth, "wrong password or key: %s@%s refused %s", user, addr, how)
		}
		return nil, fail(KindUnreachable, "ssh handshake with %s: %v", addr, err)
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// run runs cmd in a new session with stdin, returning stdout (at most
// limit bytes) and stderr.
func run(ctx context.Context, c *ssh.Client, cmd string, stdin io.Reader, limit int64) (string, string, error) {
	if trace {
		defer func(t time.Time) { fmt.Fprintf(os.Stderr, "halite-flash: %.3fs %.60q\n", time.Since(t).Seconds(), cmd) }(time.Now())
	}
	s, err := c.NewSession()
	if err != nil {
		return "", "", fmt.Errorf("open session: %w", err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	var out, errb bytes.Buffer
	s.Stdout = &limitWriter{w: &out, n: limit}
	s.Stderr = &limitWriter{w: &errb, n: 64 << 10}
	if stdin != nil {
		s.Stdin = stdin
	}
	err = s.Run(cmd)
	if ctx.Err() != nil {
		return out.String(), errb.String(), fmt.Errorf("timed out or cancelled: %w", ctx.Err())
	}
	return out.String(), errb.String(), err
}

// limitWriter keeps the first n bytes and drops the rest: a device's output
// is hostile and bounded.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(int64(len(p)), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Probe is what a device says about itself.
type Probe struct {
	Uname, CPUInfo, Hostname, UID, Init string
	Endian                              firmware.Endian
	Writable                            bool
	Dir                                 string // the directory probed for space and writing
	FreeKiB                             int64  // -1: unknown
	Key                                 []byte // pki/minion.pem, if any
	MAC                                 string // the first interface's address
	IDFile                              string // the first line of --id-from file:PATH
}

// probeScript prints what Probe holds, in sections.
const probeScript = `R=%s; B=%s; F=%s
echo @uname; uname -m
echo @cpuinfo; head -n 60 /proc/cpuinfo 2>/dev/null
echo @endian; od -An -tu1 -j5 -N1 /bin/sh 2>/dev/null || hexdump -s5 -n1 -e '1/1 "%%u"' /bin/sh 2>/dev/null; echo
echo @hostname; cat /proc/sys/kernel/hostname 2>/dev/null || hostname
echo @uid; id -u
d="$R$B"; while [ ! -d "$d" ]; do d=$(dirname "$d"); done
echo @dir; echo "$d"
echo @writable; if : >"$d/.halite-flash-probe" 2>/dev/null; then rm -f "$d/.halite-flash-probe"; echo yes; else echo no; fi
echo @df; df -Pk "$d" 2>/dev/null || df -k "$d"
echo @init
if [ -d "$R/run/systemd/system" ]; then echo systemd
elif [ -f "$R/etc/rc.common" ] || [ -x "$R/sbin/procd" ]; then echo procd
elif [ -d "$R/etc/init.d" ]; then echo sysv
else echo none; fi
echo @key; cat "$R/etc/halite/pki/agent/minion.pem" 2>/dev/null
echo @mac; for a in /sys/class/net/*/address; do m=$(cat "$a" 2>/dev/null); case $m in '' | 00:00:00:00:00:00) ;; *) echo "$m"; break ;; esac; done
echo @idfile; [ -n "$F" ] && head -n 1 "$F" 2>/dev/null; echo
echo @end
`

func parseProbe(out string) (Probe, error) {
	p := Probe{FreeKiB: -1}
	if !strings.Contains(out, "\n@end") {
		return p, fail(KindOther, "the device's shell did not run the probe to its end (is /bin/sh a POSIX shell?); output: %.200q", out)
	}
	sec := map[string]string{}
	name := ""
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, "@") && !strings.Contains(strings.TrimSpace(line), " ") {
			name = strings.TrimSpace(line[1:])
			continue
		}
		sec[name] += line
	}
	p.Uname = strings.TrimSpace(sec["uname"])
	p.CPUInfo = sec["cpuinfo"]
	p.Endian = firmware.ParseEndian(sec["endian"])
	p.Hostname = strings.TrimSpace(sec["hostname"])
	p.UID = strings.TrimSpace(sec["uid"])
	p.Dir = strings.TrimSpace(sec["dir"])
	p.Writable = strings.TrimSpace(sec["writable"]) == "yes"
	p.Init = strings.TrimSpace(sec["init"])
	if k := strings.TrimSpace(sec["key"]); k != "" {
		p.Key = []byte(k + "\n")
	}
	p.FreeKiB = parseDF(sec["df"])
	p.MAC = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(sec["mac"]), ":", ""))
	p.IDFile = strings.TrimSpace(sec["idfile"])
	return p, nil
}

// parseDF reads the available KiB from df -Pk output: the 4th field of the
// last line (a long device name may wrap the line in non-POSIX df).
func parseDF(s string) int64 {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) < 2 {
		return -1
	}
	f := strings.Fields(strings.Join(lines[1:], " "))
	if len(f) < 4 {
		return -1
	}
	n, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// flash does the work for one device, filling r as it learns. ctx bounds
// the device (--timeout); runCtx the run, for the agent build that devices
// of one architecture share.
func (f *flasher) flash(ctx, runCtx context.Context, t Target, r *Result) error {
	c, err := f.dial(ctx, t)
	if err != nil {
		return err
	}
	defer c.Close()
	idFile := ""
	if p, ok := strings.CutPrefix(f.o.Profile.IDFrom, "file:"); ok {
		idFile = f.o.Root + p
	}
	out, stderr, err := run(ctx, c, fmt.Sprintf(probeScript, shq(f.o.Root), shq(f.o.BinDir), shq(idFile)), nil, 256<<10)
	if err != nil && !strings.Contains(out, "\n@end") {
		return fail(KindOther, "probe: %v: %s", err, strings.TrimSpace(stderr))
	}
	p, err := parseProbe(out)
	if err != nil {
		return err
	}
	var arch firmware.Arch
	if t.Arch != "" {
		arch, err = firmware.LookupArch(t.Arch)
	} else {
		arch, err = firmware.DetectArch(p.Uname, p.CPUInfo, p.Endian)
	}
	if err != nil {
		return fail(KindArch, "%v", err)
	}
	r.Arch = arch.Name
	r.Init = p.Init
	if f.o.Init != "" {
		r.Init = f.o.Init
	}
	id, from := t.ID, "the inventory"
	if id == "" {
		switch from = f.o.Profile.IDFrom; {
		case from == "mac":
			id = p.MAC
		case strings.HasPrefix(from, "file:"):
			id = p.IDFile
		default:
			id, from = p.Hostname, "hostname"
		}
	}
	if err := protocol.ValidID(id); err != nil {
		return fail(KindOther, "no usable agent id (%q from %s): give id=ID for this device in the inventory", id, from)
	}
	r.ID = id
	if !p.Writable {
		return fail(KindReadOnly, "read-only: %s is not writable on the device (read-only root, e.g. squashfs): give --bin-dir a writable directory (/data, /opt, an overlay) or remount it read-write", p.Dir)
	}
	bin, size, err := f.binary(runCtx, arch)
	if err != nil {
		return fail(KindArch, "no agent for %s: %v", arch.Name, err)
	}
	r.Bytes = size
	needKiB := size/1024 + 256
	if p.FreeKiB >= 0 && p.FreeKiB < needKiB {
		return fail(KindNoSpace, "no space: %d KiB free on %s, the agent needs %d KiB: free space there, or give --bin-dir on a larger filesystem", p.FreeKiB, p.Dir, needKiB)
	}
	var have *firmware.DeviceKey
	if p.Key != nil {
		if k, err := firmware.ParseDeviceKey(p.Key); err == nil {
			have = &k
		}
	}
	if f.o.DryRun {
		what := "a new key pair"
		if have != nil {
			what = "its key " + have.Finger()
		}
		r.Detail = fmt.Sprintf("would send %s agent (%d bytes) to %s%s, install it as id %s with %s (init %s)", arch.Name, size, f.o.Root, f.o.BinDir, id, what, r.Init)
		return nil
	}
	key, err := f.o.Master.Enrol(ctx, id, have, f.o.ReplaceKeys)
	if err != nil {
		if errors.Is(err, firmware.ErrKeyConflict) {
			return fail(KindKey, "the master already holds another key for %s: if this device replaces the old one, run again with --replace-keys (or halite-key -d %s)", id, id)
		}
		return fail(KindKey, "enrol the device's key with the master: %v", err)
	}
	r.Finger = key.Finger()
	r.KeyMade = have == nil || !have.Pub.Equal(key.Pub)
	return f.install(ctx, c, t, r, arch, bin, key)
}

// uploadScript receives the bundle on the device in one session: the text
// files as lines ("@file NAME MODE", the lines, "@end TOKEN"), then
// "@binary" and the agent binary's bytes, which cat takes as they come
// (the shell's read consumes a pipe one byte at a time, never past a line).
// No scp, sftp, tar or base64 is needed: dropbear devices often lack them.
const uploadScript = `S=%s; T=%s
rm -rf "$S" && mkdir -p "$S/init" "$S/keys" && chmod 700 "$S" || exit 1
umask 077
while IFS= read -r h; do
	case $h in
	"@file "*)
		set -- $h
		while IFS= read -r l && [ "$l" != "@end $T" ]; do printf '%%s\n' "$l"; done >"$S/$2" || exit 1
		chmod "$3" "$S/$2"
		;;
	@binary) break ;;
	*) echo "bad header: $h" >&2; exit 1 ;;
	esac
done
cat >"$S/halite-agent.part" && mv -f "$S/halite-agent.part" "$S/halite-agent" && wc -c <"$S/halite-agent"
`

// install sends the bundle's files to a staging directory beside the
// install directory and runs install.sh there.
func (f *flasher) install(ctx context.Context, c *ssh.Client, t Target, r *Result, arch firmware.Arch, bin string, key firmware.DeviceKey) error {
	stage := path.Join(f.o.Root+f.o.BinDir, ".halite-flash")
	b := &firmware.Bundle{Arch: arch, Profile: f.o.Profile, Agent: bin, Keys: map[string]firmware.DeviceKey{r.ID: key}}
	token := fmt.Sprintf("%x", time.Now().UnixNano())
	var text bytes.Buffer
	for _, file := range b.Files() {
		if file.Path != "" {
			continue
		}
		fmt.Fprintf(&text, "@file %s %o\n", file.Name, file.Mode)
		text.Write(file.Data)
		if n := len(file.Data); n > 0 && file.Data[n-1] != '\n' {
			text.WriteByte('\n')
		}
		fmt.Fprintf(&text, "@end %s\n", token)
	}
	text.WriteString("@binary\n")
	fh, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	out, stderr, err := run(ctx, c, fmt.Sprintf(uploadScript, shq(stage), token), io.MultiReader(&text, fh), 64)
	if err != nil {
		return classify("send the agent to "+stage, stderr, err)
	}
	if n, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64); n != fi.Size() {
		return fail(KindInstall, "send the agent: the device has %s bytes, sent %d: retry", strings.TrimSpace(out), fi.Size())
	}
	args := []string{"sh", path.Join(stage, "install.sh"), "--move", "--bin-dir", f.o.BinDir, "--id", r.ID}
	if f.o.Root != "" {
		args = append(args, "--root", f.o.Root)
	}
	if f.o.Init != "" {
		args = append(args, "--init", f.o.Init)
	}
	if t.Arch != "" {
		args = append(args, "--force-arch")
	}
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shq(a)
	}
	cmd := strings.Join(q, " ") + "; rc=$?; rm -rf " + shq(stage) + "; exit $rc"
	out, stderr, err = run(ctx, c, cmd, nil, 64<<10)
	last := lastLine(out)
	if err == nil && strings.HasPrefix(last, "HALITE-INSTALL ok") {
		for _, w := range strings.Fields(last) {
			if v, ok := strings.CutPrefix(w, "init="); ok {
				r.Init = v
			}
		}
		return nil
	}
	kind := KindInstall
	if k, ok := strings.CutPrefix(last, "HALITE-INSTALL error="); ok {
		switch k {
		case "nospace":
			kind = KindNoSpace
		case "readonly":
			kind = KindReadOnly
		case "arch":
			kind = KindArch
		}
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" && err != nil {
		msg = err.Error()
	}
	return fail(kind, "install.sh on the device: %s", msg)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// classify turns a failed remote command into a kind from its stderr.
func classify(what, stderr string, err error) error {
	e := strings.TrimSpace(stderr)
	switch {
	case strings.Contains(e, "No space left"):
		return fail(KindNoSpace, "no space: %s: %s: free space on the device, or give --bin-dir on a larger filesystem", what, e)
	case strings.Contains(e, "Read-only file system"):
		return fail(KindReadOnly, "read-only: %s: %s: give --bin-dir a writable directory", what, e)
	}
	if e == "" {
		e = err.Error()
	}
	return fail(KindInstall, "%s: %s", what, e)
}
