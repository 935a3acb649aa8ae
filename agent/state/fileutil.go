package state

// Helpers the file and archive state modules share: reading a chunk's
// arguments as Salt's Python would see them, Salt's mode and ownership
// checks (salt/modules/file.py check_perms), atomic replacement with
// Salt's minion backups (salt/utils/files.py copyfile, backup_minion), and
// the inlined salt:// sources (STATES.md: "__files__").

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/halite-fleet/halite/state"
)

// arg reads a chunk argument; absent and YAML null are both "not given",
// as a Python keyword argument left at None.
func arg(c state.Chunk, k string) (any, bool) {
	v, ok := c[k]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// pyStr is Python's str(v) for the scalars an SLS gives.
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return pyStr(float64(x))
	case nil:
		return "None"
	}
	return fmt.Sprint(v)
}

// argStr is a string argument (numbers as Python's str); "" when absent.
func argStr(c state.Chunk, k string) string {
	v, ok := arg(c, k)
	if !ok {
		return ""
	}
	return pyStr(v)
}

// truthy is Python's bool(v) for SLS values; strings "false"/"no"/"0"
// are false too, as a YAML 1.2 loader may leave yes/no as strings.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		switch strings.ToLower(x) {
		case "", "false", "no", "off", "0", "none":
			return false
		}
		return true
	case int:
		return x != 0
	case int64:
		return x != 0
	case uint64:
		return x != 0
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func argBool(c state.Chunk, k string, def bool) bool {
	v, ok := c[k]
	if !ok {
		return def
	}
	return truthy(v)
}

// argInt reads an integer argument; a bad one is an error naming it.
func argInt(c state.Chunk, k string, def int) (int, error) {
	v, ok := arg(c, k)
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case uint64:
		return int(x), nil
	case float64:
		return int(x), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s must be an integer, not %v", k, pyStr(v))
}

// strList is Salt's _validate_str_list: a string is a one-item list, a
// list's items are str()ed.
func strList(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case []byte:
		return []string{string(x)}
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, it := range x {
			out = append(out, pyStr(it))
		}
		return out
	}
	return []string{pyStr(v)}
}

// expandUser is os.path.expanduser for "~" and "~/..." and "~user/...".
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
	return filepath.Join(home, rest)
}

// normMode is salt.utils.files.normalize_mode: "644", 644, "0o644" and
// "00644" all become "0644"; "" when no mode is given.
func normMode(v any) string {
	if v == nil {
		return ""
	}
	s := pyStr(v)
	s = strings.ReplaceAll(s, "0o", "0")
	s = strings.Trim(s, `"'`)
	s = strings.TrimLeft(s, "0")
	for len(s) < 4 {
		s = "0" + s
	}
	return s
}

// parseMode turns a normalized mode into permission bits; a mode that is
// not octal (or has more than the 07777 bits) is an error naming it.
func parseMode(m string) (fs.FileMode, error) {
	n, err := strconv.ParseUint(m, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("invalid mode %q", m)
	}
	fm := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		fm |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		fm |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		fm |= fs.ModeSticky
	}
	return fm, nil
}

// modeString is Salt's normalize_mode(get_mode(path)): "0644", "4755".
func modeString(m fs.FileMode) string {
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
	return normMode(strconv.FormatUint(uint64(bits), 8))
}

// umask is the process's umask, read once from /proc (setting and
// resetting it to read it would race with other goroutines making files).
var umask = func() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(n)
				}
			}
		}
	}
	return 0o022
}()

// owner is a user or group as an SLS names it: a name or a numeric id.
type owner struct {
	spec string // as given; "" when not given
	id   int    // resolved id, -1 when not resolvable
	name string // resolved name ("" for an id without a name)
}

// ownerCache keeps found users and groups while /etc/passwd and
// /etc/group are unchanged (size and mtime): the pure-Go lookups read the
// whole file each time, and a highstate asks for the same few owners on
// every file. A name not found is looked up again next time (user.present
// may have just made it).
var ownerCache struct {
	sync.Mutex
	stamp map[string]string // file -> "size mtime"
	users map[string]owner
	grps  map[string]owner
}

