package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/halite-fleet/halite/internal/sshhost"
)

// sshDevice is proxytype ssh: a connection per call (an idle minion holds
// none), the host key checked against known_hosts.
type sshDevice struct {
	m     *Minion
	addr  string
	hosts *sshhost.Checker
	key   ssh.Signer // key_file; nil: password only
}

func newSSH(m *Minion, knownHosts string) (*sshDevice, error) {
	e := &m.o.Entry
	port := e.Port
	if port == 0 {
		port = 22
	}
	hk, err := sshhost.New(knownHosts, e.AcceptNewHostKey)
	if err != nil {
		return nil, err
	}
	d := &sshDevice{m: m, addr: net.JoinHostPort(e.Host, strconv.Itoa(port)), hosts: hk}
	if e.KeyFile != "" {
		b, err := os.ReadFile(e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("key_file: %w", err)
		}
		if d.key, err = ssh.ParsePrivateKey(b); err != nil {
			return nil, fmt.Errorf("key_file %s: %w", e.KeyFile, err)
		}
	}
	return d, nil
}

func (d *sshDevice) functions() []string {
	return []string{"cmd.retcode", "cmd.run", "cmd.run_all", "file.file_exists", "file.read", "file.write"}
}

// dial opens an authenticated connection; it ends when ctx does.
func (d *sshDevice) dial(ctx context.Context) (*ssh.Client, func(), error) {
	var auth []ssh.AuthMethod
	if d.key != nil {
		auth = append(auth, ssh.PublicKeys(d.key))
	}
	pw, err := d.m.password()
	if err != nil {
		return nil, nil, err
	}
	if pw != "" {
		auth = append(auth, ssh.Password(pw), ssh.KeyboardInteractive(func(_, _ string, qs []string, _ []bool) ([]string, error) {
			ans := make([]string, len(qs))
			for i := range ans {
				ans[i] = pw
			}
			return ans, nil
		}))
	}
	if len(auth) == 0 {
		return nil, nil, errors.New("no credentials: set password, password_pillar or key_file")
	}
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh %s: %w", d.addr, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	cfg := &ssh.ClientConfig{User: d.m.o.Entry.Username, Auth: auth, HostKeyCallback: d.hosts.Callback,
		HostKeyAlgorithms: d.hosts.Algorithms(d.addr)}
	c, chans, reqs, err := ssh.NewClientConn(conn, d.addr, cfg)
	if err != nil {
		stop()
		conn.Close()
		return nil, nil, fmt.Errorf("ssh %s: %w", d.addr, err)
	}
	cl := ssh.NewClient(c, chans, reqs)
	return cl, func() { stop(); cl.Close() }, nil
}

// run runs cmd on the device (stdin: in, if not nil) and returns its
// output, kept up to maxOutput, and its exit status.
func (d *sshDevice) run(ctx context.Context, cmd string, in []byte) (stdout, stderr string, code int, err error) {
	cl, done, err := d.dial(ctx)
	if err != nil {
		return "", "", 0, err
	}
	defer done()
	s, err := cl.NewSession()
	if err != nil {
		return "", "", 0, fmt.Errorf("ssh %s: session: %w", d.addr, err)
	}
	defer s.Close()
	var o, e limited
	s.Stdout, s.Stderr = &o, &e
	if in != nil {
		s.Stdin = bytes.NewReader(in)
	}
	err = s.Run(cmd)
	var ee *ssh.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitStatus()
	case err != nil:
		if ctx.Err() != nil {
			return "", "", 0, ctx.Err()
		}
		return "", "", 0, fmt.Errorf("ssh %s: run: %w", d.addr, err)
	}
	return o.String(), e.String(), code, nil
}

func (d *sshDevice) ping(ctx context.Context) bool {
	_, _, code, err := d.run(ctx, "true", nil)
	return err == nil && code == 0
}

