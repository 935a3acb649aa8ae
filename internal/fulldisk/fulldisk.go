package fulldisk

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Disk is a small tmpfs; Dir is where it is mounted.
type Disk struct {
	Dir string
	t   testing.TB
}

// fillName is the file that takes up a disk's room.
const fillName = ".fill"

// Mount mounts a tmpfs of size bytes on a new temporary directory and
// unmounts it when the test ends (after the test's later cleanups, which
// close what they opened on it). A test not run as root is skipped; one
// run as root whose mount fails fails: a spool's full-disk handling must
// not go untested unnoticed.
func Mount(t testing.TB, size int) *Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("fulldisk: mounting a tmpfs needs root")
	}
	dir, err := os.MkdirTemp("", "fulldisk")
	if err != nil {
		t.Fatalf("fulldisk: %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) }) // after the unmount
	return MountOn(t, dir, size)
}

// MountOn mounts a tmpfs of size bytes on dir (made if need be), as Mount
// does.
func MountOn(t testing.TB, dir string, size int) *Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("fulldisk: mounting a tmpfs needs root")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("fulldisk: %v", err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		t.Fatalf("fulldisk: mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("fulldisk: unmount %s: %v", dir, err)
		}
	})
	return &Disk{Dir: dir, t: t}
}

// Fill takes up the disk's room but free bytes (rounded up to whole
// pages: that is what tmpfs allocates).
func (d *Disk) Fill(free int) {
	d.t.Helper()
	path := filepath.Join(d.Dir, fillName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatalf("fulldisk: %v", err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	for {
		if _, err = f.Write(page); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		d.t.Fatalf("fulldisk: fill %s: %v, want ENOSPC", d.Dir, err)
	}
	fi, err := f.Stat()
	if err != nil {
		d.t.Fatalf("fulldisk: %v", err)
	}
	size := fi.Size() / 4096 * 4096
	free = (free + 4095) / 4096 * 4096
	if err := f.Truncate(max(size-int64(free), 0)); err != nil {
		d.t.Fatalf("fulldisk: %v", err)
	}
}

// Free gives back the room Fill took.
func (d *Disk) Free() {
	d.t.Helper()
	if err := os.Remove(filepath.Join(d.Dir, fillName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.t.Fatalf("fulldisk: %v", err)
	}
}