func dbStamp(file string) string {
	fi, err := os.Stat(file)
	if err != nil {
		return ""
	}
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
}

// cachedOwner returns a cached lookup of spec in the table of file.
func cachedOwner(file string, table *map[string]owner, spec string, look func(string) owner) owner {
	st := dbStamp(file)
	ownerCache.Lock()
	if ownerCache.stamp == nil {
		ownerCache.stamp = map[string]string{}
	}
	if ownerCache.stamp[file] != st || *table == nil {
		ownerCache.stamp[file] = st
		*table = map[string]owner{}
	}
	o, ok := (*table)[spec]
	ownerCache.Unlock()
	if ok && st != "" {
		return o
	}
	o = look(spec)
	if o.id >= 0 && st != "" {
		ownerCache.Lock()
		if ownerCache.stamp[file] == st {
			(*table)[spec] = o
		}
		ownerCache.Unlock()
	}
	return o
}

func lookupUser(spec string) owner {
	if spec == "" {
		return owner{id: -1}
	}
	return cachedOwner("/etc/passwd", &ownerCache.users, spec, lookupUserNow)
}

func lookupGroup(spec string) owner {
	if spec == "" {
		return owner{id: -1}
	}
	return cachedOwner("/etc/group", &ownerCache.grps, spec, lookupGroupNow)
}

func lookupUserNow(spec string) owner {
	o := owner{spec: spec, id: -1}
	if u, err := user.Lookup(spec); err == nil {
		o.id, _ = strconv.Atoi(u.Uid)
		o.name = u.Username
		return o
	}
	if n, err := strconv.Atoi(spec); err == nil && n >= 0 {
		o.id = n
		if u, err := user.LookupId(spec); err == nil {
			o.name = u.Username
		}
	}
	return o
}

func lookupGroupNow(spec string) owner {
	o := owner{spec: spec, id: -1}
	if g, err := user.LookupGroup(spec); err == nil {
		o.id, _ = strconv.Atoi(g.Gid)
		o.name = g.Name
		return o
	}
	if n, err := strconv.Atoi(spec); err == nil && n >= 0 {
		o.id = n
		if g, err := user.LookupGroupId(spec); err == nil {
			o.name = g.Name
		}
	}
	return o
}

// ownerArgs reads user (or Salt's undocumented owner) and group.
func ownerArgs(c state.Chunk) (usr, grp owner) {
	u := argStr(c, "user")
	if u == "" {
		u = argStr(c, "owner")
	}
	return lookupUser(u), lookupGroup(argStr(c, "group"))
}

// checkUser is Salt's _check_user: "" when user and group exist (or under
// test=True, where Salt only logs it).
func checkUser(usr, grp owner, test bool) string {
	var err string
	if usr.spec != "" && usr.id < 0 {
		err += ("User " + usr.spec + " is not available ")
	}
	if grp.spec != "" && grp.id < 0 {
		err += ("Group " + grp.spec + " is not available")
	}
	if test {
		return ""
	}
	return err
}

