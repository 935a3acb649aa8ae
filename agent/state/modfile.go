package state

// file.managed, file.absent, file.symlink: salt/states/file.py and the
// parts of salt/modules/file.py they call (check_managed_changes,
// check_file_meta, get_managed, manage_file, check_perms), with Salt's
// comments and changes keys.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/halite-fleet/halite/state"
)

func init() {
	Register("file.managed", Mod{Run: fileManaged, Doc: "Manage a given file: its content (source salt://, contents), owner and mode."})
	Register("file.absent", Mod{Run: fileAbsent, Doc: "Make sure that the named file or directory is absent."})
	Register("file.symlink", Mod{Run: fileSymlink, Doc: "Create a symbolic link (symlink, soft link)."})
}

// testNote ends file.managed's test=True comment (salt/states/file.py).
const testNote = "\nNote: No changes made, actual changes may\nbe different due to other states."

// managedSource is the content file.managed wants, found from source or
// contents.
type managedSource struct {
	url  string // the source that was used ("" for contents)
	data []byte
	have bool // there is content to manage (replace)
}

// resolveSource is file.source_list + file.get_managed for the sources a
// chunk can carry: salt:// (inlined by the master), local paths and
// file://. It returns Salt's comment on failure.
func resolveSource(c state.Chunk, src any, sourceHash string) (managedSource, string) {
	files, missing := inlinedFiles(c)
	tooLarge := tooLargeFiles(c)
	env := chunkEnv(c)
	type cand struct{ url, hash string }
	var cands []cand
	isList := false
	switch s := src.(type) {
	case []any:
		isList = true
		for _, it := range s {
			switch x := it.(type) {
			case string:
				cands = append(cands, cand{x, sourceHash})
			case map[string]any:
				if len(x) != 1 {
					continue
				}
				for u, h := range x {
					hs := pyStr(h)
					if h == nil || hs == "" {
						hs = sourceHash
					}
					cands = append(cands, cand{u, hs})
				}
			}
		}
	default:
		cands = []cand{{pyStr(src), sourceHash}}
	}
	pick := -1
	for i, cd := range cands {
		if present(cd.url, files, missing) || tooLarge[cd.url] {
			pick = i
			break
		}
	}
	if pick < 0 {
		if isList {
			return managedSource{}, "Unable to manage file: none of the specified sources were found"
		}
		pick = 0
	}
	cd := cands[pick]
	var data []byte
	switch {
	case strings.HasPrefix(cd.url, "salt://"):
		f, ok := files[cd.url]
		if !ok && tooLarge[cd.url] {
			return managedSource{}, tooLargeComment(cd.url)
		}
		if !ok {
			p, e := saltURL(cd.url)
			if e == "" {
				e = env
			}
			if missing[cd.url] || !ok {
				return managedSource{}, ("Source file " + cd.url + " not found in saltenv '" + e + "'")
			}
			_ = p
		}
		data = f.data
		if f.sha256 != "" && hashHex("sha256", data) != strings.ToLower(f.sha256) {
			return managedSource{}, ("Source file " + cd.url + " does not match the sha256 the master sent: it was damaged on the way")
		}
	case strings.HasPrefix(cd.url, "/") || strings.HasPrefix(cd.url, "file://"):
		p := strings.TrimPrefix(cd.url, "file://")
		b, err := os.ReadFile(p)
		if err != nil {
			return managedSource{}, ("Local file source " + p + " does not exist")
		}
		data = b
	default:
		return managedSource{}, ("Unable to manage file: source " + cd.url + ": only salt://, file:// and local sources are supported on this agent")
	}
	if cd.hash != "" {
		htype, hsum, err := sourceSum(cd.hash)
		if err != nil {
			return managedSource{}, err.Error()
		}
		if got := hashHex(htype, data); got != hsum {
			return managedSource{}, fmt.Sprintf("Specified %s checksum for %s (%s) does not match actual checksum (%s). "+
				"If the 'source_hash' value refers to a remote file with multiple possible matches, "+
				"then it may be necessary to set 'source_hash_name'.", htype, cd.url, hsum, got)
		}
	}
	return managedSource{url: cd.url, data: data, have: true}, ""
}

