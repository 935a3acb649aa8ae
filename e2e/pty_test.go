package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair (Linux's /dev/ptmx): the
// controlling side to read, the terminal side to give a command.
func openPTY(t *testing.T) (ctl, tty *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	fd := int(ctl.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		ctl.Close()
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		ctl.Close()
		t.Fatalf("pty number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ctl.Close()
		t.Fatalf("open /dev/pts/%d: %v", n, err)
	}
	return ctl, tty
}

// cliTTY is cli with the command's stderr on a terminal, as a user at a
// shell has it: what the command drew there comes back as stderr.
func (c *cluster) cliTTY(name string, args ...string) result {
	c.t.Helper()
	ctl, tty := openPTY(c.t)
	defer ctl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), append([]string{"-c", c.masterDir()}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	var term bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(&term, ctl) // ends with EIO once the terminal side is closed
	}()
	err := cmd.Run()
	tty.Close()
	// The terminal side closed: the copy ends once it has drained.
	wg.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run %s %v: %v", name, args, err)
	}
	return result{out.String(), term.String(), code}
}