// fileOwner is a path's owner and group ids.
func fileOwner(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// perms is what check_perms wants and what it found.
type perms struct {
	usr, grp owner
	mode     string // normalized, "" to leave alone
}

// differs says which of user, group and mode differ from fi; a user given
// by name matches its name or its uid, as Salt compares both.
func (p perms) differs(fi fs.FileInfo) (u, g, m bool) {
	uid, gid := fileOwner(fi)
	if p.usr.spec != "" && p.usr.id != uid {
		u = true
	}
	if p.grp.spec != "" && p.grp.id != gid {
		g = true
	}
	if p.mode != "" && fi.Mode()&fs.ModeSymlink == 0 && p.mode != modeString(fi.Mode()) {
		m = true
	}
	return
}

// checkPerms is salt/modules/file.py check_perms for one path: under test
// it records what would change, otherwise it changes owner and mode and
// records what changed ("user", "group", "mode" in changes, as Salt), and
// a failure to change fails the state with Salt's comment. It returns the
// mode found before (Salt's perms["lmode"]). follow=false works on a link
// itself (lchown; its mode is left alone, as Salt's).
func checkPerms(path string, ret *state.Ret, p perms, test, follow bool) (string, error) {
	stat := os.Stat
	if !follow {
		stat = os.Lstat
	}
	fi, err := stat(path)
	if err != nil {
		return "", err
	}
	lmode := modeString(fi.Mode())
	if ret.Changes == nil {
		ret.Changes = map[string]any{}
	}
	du, dg, dm := p.differs(fi)
	if !du && !dg && !dm {
		return lmode, nil
	}
	var comments []string
	if test {
		if du {
			ret.Changes["user"] = p.usr.spec
		}
		if dg {
			ret.Changes["group"] = p.grp.spec
		}
		if dm {
			ret.Changes["mode"] = p.mode
		}
		if len(ret.Changes) > 0 && ret.Result == state.True {
			ret.Result = state.None
		}
		return lmode, nil
	}
	if du || dg {
		uid, gid := -1, -1
		if du {
			uid = p.usr.id
		}
		if dg {
			gid = p.grp.id
		}
		chown := os.Chown
		if !follow {
			chown = os.Lchown
		}
		if uid >= -1 && gid >= -1 && (uid >= 0 || gid >= 0) {
			if err := chown(path, uid, gid); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
				// chown clears setuid/setgid: put the mode back, as Salt.
				_ = os.Chmod(path, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
			}
		}
	}
	if dm {
		if fm, err := parseMode(p.mode); err == nil {
			_ = os.Chmod(path, fm)
		}
	}
	post, err := stat(path)
	if err != nil {
		return lmode, err
	}
	pu, pg, pm := p.differs(post)
	if du {
		if pu {
			ret.Result = state.False
			comments = append(comments, "Failed to change user to "+p.usr.spec)
		} else {
			ret.Changes["user"] = p.usr.spec
		}
	}
	if dg {
		if pg {
			ret.Result = state.False
			comments = append(comments, "Failed to change group to "+p.grp.spec)
		} else {
			ret.Changes["group"] = p.grp.spec
		}
	}
	if dm {
		if pm {
			ret.Result = state.False
			comments = append(comments, "Failed to change mode to "+p.mode)
		} else {
			ret.Changes["mode"] = p.mode
		}
	}
	if len(comments) > 0 {
		if ret.Comment != "" {
			comments = append([]string{ret.Comment}, comments...)
		}
		ret.Comment = strings.Join(comments, "; ")
	}
	return lmode, nil
}

// dirModeFor is what manage_file gives directories it makes when only the
// file's mode is known: each non-zero digit gains the execute bit.
func dirModeFor(mode string) string {
	if mode == "" {
		return ""
	}
	d := []byte(mode)
	if len(d) > 3 {
		d = d[len(d)-3:]
	}
	for i, c := range d {
		if c != '0' {
			d[i] = byte('0' + ((c - '0') | 1))
		}
	}
	return normMode(string(d))
}

// makeDirs is Salt's file.makedirs_perms: every missing directory of dir
// is made with mode (0755 when "", then the umask as os.makedirs) and
// owner; it returns the directories it made, outermost first.
func makeDirs(dir string, p perms) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return nil, fmt.Errorf("%s exists and is not a directory", d)
			}
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, 0o777&^umask); err != nil && !errors.Is(err, fs.ErrExist) {
			return made, err
		}
		made = append(made, d)
		if p.mode != "" {
			if fm, err := parseMode(p.mode); err == nil {
				if err := os.Chmod(d, fm); err != nil {
					return made, err
				}
			}
		}
		if p.usr.id >= 0 || p.grp.id >= 0 {
			if err := os.Chown(d, p.usr.id, p.grp.id); err != nil {
				return made, err
			}
		}
	}
	return made, nil
}

