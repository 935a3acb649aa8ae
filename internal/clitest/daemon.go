package clitest

import (
	"errors"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// Daemons are script commands for the daemons' -d, --pid-file and -u
// (run as real processes by the scripts):
//
//	daemonconf CONFIG_DIR [world]  a master configuration (below)
//	daemon PIDFILE                 the process runs detached
//	stopdaemon PIDFILE             SIGTERM, then wait until it is gone
//	uidof PIDFILE USER             the process runs as USER
func Daemons() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"daemonconf": daemonConf, "daemon": checkDaemon, "stopdaemon": stopDaemon, "uidof": uidOf,
	}
}

// daemonWait bounds the waits of the daemon commands.
const daemonWait = 20 * time.Second

// daemonConf CONFIG_DIR [world] writes CONFIG_DIR/master for a master on a
// free port of 127.0.0.1 without a log file, its root_dir CONFIG_DIR or,
// with "world", a new directory under /tmp that any user may write (for
// -u).
func daemonConf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: daemonconf CONFIG_DIR [world]")
	}
	dir := ts.MkAbs(args[0])
	root := dir
	if len(args) == 2 {
		var err error
		root, err = os.MkdirTemp("", "halite-u")
		ts.Check(err)
		ts.Check(os.Chmod(root, 0o777))
		ts.Defer(func() { os.RemoveAll(root) })
	}
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	ts.Check(err)
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	ts.Check(os.MkdirAll(dir, 0o755))
	text := "root_dir: " + root + "\ninterface: 127.0.0.1\nport: " + strconv.Itoa(port) + "\nlog_file: ''\n"
	ts.Check(os.WriteFile(filepath.Join(dir, "master"), []byte(text), 0o644))
}

func pidOf(ts *testscript.TestScript, file string) int {
	b, err := os.ReadFile(ts.MkAbs(file))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		ts.Fatalf("%s: %q is not a pid", file, b)
	}
	return pid
}

// procStatus returns the fields of /proc/PID/status, nil when the process
// is gone or a zombie.
func procStatus(pid int) map[string]string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	st := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	if strings.HasPrefix(st["State"], "Z") {
		return nil
	}
	return st
}

// daemon PIDFILE: the process of PIDFILE runs detached, as Salt's
// daemonize makes it (salt/utils/process.py): the leader of its own
// session, stdin, stdout and stderr on /dev/null, in /. It is killed when
// the script ends.
func checkDaemon(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: daemon PIDFILE")
	}
	pid := pidOf(ts, args[0])
	ts.Defer(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if procStatus(pid) == nil {
		ts.Fatalf("pid %d is not running", pid)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	ts.Check(err)
	// pid (comm) state ppid pgrp session ...
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 4 {
		ts.Fatalf("pid %d: unreadable stat %q", pid, stat)
	}
	if sid, _ := strconv.Atoi(f[3]); sid != pid {
		ts.Fatalf("pid %d: session %d, want its own (setsid)", pid, sid)
	}
	for fd := 0; fd <= 2; fd++ {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd))
		ts.Check(err)
		if l != os.DevNull {
			ts.Fatalf("pid %d: fd %d is %s, want %s", pid, fd, l, os.DevNull)
		}
	}
	if cwd, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); cwd != "/" {
		ts.Fatalf("pid %d: working directory %s, want /", pid, cwd)
	}
}

// stopdaemon PIDFILE sends SIGTERM to the process of PIDFILE and waits
// until it is gone.
func stopDaemon(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: stopdaemon PIDFILE")
	}
	pid := pidOf(ts, args[0])
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		ts.Fatalf("kill %d: %v", pid, err)
	}
	deadline := time.Now().Add(daemonWait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for procStatus(pid) != nil {
		if time.Now().After(deadline) {
			ts.Fatalf("pid %d still running %v after SIGTERM", pid, daemonWait)
		}
		<-tick.C
	}
}

// uidof PIDFILE USER: the process of PIDFILE runs as USER (real and
// effective uid and gid).
func uidOf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: uidof PIDFILE USER")
	}
	pid := pidOf(ts, args[0])
	u, err := user.Lookup(args[1])
	ts.Check(err)
	st := procStatus(pid)
	if st == nil {
		ts.Fatalf("pid %d is not running", pid)
	}
	uids, gids := strings.Fields(st["Uid"]), strings.Fields(st["Gid"])
	if len(uids) < 2 || uids[0] != u.Uid || uids[1] != u.Uid || len(gids) < 2 || gids[0] != u.Gid || gids[1] != u.Gid {
		ts.Fatalf("pid %d: Uid %q Gid %q, want uid %s gid %s (%s)", pid, st["Uid"], st["Gid"], u.Uid, u.Gid, args[1])
	}
}
