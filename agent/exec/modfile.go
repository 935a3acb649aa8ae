package exec

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// The everyday functions of Salt's file module (salt/modules/file.py):
// file.touch, file.file_exists, file.read, file.write and file.stats.

// maxRead bounds file.read, below the protocol's 4 MiB frame, so a return
// always fits and a large file cannot exhaust a small device.
const maxRead = 3 << 20

// modfileModule is the file functions of modfile.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modfileModule = module{name: "file", funcs: []function{
	{
		name:   "touch",
		params: []param{{name: "name", required: true}, {name: "atime"}, {name: "mtime"}},
		doc: `Create the file name if it is missing and set its access and
modification times (Unix seconds; now by default). Returns True.

CLI Example:

    halite '*' file.touch /var/log/emptyfile`,
		run: fileTouch,
	},
	{
		name:   "file_exists",
		params: []param{{name: "path", required: true}},
		doc: `Return True if path is a regular file (after symlinks), else False.

CLI Example:

    halite '*' file.file_exists /etc/passwd`,
		run: func(_ context.Context, c *call) (any, error) {
			p, err := c.path("path")
			if err != nil {
				return nil, err
			}
			fi, err := os.Stat(p)
			return err == nil && fi.Mode().IsRegular(), nil
		},
	},
	{
		name:   "read",
		params: []param{{name: "path", required: true}, {name: "binary", def: false}},
		doc: `Return the content of a file, as text or, with binary=True, bytes.
Files over 3 MiB are refused.

CLI Example:

    halite '*' file.read /etc/hostname`,
		run: fileRead,
	},
	{
		name:    "write",
		params:  []param{{name: "path", required: true}},
		varargs: true,
		varkw:   true,
		doc: `Write the arguments to the file path, one per line, replacing it.
args= gives the lines as a keyword (a string or a list), for lines with "=".

CLI Example:

    halite '*' file.write /etc/motd "With all thine offerings thou shalt offer salt."
    halite '*' file.write /etc/motd args="['cheese=spam','spam=cheese']"`,
		run: fileWrite,
	},
	{
		name:   "stats",
		params: []param{{name: "path", required: true}, {name: "hash_type"}, {name: "follow_symlinks", def: true}},
		doc: `Return a dict of a file's stats: inode, uid, gid, user, group, atime,
mtime, ctime, size, mode ("0644"), type (file, dir, link, char, block, pipe,
socket), target (the real path) and, with hash_type (md5, sha1, sha256,
sha512), sum.

CLI Example:

    halite '*' file.stats /etc/passwd`,
		run: fileStats,
	},
}}

func init() { register(modfileModule) }

// path returns a path parameter with ~ expanded (os.path.expanduser).
func (c *call) path(name string) (string, error) {
	p, err := c.need(name)
	if err != nil {
		return "", err
	}
	if strings.ContainsRune(p, 0) {
		return "", invalidf("%s must not contain a NUL byte", name)
	}
	return expandUser(p), nil
}

// expandUser is Python's os.path.expanduser for "~" and "~/..." (and
// "~user/..." through the user database); anything else is unchanged.
func expandUser(p string) string {
	if !strings.HasPrefix(p, "~") {
		return p
	}
	name, rest, _ := strings.Cut(p[1:], "/")
	var home string
	if name == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return p
		}
		home = h
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return p
		}
		home = u.HomeDir
	}
	if rest == "" && !strings.Contains(p, "/") {
		return home
	}
	return filepath.Join(home, rest)
}

// osError is Salt's CommandExecutionError(exc.strerror).
func osError(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		return commandf("%s", strings.ToUpper(s[:1])+s[1:])
	}
	return commandf("%v", err)
}

// unixTime converts touch's atime/mtime: digits (int or string) as Salt's
// str(x).isdigit(); anything else is Salt's "must be integers".
func unixTime(v any) (time.Time, bool, error) {
	if v == nil {
		return time.Time{}, false, nil
	}
	s, ok := toString(v)
	if ok && s != "" && strings.Trim(s, "0123456789") == "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			return time.Unix(n, 0), true, nil
		}
	}
	if f, ok := toFloat(v); ok && !isStringValue(v) {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)), true, nil
	}
	return time.Time{}, false, invalidf("atime and mtime must be integers")
}

func isStringValue(v any) bool { _, ok := v.(string); return ok }