func present(u string, files map[string]inlined, missing map[string]bool) bool {
	switch {
	case strings.HasPrefix(u, "salt://"):
		_, ok := files[u]
		return ok && !missing[u]
	case strings.HasPrefix(u, "file://"):
		return lexists(strings.TrimPrefix(u, "file://"))
	case strings.HasPrefix(u, "/"):
		return lexists(u)
	}
	return false
}

// managedContents is the contents/contents_grains part of file.managed:
// each line of each part ends in a newline, contents_newline=False drops
// the last one.
func managedContents(c *Call, ret state.Ret) (data []byte, have bool, errRet *state.Ret) {
	ch := c.Chunk
	var use any
	switch {
	case ch["contents_pillar"] != nil:
		r := failS(ret, "contents_pillar is not supported by this agent yet: pillar reaches the device with issue 18")
		return nil, false, &r
	case ch["contents_grains"] != nil:
		delim := argStr(ch, "contents_delimiter")
		if delim == "" {
			delim = ":"
		}
		var parts []string
		for _, key := range strList(ch["contents_grains"]) {
			var grains map[string]any
			if c.Host != nil {
				grains = c.Host.Grains()
			}
			v, ok := lookupPath(grains, key, delim)
			if !ok {
				r := failS(ret, "Grain "+key+" does not exist")
				return nil, false, &r
			}
			parts = append(parts, pyStr(v))
		}
		use = strings.Join(parts, "\n")
	case ch["contents"] != nil:
		use = ch["contents"]
	default:
		return nil, false, nil
	}
	list := strList(use)
	if !argBool(ch, "allow_empty", true) && strings.Join(list, "") == "" {
		id := "'contents'"
		if ch["contents_grains"] != nil {
			id = "contents_grains " + pyStr(ch["contents_grains"])
		}
		r := failS(ret, id+" value would result in empty contents. Set allow_empty to True to allow the managed file to be empty.")
		return nil, false, &r
	}
	var b strings.Builder
	for _, part := range list {
		for _, l := range pySplitLines(part) {
			b.WriteString(strings.TrimRight(strings.TrimRight(l, "\n"), "\r"))
			b.WriteByte('\n')
		}
	}
	s := b.String()
	if !argBool(ch, "contents_newline", true) {
		s = strings.TrimRight(strings.TrimRight(s, "\n"), "\r")
	}
	return []byte(s), true, nil
}

// pySplitLines is str.splitlines() for \n, \r\n and \r.
func pySplitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return out
}

