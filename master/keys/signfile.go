package keys

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/targets"
)

// signingFile is an autosign_file or autoreject_file: expressions, one per
// line, re-read when the file's modification time or size changes.
type signingFile struct {
	path string
	log  *zap.Logger

	mu      sync.Mutex
	modTime time.Time
	size    int64
	loaded  bool
	exprs   []signExpr
}

type signExpr struct {
	text string
	re   *regexp.Regexp // nil when text is not a valid regular expression
}

func newSigningFile(path string, log *zap.Logger) *signingFile {
	return &signingFile{path: path, log: log}
}

// match reports whether id matches an expression of the file. A missing
// file, or one that others or the group may write, matches nothing.
func (f *signingFile) match(id string) bool {
	if f.path == "" {
		return false
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("read signing file", zap.String("file", f.path), zap.Error(err))
		}
		return false
	}
	if fi.Mode().Perm()&0o022 != 0 {
		f.log.Warn("wrong permissions on signing file (group or others may write it), ignoring its content",
			zap.String("file", f.path), zap.Stringer("mode", fi.Mode().Perm()))
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.loaded || !fi.ModTime().Equal(f.modTime) || fi.Size() != f.size {
		b, err := os.ReadFile(f.path)
		if err != nil {
			f.log.Warn("read signing file", zap.String("file", f.path), zap.Error(err))
			return false
		}
		f.exprs = parseSigningFile(b)
		f.modTime, f.size, f.loaded = fi.ModTime(), fi.Size(), true
	}
	for _, e := range f.exprs {
		if e.matches(id) {
			return true
		}
	}
	return false
}

func parseSigningFile(b []byte) []signExpr {
	var out []signExpr
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e := signExpr{text: line}
		if re, err := regexp.Compile(`\A(?:` + line + `)\z`); err == nil {
			e.re = re
		}
		out = append(out, e)
	}
	return out
}

// matches is Salt's expr_match: a shell glob (which includes equality), then
// a regular expression that must match the whole id.
func (e signExpr) matches(id string) bool {
	return targets.MatchGlob(e.text, id) || (e.re != nil && e.re.MatchString(id))
}