// writeAtomic replaces path with data: a temporary file in the same
// directory is written and synced, takes the old file's owner and mode
// (or newMode for a new file), and is renamed over path, so a reader sees
// the old content or the new, never part of it. backup "minion" (or
// "both") first keeps the old file under cacheDir/file_backup as Salt's
// backup_minion names it.
func writeAtomic(path string, data []byte, newMode fs.FileMode, backup, cacheDir string) error {
	dir, base := filepath.Split(path)
	old, oldErr := os.Stat(path)
	if oldErr == nil && (backup == "minion" || backup == "both") && cacheDir != "" {
		if err := backupMinion(path, old, filepath.Join(cacheDir, "file_backup")); err != nil {
			return fmt.Errorf("back up %s: %w", path, err)
		}
	}
	f, err := os.CreateTemp(dir, "."+base+".halite-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	mode := newMode
	if oldErr == nil {
		mode = old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		uid, gid := fileOwner(old)
		if uid >= 0 {
			_ = f.Chown(uid, gid)
		}
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// backupMinion is salt/utils/files.py backup_minion: the old file goes to
// <bkroot>/<its dir without the leading />/<name>_<Tue_Nov_24_04:23:02_>
// <microseconds>_<year>, with its owner and mode.
func backupMinion(path string, fi fs.FileInfo, bkroot string) error {
	dname, bname := filepath.Split(filepath.Clean(path))
	now := time.Now()
	stamp := now.Format("Mon_Jan_02_15:04:05_2006")
	msecs := strconv.FormatInt(now.UnixMicro(), 10)
	if len(msecs) > 6 {
		msecs = msecs[len(msecs)-6:]
	}
	stamp = stamp[:len(stamp)-4] + msecs + "_" + stamp[len(stamp)-4:]
	bk := filepath.Join(bkroot, strings.TrimPrefix(dname, "/"), bname+"_"+stamp)
	if err := os.MkdirAll(filepath.Dir(bk), 0o700); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(bk, data, 0o600); err != nil {
		return err
	}
	uid, gid := fileOwner(fi)
	if uid >= 0 {
		_ = os.Chown(bk, uid, gid)
	}
	return os.Chmod(bk, fi.Mode().Perm())
}

// hashes are Salt's HASHES: type by name and hex length.
var hashes = map[string]struct {
	n   int
	new func() hash.Hash
}{
	"sha512": {128, sha512.New},
	"sha384": {96, sha512.New384},
	"sha256": {64, sha256.New},
	"sha224": {56, sha256.New224},
	"sha1":   {40, sha1.New},
	"md5":    {32, md5.New},
}

var hashByLen = map[int]string{128: "sha512", 96: "sha384", 64: "sha256", 56: "sha224", 40: "sha1", 32: "md5"}

// hashTypesDoc is Salt's list "md5 (32), sha1 (40), ..." by length.
const hashTypesDoc = "md5 (32), sha1 (40), sha224 (56), sha256 (64), sha384 (96), sha512 (128)"

// sourceSum is Salt's get_source_sum for a hash expression: "hex" (type by
// length) or "type=hex". Hash files (a path or URL) are not supported on
// the agent; Salt's messages otherwise.
func sourceSum(sh string) (htype, hsum string, err error) {
	invalid := fmt.Errorf("Source hash %s format is invalid. The supported formats are: "+
		"1) a hash, 2) an expression in the format <hash_type>=<hash>, or "+
		"3) either a path to a local file containing hashes, or a URI of "+
		"a remote hash file. Supported protocols for remote hash files "+
		"are: salt, file, http, https, ftp, swift, s3. The hash may also not be of a valid length, the "+
		"following are supported hash types and lengths: %s.", sh, hashTypesDoc)
	if strings.HasPrefix(sh, "/") || strings.Contains(sh, "://") {
		return "", "", fmt.Errorf("source_hash %s: hash files are not supported on this agent; give the hash itself (<hash_type>=<hash>)", sh)
	}
	t, h, ok := strings.Cut(sh, "=")
	if !ok {
		h = sh
		if h == "" || strings.Trim(strings.ToLower(h), "0123456789abcdef") != "" {
			return "", "", invalid
		}
		t, ok = hashByLen[len(h)]
		if !ok {
			return "", "", invalid
		}
		return t, strings.ToLower(h), nil
	}
	t, h = strings.TrimSpace(t), strings.TrimSpace(h)
	ht, ok := hashes[t]
	if !ok {
		return "", "", fmt.Errorf("Invalid hash type '%s'. Supported hash types are: sha512, sha384, sha256, sha224, sha1, md5. "+
			"Either remove the hash type and simply use '%s' as the source_hash, or change the hash type to a supported type.", t, h)
	}
	if _, ok := hashByLen[len(h)]; !ok {
		return "", "", invalid
	}
	if len(h) != ht.n {
		return "", "", fmt.Errorf("Invalid length (%d) for hash type '%s'. Either remove the hash type and simply use '%s' as the source_hash, or change the hash type to '%s'",
			len(h), t, h, hashByLen[len(h)])
	}
	return t, strings.ToLower(h), nil
}

func hashHex(htype string, data []byte) string {
	h := hashes[htype].new()
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// isText is salt.utils.files.is_text on the first 512 bytes.
func isText(b []byte) bool {
	if len(b) > 512 {
		b = b[:512]
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	if len(b) == 0 || utf8.Valid(b) {
		return true
	}
	nontext := 0
	for _, c := range b {
		if (c < 32 || c > 126) && !strings.ContainsRune("\n\r\t\f\b", rune(c)) {
			nontext++
		}
	}
	return float64(nontext)/float64(len(b)) <= 0.30
}

// fileDiff is Salt's get_diff of two contents: "" when equal, a note for
// binary files, "<show_changes=False>", or the unified diff without file
// names.
func fileDiff(old, new []byte, showChanges bool) string {
	if bytes.Equal(old, new) {
		return ""
	}
	if !showChanges {
		return "<show_changes=False>"
	}
	ob, nb := !isText(old), !isText(new)
	switch {
	case ob && nb:
		return "Replace binary file"
	case ob:
		return "Replace binary file with text file"
	case nb:
		return "Replace text file with binary file"
	}
	return strings.Join(unifiedDiff(splitLinesKeep(string(old)), splitLinesKeep(string(new))), "")
}

// inlined is one salt:// file the master put in the chunk.
type inlined struct {
	data   []byte
	sha256 string
}

// inlinedFiles reads the chunk's "__files__" and "__files_missing__".
func inlinedFiles(c state.Chunk) (map[string]inlined, map[string]bool) {
	files := map[string]inlined{}
	if m, ok := c["__files__"].(map[string]any); ok {
		for url, v := range m {
			e, ok := v.(map[string]any)
			if !ok {
				continue
			}
			var f inlined
			switch d := e["data"].(type) {
			case []byte:
				f.data = d
			case string:
				f.data = []byte(d)
			default:
				continue
			}
			f.sha256, _ = e["sha256"].(string)
			files[url] = f
		}
	}
	missing := map[string]bool{}
	for _, u := range strList(c["__files_missing__"]) {
		missing[u] = true
	}
	return files, missing
}

// saltURL splits "salt://path?saltenv=env" as salt.utils.url.parse.
func saltURL(u string) (path, env string) {
	p := strings.TrimPrefix(u, "salt://")
	if q, e, ok := strings.Cut(p, "?"); ok {
		p = q
		for _, kv := range strings.Split(e, "&") {
			if v, ok := strings.CutPrefix(kv, "saltenv="); ok {
				env = v
			}
		}
	}
	return p, env
}

// chunkEnv is the chunk's saltenv, "base" by default.
func chunkEnv(c state.Chunk) string {
	if e := c.Env(); e != "" {
		return e
	}
	if e := argStr(c, "saltenv"); e != "" {
		return e
	}
	return "base"
}

// lexists is os.path.lexists.
func lexists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isRegular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func isLink(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// strerror is the message Salt shows for an OSError: "[Errno 2] No such
// file or directory: '/x'" becomes Go's text without the operation.
func strerror(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Old + " -> " + le.New + ": " + le.Err.Error()
	}
	return err.Error()
}

// failS is Salt's _error: Result False with the comment. Messages are
// built by concatenation, not fmt: each fmt call site costs code on the
// agent.
func failS(ret state.Ret, msg string) state.Ret {
	ret.Result = state.False
	ret.Comment = msg
	return ret
}
