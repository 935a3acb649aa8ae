package state

// file.directory and file.recurse: salt/states/file.py directory,
// _check_directory, _check_dir_meta, _clean_dir, _gen_keep_files, recurse,
// _gen_recurse_managed_files.

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/state"
)

func init() {
	Register("file.directory", Mod{Run: fileDirectory, Doc: "Ensure that a named directory is present and has the right perms."})
	Register("file.recurse", Mod{Run: fileRecurse, Doc: "Recurse through a subdirectory on the master and copy said subdirectory over to the specified path."})
}

// walkEntry is one step of os.walk: a directory, its subdirectories and
// its other entries (names sorted; Python's order is the file system's).
type walkEntry struct {
	root        string
	dirs, files []string
}

// walk is salt's _depth_limited_walk over os.walk (links to directories
// are listed with the directories but not entered, as os.walk).
func walk(top string, maxDepth int) []walkEntry {
	var out []walkEntry
	var rec func(dir string, depth int)
	rec = func(dir string, depth int) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		var e walkEntry
		e.root = dir
		for _, de := range ents {
			p := filepath.Join(dir, de.Name())
			if isDir(p) {
				e.dirs = append(e.dirs, de.Name())
			} else {
				e.files = append(e.files, de.Name())
			}
		}
		sort.Strings(e.dirs)
		sort.Strings(e.files)
		descend := e.dirs
		if maxDepth >= 0 && depth >= maxDepth {
			descend = nil
		}
		out = append(out, e)
		for _, d := range descend {
			p := filepath.Join(dir, d)
			if !isLink(p) {
				rec(p, depth+1)
			}
		}
	}
	rec(top, 0)
	return out
}

// recurseSet is _get_recurse_set.
func recurseSet(v any) (map[string]bool, error) {
	if !truthy(v) {
		return map[string]bool{}, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(`"recurse" must be formed as a list of strings`)
	}
	set := map[string]bool{}
	valid := map[string]bool{"user": true, "group": true, "mode": true, "ignore_files": true, "ignore_dirs": true, "silent": true}
	for _, it := range l {
		s, ok := it.(string)
		if !ok || !valid[s] {
			return nil, fmt.Errorf(`Types for "recurse" limited to "user", "group", "mode", "ignore_files", "ignore_dirs", "silent".`)
		}
		set[s] = true
	}
	if set["ignore_files"] && set["ignore_dirs"] {
		return nil, fmt.Errorf(`Must not specify "recurse" options "ignore_files" and "ignore_dirs" at the same time.`)
	}
	return set, nil
}

// orderedChanges keeps changes in the order Salt's dict would list them
// (the test=True comment lists them in that order).
type orderedChanges struct {
	keys []string
	m    map[string]map[string]any
}

func (o *orderedChanges) set(path, k string, v any) {
	if o.m == nil {
		o.m = map[string]map[string]any{}
	}
	e, ok := o.m[path]
	if !ok {
		e = map[string]any{}
		o.m[path] = e
		o.keys = append(o.keys, path)
	}
	e[k] = v
}

// excluded is salt.utils.stringutils.check_include_exclude(path, None,
// exclude_pat) == False: the path matches exclude_pat ("E@regex" or a
// glob).
func excluded(rel, pat string) bool {
	if pat == "" {
		return false
	}
	if re, ok := strings.CutPrefix(pat, "E@"); ok {
		r, err := regexp.Compile(re)
		return err == nil && r.MatchString(rel)
	}
	return fnmatch(rel, pat)
}

// keepFromRequire is _gen_keep_files without the low state: the names of
// required file states that are paths (an ID that is not the path is not
// known to the module). A required directory keeps what is under it.
func keepFromRequire(name string, require any) map[string]bool {
	keep := map[string]bool{}
	l, _ := require.([]any)
	for _, it := range l {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		fn, ok := m["file"].(string)
		if !ok || !filepath.IsAbs(fn) {
			continue
		}
		keep[fn] = true
		if rel, err := filepath.Rel(name, fn); err == nil && !strings.HasPrefix(rel, "..") && isDir(fn) {
			for _, e := range walk(fn, -1) {
				keep[e.root] = true
				for _, n := range append(append([]string(nil), e.dirs...), e.files...) {
					keep[filepath.Join(e.root, n)] = true
				}
			}
		}
	}
	return keep
}

