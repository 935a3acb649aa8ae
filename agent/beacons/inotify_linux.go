//go:build linux

package beacons

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotifyMasks are Salt's mask names.
var inotifyMasks = map[string]uint32{
	"access": unix.IN_ACCESS, "attrib": unix.IN_ATTRIB, "close_nowrite": unix.IN_CLOSE_NOWRITE,
	"close_write": unix.IN_CLOSE_WRITE, "create": unix.IN_CREATE, "delete": unix.IN_DELETE,
	"delete_self": unix.IN_DELETE_SELF, "modify": unix.IN_MODIFY, "move_self": unix.IN_MOVE_SELF,
	"moved_from": unix.IN_MOVED_FROM, "moved_to": unix.IN_MOVED_TO, "open": unix.IN_OPEN,
	"close": unix.IN_CLOSE, "move": unix.IN_MOVE,
}

var inotifyNames = []struct {
	bit  uint32
	name string
}{
	{unix.IN_ACCESS, "IN_ACCESS"}, {unix.IN_MODIFY, "IN_MODIFY"}, {unix.IN_ATTRIB, "IN_ATTRIB"},
	{unix.IN_CLOSE_WRITE, "IN_CLOSE_WRITE"}, {unix.IN_CLOSE_NOWRITE, "IN_CLOSE_NOWRITE"}, {unix.IN_OPEN, "IN_OPEN"},
	{unix.IN_MOVED_FROM, "IN_MOVED_FROM"}, {unix.IN_MOVED_TO, "IN_MOVED_TO"}, {unix.IN_CREATE, "IN_CREATE"},
	{unix.IN_DELETE, "IN_DELETE"}, {unix.IN_DELETE_SELF, "IN_DELETE_SELF"}, {unix.IN_MOVE_SELF, "IN_MOVE_SELF"},
}

// maxInotifyEvents bounds the events one check fires; the kernel queue
// holds the rest for the next check (and reports its own overflow).
const maxInotifyEvents = 1000

// inotify (Salt's inotify beacon, in pure Go): watches files and
// directories and fires {path, change} for each change, tagged with the
// path. Per file: mask (Salt's names: create, modify, delete, close_write,
// attrib, moved_to, …; default create, delete, modify, attrib, moved_to,
// moved_from, delete_self), recurse (watch subdirectories), auto_add (watch
// directories created later), exclude (path prefixes to ignore).
//
//	beacons:
//	  inotify:
//	    - files:
//	        /etc/halite/agent.d:
//	          mask: [create, modify, delete]
//	          recurse: True
//	          auto_add: True
//	    - disable_during_state_run: True
func init() {
	register("inotify", func(o *opts, e *env) (Beacon, error) {
		files, err := o.mapping("files", true)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("option files: no files given")
		}
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("inotify: %w", err)
		}
		b := &inotifyBeacon{fd: fd, wd: map[int]*watchAt{}}
		paths := make([]string, 0, len(files))
		for p := range files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			w := &watch{path: filepath.Clean(p), mask: unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
				unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE_SELF}
			if v := files[p]; v != nil {
				m, err := toMap(v)
				if err == nil {
					err = w.parse(m)
				}
				if err != nil {
					b.Close()
					return nil, fmt.Errorf("option files: %s: %w", p, err)
				}
			}
			if err := b.add(w.path, w); err != nil {
				b.Close()
				return nil, fmt.Errorf("option files: %s: %w", p, err)
			}
		}
		return b, nil
	})
}

type watch struct {
	path             string
	mask             uint32
	recurse, autoAdd bool
	exclude          []string
}

func (w *watch) parse(m map[string]any) error {
	o := newOpts(m)
	if v, ok := o.take("mask"); ok {
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("mask: expected a list of names, got %v", v)
		}
		w.mask = 0
		for _, it := range l {
			s, _ := it.(string)
			bit, ok := inotifyMasks[s]
			if !ok {
				return fmt.Errorf("mask: unknown mask %v", it)
			}
			w.mask |= bit
		}
	}
	var err error
	if w.recurse, err = o.boolean("recurse", false); err != nil {
		return err
	}
	if w.autoAdd, err = o.boolean("auto_add", false); err != nil {
		return err
	}
	if v, ok := o.take("exclude"); ok {
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("exclude: expected a list of paths, got %v", v)
		}
		for _, it := range l {
			if s, ok := it.(string); ok {
				w.exclude = append(w.exclude, s)
			} else if m, ok := it.(map[string]any); ok {
				for k := range m { // Salt's {path: {regex: True}} form: the key is the path
					w.exclude = append(w.exclude, k)
				}
			}
		}
	}
	return o.done()
}

type inotifyBeacon struct {
	fd  int
	wd  map[int]*watchAt
	buf [64 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)]byte
}

type watchAt struct {
	dir string
	w   *watch
}

func (b *inotifyBeacon) add(path string, w *watch) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	mask := w.mask
	if fi.IsDir() && w.autoAdd {
		mask |= unix.IN_CREATE
	}
	wd, err := unix.InotifyAddWatch(b.fd, path, mask)
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	b.wd[wd] = &watchAt{dir: path, w: w}
	if fi.IsDir() && w.recurse {
		ents, _ := os.ReadDir(path)
		for _, e := range ents {
			if e.IsDir() {
				sub := filepath.Join(path, e.Name())
				if !w.excluded(sub) {
					_ = b.add(sub, w)
				}
			}
		}
	}
	return nil
}

func (w *watch) excluded(p string) bool {
	for _, x := range w.exclude {
		if strings.HasPrefix(p, x) {
			return true
		}
	}
	return false
}

func (b *inotifyBeacon) Close() error { return unix.Close(b.fd) }

func (b *inotifyBeacon) Check(context.Context) ([]map[string]any, error) {
	var out []map[string]any
	for len(out) < maxInotifyEvents {
		n, err := unix.Read(b.fd, b.buf[:])
		if errors.Is(err, unix.EAGAIN) || n <= 0 {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read inotify: %w", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&b.buf[off]))
			nameB := b.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			wa := b.wd[int(ev.Wd)]
			if wa == nil {
				continue
			}
			p := wa.dir
			if name := strings.TrimRight(string(nameB), "\x00"); name != "" {
				p = filepath.Join(wa.dir, name)
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(b.wd, int(ev.Wd))
				continue
			}
			if wa.w.excluded(p) {
				continue
			}
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&unix.IN_CREATE != 0 && wa.w.autoAdd {
				_ = b.add(p, wa.w)
			}
			if ev.Mask&wa.w.mask == 0 {
				continue
			}
			out = append(out, map[string]any{"tag": p, "path": p, "change": changeName(ev.Mask)})
		}
	}
	return out, nil
}

func changeName(mask uint32) string {
	for _, n := range inotifyNames {
		if mask&n.bit != 0 {
			return n.name
		}
	}
	return fmt.Sprintf("0x%x", mask)
}
