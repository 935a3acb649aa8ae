package beacons

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
)

// maxLogRead bounds the bytes the log beacon reads per check, so a file
// that grows by gigabytes cannot stall the agent; the rest is read at the
// next checks.
const maxLogRead = 1 << 20

// log (Salt's log beacon, log_beacon): tails file and fires, for each new
// line matching a tag's regex, {tag: <tag>, match: yes, raw: <line>,
// error: no}, tagged with the tag name. It starts at the end of the file,
// and follows it when it is rotated (a new inode) or truncated.
//
//	beacons:
//	  log:
//	    - file: /var/log/auth.log
//	    - tags:
//	        sshd_fail:
//	          regex: 'Failed password for'
func init() {
	register("log", func(o *opts, e *env) (Beacon, error) {
		file, err := o.str("file", true)
		if err != nil {
			return nil, err
		}
		tags, err := o.mapping("tags", true)
		if err != nil {
			return nil, err
		}
		b := &logBeacon{file: file}
		for name, v := range tags {
			m, err := toMap(v)
			if err != nil {
				return nil, fmt.Errorf("option tags: %s: %w", name, err)
			}
			to := newOpts(m)
			expr, err := to.str("regex", true)
			if err == nil {
				err = to.done()
			}
			if err != nil {
				return nil, fmt.Errorf("option tags: %s: %w", name, err)
			}
			re, err := compileRegexp("tags: "+name+": regex", expr)
			if err != nil {
				return nil, err
			}
			b.tags = append(b.tags, logTag{name, re})
		}
		sort.Slice(b.tags, func(i, j int) bool { return b.tags[i].name < b.tags[j].name })
		return b, nil
	})
}

type logTag struct {
	name string
	re   *regexp.Regexp
}

type logBeacon struct {
	file    string
	tags    []logTag
	f       *os.File
	fi      os.FileInfo
	off     int64
	partial []byte // an unfinished last line
	opened  bool   // the first check ran
}

func (b *logBeacon) Close() error {
	if b.f != nil {
		return b.f.Close()
	}
	return nil
}

func (b *logBeacon) Check(context.Context) ([]map[string]any, error) {
	if b.f == nil {
		f, err := os.Open(b.file)
		if err != nil {
			b.opened = true
			return nil, nil // not there yet: not an error, Salt waits too
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("stat %s: %w", b.file, err)
		}
		// First open: start at the end, as tail -f does. A file that
		// appears after the agent started is read from its start.
		b.f, b.fi, b.off = f, fi, fi.Size()
		if b.opened {
			b.off = 0
			b.opened = true
			return b.read(), nil
		}
		b.opened = true
		return nil, nil
	}
	if fi, err := os.Stat(b.file); err == nil && !os.SameFile(fi, b.fi) {
		// Rotated: finish the old file, then follow the new one from its start.
		out := b.read()
		b.f.Close()
		f, err := os.Open(b.file)
		if err != nil {
			b.f = nil
			return out, nil
		}
		b.f, b.fi, b.off, b.partial = f, fi, 0, nil
		return append(out, b.read()...), nil
	}
	return b.read(), nil
}

func (b *logBeacon) read() []map[string]any {
	if fi, err := b.f.Stat(); err == nil && fi.Size() < b.off {
		b.off, b.partial = 0, nil // truncated
	}
	buf := make([]byte, maxLogRead)
	n, err := b.f.ReadAt(buf, b.off)
	if n == 0 && err != nil && err != io.EOF {
		return nil
	}
	b.off += int64(n)
	data := append(b.partial, buf[:n]...)
	var out []map[string]any
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := string(bytes.TrimRight(data[:i], "\r"))
		data = data[i+1:]
		for _, t := range b.tags {
			if t.re.MatchString(line) {
				out = append(out, map[string]any{"tag": t.name, "match": "yes", "raw": line, "error": "no"})
			}
		}
	}
	b.partial = append([]byte(nil), data...)
	if len(b.partial) > maxLogRead {
		b.partial = nil // a line longer than that is not a log line
	}
	return out
}