// realKeep is _find_keep_files: the kept paths and all their parents.
func realKeep(root string, keep map[string]bool) map[string]bool {
	out := map[string]bool{root: true}
	for fn := range keep {
		if !filepath.IsAbs(fn) {
			continue
		}
		fn = filepath.Clean(fn)
		out[fn] = true
		for fn != "/" {
			fn = filepath.Dir(fn)
			out[fn] = true
		}
	}
	return out
}

// cleanDir is _clean_dir: what under root is neither kept nor excluded is
// removed (not under test); it returns what was (or would be) removed.
func cleanDir(root string, keep map[string]bool, excludePat string, test bool) []string {
	real := realKeep(root, keep)
	var removed []string
	var visit func(dir string)
	visit = func(dir string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(dir, n)
			if !real[p] {
				rel, _ := filepath.Rel(root, p)
				if !excluded(rel, excludePat) {
					removed = append(removed, p)
					if !test {
						_ = os.RemoveAll(p)
					}
					continue
				}
			}
			if isDir(p) && !isLink(p) {
				visit(p)
			}
		}
	}
	visit(root)
	return removed
}

// dirMeta is _check_dir_meta: what would change on a directory.
func dirMeta(path string, p perms, follow bool) map[string]any {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(path)
	if err != nil {
		return map[string]any{"directory": "new"}
	}
	ch := map[string]any{}
	u, g, m := p.differs(fi)
	if u {
		ch["user"] = p.usr.spec
	}
	if g {
		ch["group"] = p.grp.spec
	}
	if m {
		ch["mode"] = p.mode
	}
	return ch
}

type dirArgs struct {
	name              string
	usr, grp          owner
	dirMode, fileMode string
	recurse           map[string]bool
	clean             bool
	keep              map[string]bool
	excludePat        string
	maxDepth          int
	follow            bool
}

// checkDirectory is _check_directory: Result, comment and changes of a
// file.directory under test.
func checkDirectory(a dirArgs) (state.Result, string, orderedChanges) {
	var ch orderedChanges
	var wl []walkEntry
	if len(a.recurse) > 0 || a.clean {
		wl = walk(a.name, a.maxDepth)
	}
	if len(a.recurse) > 0 {
		fp := perms{mode: a.fileMode}
		dp := perms{mode: a.dirMode}
		if a.recurse["user"] {
			fp.usr, dp.usr = a.usr, a.usr
		}
		if a.recurse["group"] {
			fp.grp, dp.grp = a.grp, a.grp
		}
		if !a.recurse["mode"] {
			fp.mode, dp.mode = "", ""
		}
		for _, e := range wl {
			if !a.recurse["ignore_files"] {
				for _, f := range e.files {
					p := filepath.Join(e.root, f)
					fi, err := os.Lstat(p)
					if a.follow {
						fi, err = os.Stat(p)
					}
					if err != nil {
						continue
					}
					u, g, m := fp.differs(fi)
					if u {
						ch.set(p, "user", fp.usr.spec)
					}
					if g {
						ch.set(p, "group", fp.grp.spec)
					}
					if m {
						ch.set(p, "mode", fp.mode)
					}
				}
			}
			if !a.recurse["ignore_dirs"] {
				for _, d := range e.dirs {
					p := filepath.Join(e.root, d)
					for k, v := range dirMeta(p, dp, a.follow) {
						ch.set(p, k, v)
					}
				}
			}
		}
	}
	if isDir(a.name) {
		for k, v := range dirMeta(a.name, perms{usr: a.usr, grp: a.grp, mode: a.dirMode}, a.follow) {
			ch.set(a.name, k, v)
		}
	}
	if a.clean {
		real := realKeep(a.name, a.keep)
		for _, e := range wl {
			for _, n := range append(append([]string(nil), e.files...), e.dirs...) {
				p := filepath.Join(e.root, n)
				rel, _ := filepath.Rel(a.name, p)
				if a.keep[p] || real[p] || excluded(rel, a.excludePat) {
					continue
				}
				ch.set(p, "removed", "Removed due to clean")
			}
		}
	}
	if !isDir(a.name) {
		ch.set(a.name, "directory", "new")
	}
	if len(ch.keys) > 0 {
		var b strings.Builder
		b.WriteString("The following files will be changed:\n")
		for _, k := range ch.keys {
			sub := ch.m[k]
			keys := make([]string, 0, len(sub))
			for kk := range sub {
				keys = append(keys, kk)
			}
			sort.Strings(keys)
			for _, kk := range keys {
				fmt.Fprintf(&b, "%s: %s - %s\n", k, kk, pyStr(sub[kk]))
			}
		}
		return state.None, b.String(), ch
	}
	return state.True, ("The directory " + a.name + " is in the correct state"), ch
}

