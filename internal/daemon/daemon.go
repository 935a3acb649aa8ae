package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// childEnv marks the detached child; its value is the file descriptor of
// the pipe on which the child says it is up.
const childEnv = "HALITE_DAEMON_READY_FD"

// readyMark ends what the child writes on the pipe when it is up.
const readyMark = "\x00halite-daemon-ready\n"

// The pipe to the parent is not handed on to the programs the child runs:
// the parent waits for the pipe to close.
func init() {
	if fd, err := strconv.Atoi(os.Getenv(childEnv)); err == nil && fd >= 3 {
		syscall.CloseOnExec(fd)
	}
}

// ExitError is the child's failure, which the parent exits with.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("the daemon exited with status %d", e.Code) }

// IsChild reports whether this process is the detached child of Detach.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// Detach runs this program again, detached: in a new session (setsid),
// with stdin and stdout on /dev/null, in the same working directory, with
// the same arguments. The child's stderr comes back to this process until
// the child calls Ready, so the errors of its start are seen; Detach
// returns nil once the child is up, or the child's exit status as an
// *ExitError after copying its stderr to stderr.
func Detach(stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("daemonize: %w", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("daemonize: %w", err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("daemonize: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path: exe, Args: os.Args, Env: append(os.Environ(), childEnv+"=3"),
		Stdin: null, Stdout: null, Stderr: w, ExtraFiles: []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("daemonize: %w", err)
	}
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, io.LimitReader(r, 1<<20))
	if msg, ok := bytes.CutSuffix(out.Bytes(), []byte(readyMark)); ok {
		stderr.Write(msg)
		return cmd.Process.Release()
	}
	stderr.Write(out.Bytes())
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return &ExitError{Code: ee.ExitCode()}
	}
	return errors.New("daemonize: the daemon stopped before it was up")
}

// Ready tells the parent of a detached child that it is up: stderr goes
// to /dev/null from now on and the working directory becomes /, as Salt's
// daemonize does. Outside a detached child it does nothing.
func Ready() error {
	fd, err := strconv.Atoi(os.Getenv(childEnv))
	if err != nil || fd < 3 {
		return nil
	}
	os.Unsetenv(childEnv)
	f := os.NewFile(uintptr(fd), "ready")
	// The working directory changes before the parent hears "up", so that
	// whoever the parent's exit lets in sees the daemon in / already.
	if err := os.Chdir("/"); err != nil {
		f.Close()
		return fmt.Errorf("daemonize: %w", err)
	}
	if _, err := f.WriteString(readyMark); err != nil {
		f.Close()
		return fmt.Errorf("daemonize: tell the parent: %w", err)
	}
	f.Close()
	if err := toDevNull(int(os.Stderr.Fd())); err != nil {
		return fmt.Errorf("daemonize: %w", err)
	}
	return nil
}

// WritePIDFile writes this process's pid to path (made absolute) and
// returns a function that removes it, as Salt's set_pidfile and its
// removal at exit.
func WritePIDFile(path string) (remove func(), err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	if err := os.WriteFile(abs, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	return func() { os.Remove(abs) }, nil
}

// SwitchUser makes this process run as the user called name, as Salt's
// check_user does: nothing when it already runs as that user; else, for
// root only, the user's groups, group and user id, and HOME, SHELL, USER
// and LOGNAME when set. Anyone else is refused.
func SwitchUser(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("-u %s: user not found", name)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("-u %s: uid %s, gid %s are not numbers", name, u.Uid, u.Gid)
	}
	if err := mayBecome(name, uid, os.Geteuid()); err != nil || uid == os.Geteuid() {
		return err
	}
	var groups []int
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil {
				groups = append(groups, g)
			}
		}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("-u %s: set groups: %w", name, err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("-u %s: set gid: %w", name, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("-u %s: set uid: %w", name, err)
	}
	for k, v := range map[string]string{"HOME": u.HomeDir, "USER": u.Username, "LOGNAME": u.Username} {
		if _, ok := os.LookupEnv(k); ok {
			os.Setenv(k, v)
		}
	}
	return nil
}

// mayBecome refuses to switch to uid unless the process runs as root or
// already as uid.
func mayBecome(name string, uid, euid int) error {
	if uid == euid || euid == 0 {
		return nil
	}
	me := strconv.Itoa(euid)
	if u, err := user.LookupId(me); err == nil {
		me = u.Username
	}
	return fmt.Errorf("-u %s: only root can run as another user (running as %s)", name, strings.TrimSpace(me))
}