func (d *sshDevice) call(ctx context.Context, fun string, a *args) (any, int, bool, error) {
	switch fun {
	case "cmd.run", "cmd.retcode", "cmd.run_all":
		cmd, err := a.str(0, "cmd", true)
		if err != nil {
			return nil, 0, true, err
		}
		out, errOut, code, err := d.run(ctx, cmd, nil)
		if err != nil {
			return nil, 0, true, err
		}
		// Salt's cmd.run: stderr joins stdout (redirect_stderr) and the
		// output is rstripped; the job's retcode is the command's
		// (salt/modules/cmdmod.py: __context__["retcode"]).
		switch fun {
		case "cmd.run":
			return strings.TrimRight(out+errOut, " \t\r\n"), code, true, nil
		case "cmd.retcode":
			return code, code, true, nil
		}
		return map[string]any{"pid": 0, "retcode": code, "stdout": strings.TrimRight(out, " \t\r\n"),
			"stderr": strings.TrimRight(errOut, " \t\r\n")}, code, true, nil
	case "file.file_exists":
		p, err := a.str(0, "path", true)
		if err != nil {
			return nil, 0, true, err
		}
		_, _, code, err := d.run(ctx, "test -f "+shellQuote(p), nil)
		return err == nil && code == 0, 0, true, err
	case "file.read":
		p, err := a.str(0, "path", true)
		if err != nil {
			return nil, 0, true, err
		}
		out, errOut, code, err := d.run(ctx, "cat -- "+shellQuote(p), nil)
		if err == nil && code != 0 {
			err = fmt.Errorf("file.read %s: %s", p, strings.TrimSpace(errOut))
		}
		return out, 0, true, err
	case "file.write":
		// Salt's file.write(path, *args): each argument a line.
		p, err := a.str(0, "path", true)
		if err != nil {
			return nil, 0, true, err
		}
		var b strings.Builder
		for _, l := range a.pos[1:] {
			fmt.Fprintf(&b, "%v\n", l)
		}
		_, errOut, code, err := d.run(ctx, "cat > "+shellQuote(p), []byte(b.String()))
		if err == nil && code != 0 {
			err = fmt.Errorf("file.write %s: %s", p, strings.TrimSpace(errOut))
		}
		return "Wrote " + strconv.Itoa(len(a.pos)-1) + " lines to \"" + p + "\"", 0, true, err
	}
	return nil, 0, false, nil
}

// grainsScript prints what the grains are made of, in sections.
const grainsScript = `echo @uname; uname -s; uname -r; uname -v; uname -m; uname -n; ` +
	`echo @os; cat /etc/os-release 2>/dev/null; ` +
	`echo @cpu; grep -c ^processor /proc/cpuinfo 2>/dev/null; grep -m1 -i -E '^(model name|hardware|cpu model)' /proc/cpuinfo 2>/dev/null; ` +
	`echo @mem; grep -m1 MemTotal /proc/meminfo 2>/dev/null`

func (d *sshDevice) grains(ctx context.Context) (map[string]any, error) {
	out, _, _, err := d.run(ctx, grainsScript, nil)
	if err != nil {
		return nil, err
	}
	return parseSSHGrains(out), nil
}

// parseSSHGrains makes Salt's core grains from grainsScript's output.
func parseSSHGrains(out string) map[string]any {
	g := map[string]any{}
	var sec string
	var uname []string
	osr := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "@") {
			sec = l[1:]
			continue
		}
		switch sec {
		case "uname":
			uname = append(uname, strings.TrimSpace(l))
		case "os":
			if k, v, ok := strings.Cut(l, "="); ok {
				osr[k] = strings.Trim(v, `"'`)
			}
		case "cpu":
			if n, err := strconv.Atoi(strings.TrimSpace(l)); err == nil {
				g["num_cpus"] = n
			} else if _, v, ok := strings.Cut(l, ":"); ok {
				g["cpu_model"] = strings.TrimSpace(v)
			}
		case "mem":
			f := strings.Fields(l)
			if len(f) >= 2 {
				if kb, err := strconv.Atoi(f[1]); err == nil {
					g["mem_total"] = kb / 1024
				}
			}
		}
	}
	if len(uname) >= 5 {
		g["kernel"], g["kernelrelease"], g["kernelversion"], g["cpuarch"], g["nodename"] = uname[0], uname[1], uname[2], uname[3], uname[4]
		g["osarch"] = uname[3]
	}
	if v := osr["NAME"]; v != "" {
		g["os"], g["osfullname"] = v, v
		if id := osr["ID"]; id != "" {
			g["os"] = osName(id, v)
		}
		g["os_family"] = g["os"]
	}
	if v := osr["VERSION_ID"]; v != "" {
		g["osrelease"] = v
	}
	if v := osr["VERSION_CODENAME"]; v != "" {
		g["oscodename"] = v
	}
	return g
}

// osName is Salt's os grain for a few os-release IDs (salt/grains/core.py
// _OS_NAME_MAP), else the NAME's first word.
func osName(id, name string) string {
	switch id {
	case "debian":
		return "Debian"
	case "ubuntu":
		return "Ubuntu"
	case "alpine":
		return "Alpine"
	case "openwrt":
		return "OpenWrt"
	case "raspbian":
		return "Raspbian"
	}
	if f := strings.Fields(name); len(f) > 0 {
		return f[0]
	}
	return name
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