func fileDirectory(_ context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	if name == "" {
		return failS(ret, "Must provide name to file.directory")
	}
	if strings.HasSuffix(name, "/") && name != "/" {
		name = strings.TrimRight(name, "/")
		if name == "" {
			name = "/"
		}
	}
	maxDepth := -1
	if _, ok := arg(ch, "max_depth"); ok {
		n, err := argInt(ch, "max_depth", -1)
		if err != nil {
			return failS(ret, err.Error())
		}
		maxDepth = n
	}
	clean := argBool(ch, "clean", false)
	if maxDepth >= 0 && clean {
		return failS(ret, "Cannot specify both max_depth and clean")
	}
	usr, grp := ownerArgs(ch)
	dm := ch["dir_mode"]
	if !truthy(dm) && ch["mode"] != nil {
		dm = ch["mode"]
	}
	fm := ch["file_mode"]
	if !truthy(fm) {
		fm = dm
	}
	a := dirArgs{
		name: name, usr: usr, grp: grp,
		dirMode: normMode(dm), fileMode: normMode(fm),
		clean: clean, excludePat: argStr(ch, "exclude_pat"),
		maxDepth: maxDepth, follow: argBool(ch, "follow_symlinks", false),
	}
	for _, m := range []string{a.dirMode, a.fileMode} {
		if m != "" {
			if _, err := parseMode(m); err != nil {
				return failS(ret, "Invalid mode "+m+" for "+name)
			}
		}
	}
	if e := checkUser(usr, grp, c.Test); e != "" {
		return failS(ret, e)
	}
	if !filepath.IsAbs(name) {
		return failS(ret, "Specified file "+name+" is not an absolute path")
	}
	force := argBool(ch, "force", false)
	if isRegular(name) && !isLink(name) || (!argBool(ch, "allow_symlink", true) && isLink(name)) || (force && isLink(name)) {
		if bk := argStr(ch, "backupname"); bk != "" {
			if lexists(bk) {
				if !force {
					return failS(ret, "File exists where the backup target "+bk+" should go")
				}
				if !c.Test {
					_ = os.RemoveAll(bk)
				}
			}
			if !c.Test {
				if err := os.Rename(name, bk); err != nil {
					return failS(ret, strerror(err))
				}
			}
		} else if force {
			kind := "File"
			if isLink(name) {
				kind = "Symlink"
			} else if !isRegular(name) {
				kind = "Directory"
			}
			if c.Test {
				ret.Changes["forced"] = kind + " would be forcibly replaced"
			} else {
				if err := os.Remove(name); err != nil {
					return failS(ret, strerror(err))
				}
				ret.Changes["forced"] = kind + " was forcibly replaced"
			}
		} else if isLink(name) {
			return failS(ret, "Specified location "+name+" exists and is a symlink")
		} else {
			return failS(ret, "Specified location "+name+" exists and is a file")
		}
	}
	rs, err := recurseSet(ch["recurse"])
	if err != nil {
		if c.Test {
			return failS(ret, err.Error())
		}
	}
	a.recurse = rs
	if clean {
		a.keep = keepFromRequire(name, ch["require"])
	}
	tres, tcomment, tch := checkDirectory(a)
	for _, k := range tch.keys {
		ret.Changes[k] = tch.m[k]
	}
	if c.Test {
		ret.Result, ret.Comment = tres, tcomment
		if err != nil {
			return failS(ret, err.Error())
		}
		return ret
	}
	dp := perms{usr: usr, grp: grp, mode: a.dirMode}
	if !isDir(name) {
		if !isDir(filepath.Dir(name)) {
			if !argBool(ch, "makedirs", false) {
				return failS(ret, "No directory to create "+name+" in")
			}
		}
		if _, err := makeDirs(name, dp); err != nil || !isDir(name) {
			return failS(ret, "Failed to create directory "+name)
		}
		ret.Changes[name] = map[string]any{"directory": "new"}
		return ret
	}
	childrenOnly := argBool(ch, "children_only", false)
	if !childrenOnly {
		if _, err := checkPerms(name, &ret, dp, false, a.follow); err != nil {
			return failS(ret, strerror(err))
		}
	}
	var errs []string
	if err != nil {
		ret.Result = state.False
		ret.Comment = err.Error()
	}
	if len(rs) > 0 {
		fu, fg := owner{id: -1}, owner{id: -1}
		if rs["user"] {
			if usr.spec == "" {
				ret.Result = state.False
				ret.Comment = "user not specified, but configured as a target for recursive ownership management"
			} else if usr.id < 0 {
				ret.Result = state.False
				ret.Comment = ("Failed to enforce ownership for user " + usr.spec + " (user does not exist)")
			}
			fu = usr
		}
		if rs["group"] {
			if grp.spec == "" {
				ret.Result = state.False
				ret.Comment = "group not specified, but configured as a target for recursive ownership management"
			} else if grp.id < 0 {
				ret.Result = state.False
				ret.Comment = ("Failed to enforce group ownership for group " + grp.spec)
			}
			fg = grp
		}
		fmode, dmode := a.fileMode, a.dirMode
		if !rs["mode"] {
			fmode, dmode = "", ""
		}
		if rs["silent"] {
			ret.Changes = map[string]any{"recursion": "Changes silenced"}
		}
		for _, e := range walk(name, maxDepth) {
			if !rs["ignore_files"] {
				for _, f := range e.files {
					if _, err := checkPerms(filepath.Join(e.root, f), &ret, perms{usr: fu, grp: fg, mode: fmode}, false, a.follow); err != nil && !os.IsNotExist(err) {
						errs = append(errs, strerror(err))
					}
				}
			}
			if !rs["ignore_dirs"] {
				for _, d := range e.dirs {
					if _, err := checkPerms(filepath.Join(e.root, d), &ret, perms{usr: fu, grp: fg, mode: dmode}, false, a.follow); err != nil && !os.IsNotExist(err) {
						errs = append(errs, strerror(err))
					}
				}
			}
		}
	}
	if clean {
		if removed := cleanDir(name, a.keep, a.excludePat, false); len(removed) > 0 {
			ret.Changes["removed"] = toAnyList(removed)
			ret.Comment = ("Files cleaned from directory " + name)
		}
	}
	if ret.Comment == "" {
		if childrenOnly {
			ret.Comment = ("Directory " + name + "/* updated")
		} else if len(ret.Changes) > 0 {
			ret.Comment = ("Directory " + name + " updated")
		}
	}
	if len(ret.Changes) == 0 && ret.Result == state.True {
		orig := ret.Comment
		ret.Comment = ("Directory " + name + " is in the correct state")
		if orig != "" {
			ret.Comment += "\n" + orig
		}
	}
	if len(errs) > 0 {
		ret.Result = state.False
		ret.Comment += "\n\nThe following errors were encountered:\n"
		for _, e := range errs {
			ret.Comment += "\n- " + e
		}
	}
	return ret
}