// lookupPath is grains.get's "a:b:c" traversal.
func lookupPath(m map[string]any, key, delim string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(key, delim) {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = mm[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func fileManaged(ctx context.Context, c *Call) state.Ret {
	return managed(ctx, c)
}

// managed is file.managed on c.Name with c.Chunk's arguments; file.line
// and file.recurse call it with chunks of their own, as Salt calls managed().
func managed(ctx context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	if name == "" {
		return failS(ret, "Destination file name is required")
	}
	modeArg, _ := arg(ch, "mode")
	keepMode := strings.EqualFold(pyStr(modeArg), "keep")
	mode := ""
	if modeArg != nil && !keepMode {
		mode = normMode(modeArg)
		if _, err := parseMode(mode); err != nil {
			return failS(ret, "Invalid mode "+pyStr(modeArg)+" for "+name)
		}
	}
	src, hasSource := arg(ch, "source")
	if hasSource && pyStr(src) == "" {
		hasSource = false
	}
	nContents := 0
	for _, k := range []string{"contents", "contents_pillar", "contents_grains"} {
		if ch[k] != nil {
			nContents++
		}
	}
	switch {
	case hasSource && nContents > 0:
		return failS(ret, "'source' cannot be used in combination with 'contents', 'contents_pillar', or 'contents_grains'")
	case keepMode && nContents > 0:
		return failS(ret, "Mode preservation cannot be used in combination with 'contents', 'contents_pillar', or 'contents_grains'")
	case nContents > 1:
		return failS(ret, "Only one of 'contents', 'contents_pillar', and 'contents_grains' is permitted")
	}
	replace := argBool(ch, "replace", true)
	if !hasSource && nContents == 0 && replace {
		replace = false
	}
	contents, haveContents, errRet := managedContents(c, ret)
	if errRet != nil {
		return *errRet
	}
	usr, grp := ownerArgs(ch)
	p := perms{usr: usr, grp: grp, mode: mode}
	if !argBool(ch, "create", true) && !isRegular(name) {
		ret.Comment = ("File " + name + " is not present and is not set for creation")
		return ret
	}
	if e := checkUser(usr, grp, c.Test); e != "" {
		return failS(ret, e)
	}
	if !filepath.IsAbs(name) {
		return failS(ret, "Specified file "+name+" is not an absolute path")
	}
	if isDir(name) {
		return failS(ret, "Specified target "+name+" is a directory")
	}
	if ctx, ok := ch["context"]; ok && ctx != nil {
		if _, isMap := ctx.(map[string]any); !isMap {
			return failS(ret, "Context must be formed as a dict")
		}
	}
	follow := argBool(ch, "follow_symlinks", true)
	if !replace && lexists(name) {
		lmode, err := checkPerms(name, &ret, p, c.Test, follow)
		if err != nil {
			return failS(ret, "Unable to manage file: "+strerror(err))
		}
		if c.Test {
			if mode != "" && mode != lmode {
				ret.Comment = ("File " + name + " will be updated with permissions " + mode + " from its current state of " + lmode)
			} else {
				ret.Comment = ("File " + name + " not updated")
			}
		} else if len(ret.Changes) == 0 && ret.Result == state.True {
			ret.Comment = ("File " + name + " exists with proper permissions. No changes made.")
		}
		return ret
	}
	var want managedSource
	if hasSource {
		fetched, msg := fetchSources(ctx, c, ch, sourceURLs(src, argStr(ch, "source_hash")))
		if msg != "" {
			return failS(ret, msg)
		}
		want, msg = resolveSource(fetched, src, argStr(fetched, "source_hash"))
		if msg != "" {
			return failS(ret, msg)
		}
	} else if haveContents {
		want = managedSource{data: contents, have: true}
	}
	showChanges := argBool(ch, "show_changes", true)
	if c.Test {
		changes, err := managedChanges(name, want, p, follow)
		if err != nil {
			return failS(ret, "Unable to manage file: "+strerror(err))
		}
		ret.Changes = changes
		if len(changes) > 0 {
			ret.Result = state.None
			ret.Comment = ("The file " + name + " is set to be changed") + testNote
			if _, ok := changes["diff"]; ok && !showChanges {
				changes["diff"] = "<show_changes=False>"
			}
		} else {
			ret.Comment = ("The file " + name + " is in the correct state")
		}
		return ret
	}
	return manageFile(c, ch, name, want, p, follow, showChanges, ret)
}

// managedChanges is check_file_meta: what file.managed would change.
func managedChanges(name string, want managedSource, p perms, follow bool) (map[string]any, error) {
	changes := map[string]any{}
	stat := os.Stat
	if !follow {
		stat = os.Lstat
	}
	fi, err := stat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			changes["newfile"] = name
			return changes, nil
		}
		return nil, err
	}
	if want.have && fi.Mode().IsRegular() {
		old, err := readIfDiffers(name, fi, want.data)
		if err != nil {
			return nil, err
		}
		if old != nil {
			if d := fileDiff(old, want.data, true); d != "" {
				changes["diff"] = d
			}
		}
	}
	du, dg, dm := p.differs(fi)
	if du {
		changes["user"] = p.usr.spec
	}
	if dg {
		changes["group"] = p.grp.spec
	}
	if dm {
		changes["mode"] = p.mode
	}
	return changes, nil
}

// readIfDiffers returns the file's content when it differs from want, nil
// when it is the same; a size that differs says so without reading the
// file (the common unchanged case reads it once).
func readIfDiffers(path string, fi fs.FileInfo, want []byte) ([]byte, error) {
	if fi.Size() == int64(len(want)) {
		old, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if string(old) == string(want) {
			return nil, nil
		}
		return old, nil
	}
	if fi.Size() > 64<<20 {
		// Do not read a huge file to diff it.
		return []byte("\x00"), nil
	}
	return os.ReadFile(path)
}

// manageFile is salt/modules/file.py manage_file.
func manageFile(c *Call, ch state.Chunk, name string, want managedSource, p perms, follow, showChanges bool, ret state.Ret) state.Ret {
	backup := argStr(ch, "backup")
	cache := ""
	if c.Host != nil {
		cache = c.Host.CacheDir()
	}
	if fi, err := os.Lstat(name); err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
		real := name
		if fi.Mode()&fs.ModeSymlink != 0 && follow {
			if r, err := filepath.EvalSymlinks(name); err == nil {
				real = r
			}
		}
		if want.have {
			rfi := fi
			if real != name {
				if rfi, err = os.Stat(real); err != nil {
					return failS(ret, "Unable to manage file: "+strerror(err))
				}
			}
			old, err := readIfDiffers(real, rfi, want.data)
			if err != nil {
				return failS(ret, "Unable to manage file: "+strerror(err))
			}
			if old != nil {
				if d := fileDiff(old, want.data, showChanges); d != "" {
					ret.Changes["diff"] = d
				}
				if err := writeAtomic(real, want.data, 0, backup, cache); err != nil {
					return failS(ret, "Failed to commit change: "+strerror(err))
				}
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 && !follow && want.have {
			if err := os.Remove(name); err != nil {
				return failS(ret, "Failed to commit change: "+strerror(err))
			}
			if err := writeAtomic(name, want.data, 0o666&^umask, backup, cache); err != nil {
				return failS(ret, "Failed to commit change: "+strerror(err))
			}
			ret.Changes["diff"] = "Replace symbolic link with regular file"
		}
		if _, err := checkPerms(name, &ret, p, false, follow); err != nil {
			return failS(ret, "Unable to manage file: "+strerror(err))
		}
		if len(ret.Changes) > 0 {
			if ret.Comment == "" || ret.Result == state.True {
				ret.Comment = ("File " + name + " updated")
			}
		} else if ret.Result == state.True {
			ret.Comment = ("File " + name + " is in the correct state")
		}
		return ret
	}
	// A new file.
	dir := filepath.Dir(name)
	if !isDir(dir) {
		if !argBool(ch, "makedirs", false) {
			return failS(ret, "Parent directory not present")
		}
		dm := normMode(ch["dir_mode"])
		if ch["dir_mode"] == nil {
			dm = dirModeFor(p.mode)
		}
		if _, err := makeDirs(dir, perms{usr: p.usr, grp: p.grp, mode: dm}); err != nil {
			return failS(ret, "Unable to manage file: "+strerror(err))
		}
	}
	// Salt's mode for the new file before check_perms: a cached source is
	// moved in from mkstemp (0600); touch() makes contents' file with the
	// umask (or 0600 when a mode will be set).
	initial := 0o666 &^ umask
	if want.url != "" || p.mode != "" {
		initial = 0o600
	}
	final := initial
	if p.mode != "" {
		final, _ = parseMode(p.mode)
	} else if want.url != "" {
		final = 0o666 &^ umask
	}
	data := want.data
	if err := writeAtomic(name, data, final, "", ""); err != nil {
		return failS(ret, "Unable to manage file: "+strerror(err))
	}
	switch {
	case want.have:
		ret.Changes["diff"] = "New file"
	default:
		ret.Changes["new"] = ("file " + name + " created")
		ret.Comment = "Empty file"
	}
	if final != initial {
		ret.Changes["mode"] = modeString(final)
	}
	pp := p
	pp.mode = "" // already set; only ownership is left
	if _, err := checkPerms(name, &ret, pp, false, true); err != nil {
		return failS(ret, "Unable to manage file: "+strerror(err))
	}
	if ret.Comment == "" {
		ret.Comment = "File " + name + " updated"
	}
	return ret
}

func fileAbsent(_ context.Context, c *Call) state.Ret {
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	if name == "" {
		return failS(ret, "Must provide name to file.absent")
	}
	if !filepath.IsAbs(name) {
		return failS(ret, "Specified file "+name+" is not an absolute path")
	}
	if name == "/" {
		return failS(ret, `Refusing to make "/" absent`)
	}
	fi, err := os.Lstat(name)
	if err != nil {
		ret.Comment = ("File " + name + " is not present")
		return ret
	}
	if fi.IsDir() {
		if c.Test {
			ret.Result = state.None
			ret.Changes["removed"] = name
			ret.Comment = ("Directory " + name + " is set for removal")
			return ret
		}
		if err := os.RemoveAll(name); err != nil {
			return failS(ret, "Failed to remove directory "+name)
		}
		ret.Comment = ("Removed directory " + name)
		ret.Changes["removed"] = name
		return ret
	}
	if c.Test {
		ret.Result = state.None
		ret.Changes["removed"] = name
		ret.Comment = ("File " + name + " is set for removal")
		return ret
	}
	if err := os.Remove(name); err != nil {
		return failS(ret, strerror(err))
	}
	ret.Comment = ("Removed file " + name)
	ret.Changes["removed"] = name
	return ret
}

// fileSymlink is file.symlink. Ownership is managed only when user or
// group is given (Salt defaults them to the minion's user; the agent leaves
// a link it makes owned by itself).
func fileSymlink(_ context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	if name == "" {
		return failS(ret, "Must provide name to file.symlink")
	}
	target := argStr(ch, "target")
	if target == "" {
		return failS(ret, "Must provide target to file.symlink")
	}
	force := argBool(ch, "force", false)
	usr, grp := ownerArgs(ch)
	var pre []string
	if usr.spec != "" && usr.id < 0 {
		pre = append(pre, ("User " + usr.spec + " does not exist"))
	}
	if grp.spec != "" && grp.id < 0 {
		pre = append(pre, ("Group " + grp.spec + " does not exist"))
	}
	if !filepath.IsAbs(name) {
		pre = append(pre, ("Specified file " + name + " is not an absolute path"))
	}
	if len(pre) > 0 {
		msg := strings.Join(pre, ". ")
		if len(pre) > 1 {
			msg += "."
		}
		return failS(ret, msg)
	}
	p := perms{usr: usr, grp: grp}
	owned := func() bool {
		fi, err := os.Lstat(name)
		if err != nil {
			return false
		}
		u, g, _ := p.differs(fi)
		return !u && !g
	}
	ownerStr := func() string {
		fi, err := os.Lstat(name)
		if err != nil {
			return ""
		}
		uid, gid := fileOwner(fi)
		un, gn := fmt.Sprint(uid), fmt.Sprint(gid)
		if o := lookupUser(un); o.name != "" {
			un = o.name
		}
		if o := lookupGroup(gn); o.name != "" {
			gn = o.name
		}
		return un + ":" + gn
	}
	// _symlink_check
	var tres state.Result
	var tcomment string
	tchanges := map[string]any{}
	switch {
	case !lexists(name):
		tres, tcomment = state.None, ("Symlink " + name + " to " + target + " is set for creation")
		tchanges["new"] = name
	case isLink(name):
		cur, _ := os.Readlink(name)
		if cur != target {
			tres, tcomment = state.None, ("Link " + name + " target is set to be changed to " + target)
			tchanges["change"] = name
		} else {
			tres, tcomment = state.True, ("The symlink " + name + " is present")
			if !owned() {
				tres = state.None
				tchanges["ownership"] = ownerStr()
				tcomment += (", but the ownership of the symlink would be changed from " + ownerStr() + " to " + usr.spec + ":" + grp.spec)
			}
		}
	case force:
		tres, tcomment = state.None, ("The file or directory " + name + " is set for removal to make way for a new symlink targeting " + target)
	default:
		tres, tcomment = state.False, ("File or directory exists where the symlink " + name + " should be. Did you mean to use force?")
	}
	dir := filepath.Dir(name)
	if !isDir(dir) {
		if argBool(ch, "makedirs", false) {
			if c.Test {
				tcomment += ("\n" + dir + " will be created")
			} else if _, err := makeDirs(dir, perms{usr: usr, grp: grp, mode: normMode(ch["mode"])}); err != nil {
				return failS(ret, "Unable to create "+dir+": "+strerror(err))
			}
		} else {
			if c.Test {
				tcomment += ("\nDirectory " + dir + " for symlink is not present")
			} else {
				return failS(ret, "Directory "+dir+" for symlink is not present")
			}
		}
	}
	if c.Test {
		ret.Result, ret.Comment, ret.Changes = tres, tcomment, tchanges
		return ret
	}
	if isLink(name) {
		cur, _ := os.Readlink(name)
		if filepath.Clean(cur) == filepath.Clean(target) {
			if owned() {
				ret.Comment = ("Symlink " + name + " is present and owned by " + ownerStr())
				return ret
			}
			if err := os.Lchown(name, usr.id, grp.id); err == nil && owned() {
				ret.Comment = ("Set ownership of symlink " + name + " to " + usr.spec + ":" + grp.spec)
				ret.Changes["ownership"] = usr.spec + ":" + grp.spec
			} else {
				ret.Result = state.False
				ret.Comment += ("Failed to set ownership of symlink " + name + " to " + usr.spec + ":" + grp.spec)
			}
			return ret
		}
	} else if lexists(name) {
		if bk := argStr(ch, "backupname"); bk != "" {
			if !filepath.IsAbs(bk) {
				if bk != filepath.Base(bk) {
					return failS(ret, "Backupname must be an absolute path or a file name: "+bk)
				}
				bk = filepath.Join(filepath.Dir(filepath.Clean(name)), bk)
			}
			if lexists(bk) {
				if !force {
					return failS(ret, "Symlink & backup dest exists and Force not set. "+name+" -> "+target+" - backup: "+bk)
				}
				_ = os.RemoveAll(bk)
			}
			if err := os.Rename(name, bk); err != nil {
				return failS(ret, "Unable to rename "+name+" to backup "+bk+" -> : "+strerror(err))
			}
		} else if !force {
			kind := "File system entry"
			if isRegular(name) {
				kind = "File"
			} else if isDir(name) {
				kind = "Directory"
			}
			return failS(ret, kind+" exists where the symlink "+name+" should be")
		}
	}
	if err := makeSymlink(target, name, force); err != nil {
		ret.Result = state.False
		ret.Comment = ("Unable to create new symlink " + name + " -> " + target + ": " + err.Error())
		return ret
	}
	ret.Comment = ("Created new symlink " + name + " -> " + target)
	ret.Changes["new"] = name
	if !owned() {
		if err := os.Lchown(name, usr.id, grp.id); err != nil || !owned() {
			ret.Result = state.False
			ret.Comment += (", but was unable to set ownership to " + usr.spec + ":" + grp.spec)
		}
	}
	return ret
}

// makeSymlink is salt/modules/file.py symlink: with force, what is at
// path goes first (Salt's test=True comment says a directory is removed to
// make way, so a directory is removed too, not only unlinked).
func makeSymlink(target, path string, force bool) error {
	if isLink(path) {
		if !force {
			return fmt.Errorf("Found existing symlink: %s", path)
		}
	} else if lexists(path) && !force {
		return fmt.Errorf("Existing path is not a symlink: %s", path)
	}
	if lexists(path) {
		// Make the new link beside it and rename over, so the path is
		// never missing when it was a link or a file.
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".halite-link")
		_ = os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			return fmt.Errorf("Could not create '%s'", path)
		}
		if isDir(path) && !isLink(path) {
			if err := os.RemoveAll(path); err != nil {
				_ = os.Remove(tmp)
				return err
			}
		}
		if err := os.Rename(tmp, path); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("Could not create '%s'", path)
		}
		return nil
	}
	if err := os.Symlink(target, path); err != nil {
		return fmt.Errorf("Could not create '%s'", path)
	}
	return nil
}