func fileTouch(_ context.Context, c *call) (any, error) {
	name, err := c.path("name")
	if err != nil {
		return nil, err
	}
	at, aok, err := unixTime(c.arg("atime"))
	if err != nil {
		return nil, err
	}
	mt, mok, err := unixTime(c.arg("mtime"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(name); errors.Is(err, fs.ErrNotExist) {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
		if err != nil {
			return nil, osError(err)
		}
		f.Close()
	}
	now := time.Now()
	if !aok {
		at = now
	}
	if !mok {
		mt = now
	}
	if err := os.Chtimes(name, at, mt); err != nil {
		return nil, osError(err)
	}
	_, err = os.Stat(name)
	return err == nil, nil
}

func fileRead(_ context.Context, c *call) (any, error) {
	p, err := c.path("path")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, osError(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRead+1))
	if err != nil {
		return nil, osError(err)
	}
	if len(b) > maxRead {
		return nil, commandf("%s is larger than %d bytes; file.read refuses it", p, maxRead)
	}
	if c.arg("binary") == true {
		return b, nil
	}
	if !utf8.Valid(b) {
		return nil, commandf("%s is not UTF-8 text; read it with binary=True", p)
	}
	return string(b), nil
}

func fileWrite(_ context.Context, c *call) (any, error) {
	p, err := c.path("path")
	if err != nil {
		return nil, err
	}
	lines := c.rest
	if a, ok := c.kw["args"]; ok {
		if l, ok := a.([]any); ok {
			lines = l
		} else {
			lines = []any{a}
		}
	}
	var sb strings.Builder
	for _, l := range lines {
		sb.WriteString(pyStr(l))
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(p, []byte(sb.String()), 0o666); err != nil {
		return nil, osError(err)
	}
	return fmt.Sprintf("Wrote %d lines to \"%s\"", len(lines), p), nil
}

// hashes are get_hash's forms that Halite supports.
var hashes = map[string]func() hash.Hash{"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}

func fileStats(_ context.Context, c *call) (any, error) {
	p, err := c.path("path")
	if err != nil {
		return nil, err
	}
	var hashType string
	if h, ok, err := c.str("hash_type"); err != nil {
		return nil, err
	} else if ok && h != "" {
		if hashes[h] == nil {
			return nil, commandf("Hash %s is not supported", h)
		}
		hashType = h
	}
	var fi fs.FileInfo
	if _, serr := os.Stat(p); serr != nil {
		// A broken symlink still has an owner.
		fi, err = os.Lstat(p)
		if err != nil {
			return nil, commandf("Path not found: %s", p)
		}
	} else if isTrue(c.arg("follow_symlinks")) {
		fi, err = os.Stat(p)
	} else {
		fi, err = os.Lstat(p)
	}
	if err != nil {
		return nil, osError(err)
	}
	ret := statFields(fi)
	ret["user"] = uidToUser(ret["uid"])
	ret["group"] = gidToGroup(ret["gid"])
	ret["mode"] = normalizeMode(fi.Mode())
	ret["type"] = fileType(fi.Mode())
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		target, _ = filepath.Abs(p)
	} else {
		target, _ = filepath.Abs(target)
	}
	ret["target"] = target
	if hashType != "" {
		sum, err := hashFile(p, hashes[hashType]())
		if err != nil {
			return nil, osError(err)
		}
		ret["sum"] = sum
	}
	return ret, nil
}

func hashFile(p string, h hash.Hash) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// normalizeMode is salt.utils.files.normalize_mode(oct(S_IMODE(mode))):
// the permission bits, setuid, setgid and sticky included, as "0644".
func normalizeMode(m fs.FileMode) string {
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	s := strings.TrimLeft(strconv.FormatUint(uint64(bits), 8), "0")
	for len(s) < 4 {
		s = "0" + s
	}
	return s
}

func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "link"
	case m.IsDir():
		return "dir"
	case m&fs.ModeCharDevice != 0:
		return "char"
	case m&fs.ModeDevice != 0:
		return "block"
	case m&fs.ModeNamedPipe != 0:
		return "pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "file"
}

// uidToUser is Salt's uid_to_user: the name, or the uid when it has none.
func uidToUser(uid any) any {
	n, ok := uid.(int)
	if !ok {
		return uid
	}
	if u, err := user.LookupId(strconv.Itoa(n)); err == nil {
		return u.Username
	}
	return uid
}

// gidToGroup is Salt's gid_to_group: the name, or the gid when it has none.
func gidToGroup(gid any) any {
	n, ok := gid.(int)
	if !ok {
		return gid
	}
	if g, err := user.LookupGroupId(strconv.Itoa(n)); err == nil {
		return g.Name
	}
	return gid
}