// fileRecurse is file.recurse over the files the master inlined for the
// source directory (STATES.md: "__files__" keyed by each file's salt://
// URL, "__dirs__" the directories under it).
func fileRecurse(ctx context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	if _, ok := ch["mode"]; ok {
		return failS(ret, "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'.")
	}
	usr, grp := ownerArgs(ch)
	dirMode := normMode(ch["dir_mode"])
	fileMode := normMode(ch["file_mode"])
	keepMode := strings.EqualFold(pyStr(ch["file_mode"]), "keep")
	if keepMode {
		fileMode = ""
	}
	if e := checkUser(usr, grp, c.Test); e != "" {
		return failS(ret, e)
	}
	if !filepath.IsAbs(name) {
		return failS(ret, "Specified file "+name+" is not an absolute path")
	}
	sources := strList(ch["source"])
	for i, s := range sources {
		sources[i] = strings.TrimRight(s, "/")
		if !strings.HasPrefix(s, "salt://") {
			return failS(ret, "Invalid source '"+s+"' (must be a salt:// URI)")
		}
	}
	if len(sources) == 0 {
		return failS(ret, "Invalid source '' (must be a salt:// URI)")
	}
	files := recurseFiles(ch)
	dirs := strList(ch["__dirs__"])
	env := chunkEnv(ch)
	// source_list over directories: the first source the master has.
	source := ""
	for _, s := range sources {
		if hasDir(s, files, dirs) {
			source = s
			break
		}
	}
	if source == "" {
		if len(sources) > 1 {
			return failS(ret, "Recurse failed: none of the specified sources were found")
		}
		p, e := saltURL(sources[0])
		if e == "" {
			e = env
		}
		return failS(ret, "The directory '"+p+"' does not exist on the salt fileserver in saltenv '"+e+"'")
	}
	if !isDir(name) {
		if lexists(name) {
			return failS(ret, "The path "+name+" exists and is not a directory")
		}
		if !c.Test {
			if _, err := makeDirs(name, perms{usr: usr, grp: grp, mode: dirMode}); err != nil {
				return failS(ret, "Unable to create "+name+": "+strerror(err))
			}
		}
	}
	var commentKeys []string
	comments := map[string][]string{}
	addComment := func(p string, cm ...string) {
		if _, ok := comments[p]; !ok {
			commentKeys = append(commentKeys, p)
		}
		comments[p] = append(comments[p], cm...)
	}
	merge := func(p string, r state.Ret) {
		if r.Result == state.False || ret.Result == state.True {
			ret.Result = r.Result
		}
		if r.Result != state.True && r.Comment != "" {
			addComment(p, r.Comment)
		}
		if len(r.Changes) > 0 {
			ret.Changes[p] = r.Changes
		}
	}
	maxDepth := -1
	if _, ok := arg(ch, "maxdepth"); ok {
		n, err := argInt(ch, "maxdepth", -1)
		if err != nil {
			return failS(ret, err.Error())
		}
		maxDepth = n
	}
	incl, excl := argStr(ch, "include_pat"), argStr(ch, "exclude_pat")
	srcPath, _ := saltURL(source)
	prefix := strings.TrimSuffix(srcPath, "/") + "/"
	keep := map[string]bool{}
	mdirs := map[string]bool{}
	type mfile struct{ dest, url string }
	var mfiles []mfile
	urls := make([]string, 0, len(files))
	for u := range files {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	for _, u := range urls {
		p, _ := saltURL(u)
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok || rel == "" {
			continue
		}
		if !validRelpath(rel, maxDepth) || !includeExclude(rel, incl, excl) {
			continue
		}
		dest := filepath.Join(name, filepath.FromSlash(rel))
		if !underDir(name, dest) {
			continue
		}
		keep[dest] = true
		mdirs[filepath.Dir(dest)] = true
		mfiles = append(mfiles, mfile{dest, u})
	}
	if argBool(ch, "include_empty", false) {
		for _, d := range dirs {
			p, _ := saltURL(d)
			rel, ok := strings.CutPrefix(strings.TrimSuffix(p, "/")+"/", prefix)
			rel = strings.TrimSuffix(rel, "/")
			if !ok || rel == "" || !validRelpath(rel, maxDepth) || !includeExclude(rel, incl, excl) {
				continue
			}
			dest := filepath.Join(name, filepath.FromSlash(rel))
			if !underDir(name, dest) {
				continue
			}
			mdirs[dest] = true
			keep[dest] = true
		}
	}
	clean := argBool(ch, "clean", false)
	dirList := make([]string, 0, len(mdirs))
	for d := range mdirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if filepath.Base(d) == ".." {
			continue
		}
		if clean && lexists(d) && !isDir(d) {
			if c.Test {
				merge(d, state.Ret{Result: state.None, Comment: ("Replacing " + d + " with a directory")})
				continue
			}
			_ = os.RemoveAll(d)
			merge(d, state.Ret{Result: state.True, Changes: map[string]any{"diff": "Replaced file with a directory"}})
		}
		sub := state.Chunk{"makedirs": true}
		if usr.spec != "" {
			sub["user"] = usr.spec
		}
		if grp.spec != "" {
			sub["group"] = grp.spec
		}
		if dirMode != "" {
			sub["dir_mode"] = dirMode
		}
		merge(d, fileDirectory(ctx, &Call{Chunk: sub, Name: d, Test: c.Test, Host: c.Host}))
	}
	for _, f := range mfiles {
		if clean && isDir(f.dest) && !isLink(f.dest) {
			if c.Test {
				merge(f.dest, state.Ret{Result: state.None, Comment: ("Replacing directory " + f.dest + " with a file")})
				continue
			}
			_ = os.RemoveAll(f.dest)
			merge(f.dest, state.Ret{Result: state.True, Changes: map[string]any{"diff": "Replaced directory with a new file"}})
		}
		sub := state.Chunk{
			"source":   f.url,
			"makedirs": true,
			"__env__":  env,
		}
		// The file as the master sent it: inline, by manifest (fetched
		// by file.managed), or too large for either.
		if e, ok := files[f.url]; ok && e != nil {
			sub["__files__"] = map[string]any{f.url: e}
		} else {
			sub["__files_too_large__"] = []any{f.url}
		}
		for _, k := range []string{"user", "group", "backup", "show_changes", "replace", "template"} {
			if v, ok := ch[k]; ok {
				sub[k] = v
			}
		}
		if fileMode != "" {
			sub["mode"] = fileMode
		}
		merge(f.dest, managed(ctx, &Call{Chunk: sub, Name: f.dest, Test: c.Test, Host: c.Host}))
	}
	if clean {
		for k := range keepFromRequire(name, ch["require"]) {
			keep[k] = true
		}
		if removed := cleanDir(name, keep, excl, c.Test); len(removed) > 0 {
			if c.Test {
				if ret.Result == state.True {
					ret.Result = state.None
				}
				addComment("removed", removed...)
			} else {
				ret.Changes["removed"] = toAnyList(removed)
			}
		}
	}
	var parts []string
	for _, k := range commentKeys {
		parts = append(parts, ("\n#### " + k + " ####\n" + strings.Join(comments[k], "\n")))
	}
	ret.Comment = strings.TrimSpace(strings.Join(parts, "\n"))
	if ret.Comment == "" {
		ret.Comment = ("Recursively updated " + name)
	}
	if len(ret.Changes) == 0 && ret.Result == state.True {
		ret.Comment = ("The directory " + name + " is in the correct state")
	}
	return ret
}

// recurseFiles is every file the master sent for file.recurse, by URL:
// its "__files__" entry (inline data, or a manifest to fetch), or nil for
// one in "__files_too_large__" (file.managed of it fails, saying so).
func recurseFiles(ch state.Chunk) map[string]map[string]any {
	out := map[string]map[string]any{}
	m, _ := ch["__files__"].(map[string]any)
	for u, v := range m {
		if e, ok := v.(map[string]any); ok && (e["data"] != nil || e["manifest"] != nil) {
			out[u] = e
		}
	}
	for u := range tooLargeFiles(ch) {
		if _, ok := out[u]; !ok {
			out[u] = nil
		}
	}
	return out
}

// hasDir says whether the master sent the source directory: a file under
// it or the directory itself in "__dirs__".
func hasDir[F any](src string, files map[string]F, dirs []string) bool {
	p, _ := saltURL(src)
	p = strings.TrimSuffix(p, "/")
	for _, d := range dirs {
		dp, _ := saltURL(d)
		dp = strings.TrimSuffix(dp, "/")
		if dp == p || strings.HasPrefix(dp, p+"/") {
			return true
		}
	}
	for u := range files {
		fp, _ := saltURL(u)
		if strings.HasPrefix(fp, p+"/") {
			return true
		}
	}
	return false
}

// validRelpath is _is_valid_relpath: no ".." component, depth at most
// maxDepth (-1: no limit).
func validRelpath(rel string, maxDepth int) bool {
	if strings.Contains("/"+rel+"/", "/../") {
		return false
	}
	if maxDepth >= 0 && strings.Count(strings.Trim(rel, "/"), "/") > maxDepth {
		return false
	}
	return true
}

// includeExclude is check_include_exclude(path, include_pat, exclude_pat).
func includeExclude(rel, incl, excl string) bool {
	if incl != "" {
		ok := false
		if re, isRe := strings.CutPrefix(incl, "E@"); isRe {
			r, err := regexp.Compile(re)
			ok = err == nil && r.MatchString(rel)
		} else {
			ok = fnmatch(rel, incl)
		}
		if !ok {
			return false
		}
	}
	return !excluded(rel, excl)
}

// underDir says whether p is dir or inside it, lexically (the master's
// file names are hostile input to the device: "../" must not escape).
func underDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !path.IsAbs(rel)
}
