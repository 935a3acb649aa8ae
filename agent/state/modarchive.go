package state

// archive.extracted: salt/states/archive.py extracted, with the listing of
// salt/modules/archive.py list_ (dirs, files, links, top_level_*). Tar
// (plain, gzip) and zip are read in Go by the small readers in
// modarchive_tar.go and modarchive_zip.go (archive/tar and archive/zip
// would cost about 190 KB on the armv7 agent). An archive is hostile
// input: every member is checked before anything is written, and one that
// would land outside the target (absolute, "..", a link pointing out, a
// path through a symlink) refuses the whole archive with a comment naming
// it.

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/state"
)

func init() {
	Register("archive.extracted", Mod{Run: archiveExtracted, Doc: "Ensure that an archive is extracted to a specific directory."})
}

// Bounds on what one archive may make on the device (a small archive can
// inflate a thousandfold).
const (
	maxArchiveBytes   = 256 << 20
	maxArchiveMembers = 100000
)

// fsMode is a tar or zip mode's permission bits.
func fsMode(m int64) fs.FileMode { return fs.FileMode(m & 0o777) }

// member is one archive entry, by its cleaned relative name.
type member struct {
	name     string // cleaned, relative, "/"-separated, no trailing "/"
	raw      string // as the archive names it
	kind     byte   // 'd', 'f', 'l'
	linkname string
	mode     fs.FileMode
	mtime    time.Time
	open     func() (io.Reader, error)
}

// guessArchiveType is salt.utils.files.guess_archive_type.
func guessArchiveType(name string) string {
	n := strings.ToLower(name)
	for _, e := range []string{"tar", "tar.gz", "tgz", "tar.bz2", "tbz2", "tbz", "tar.xz", "txz", "tar.lzma", "tlz"} {
		if strings.HasSuffix(n, "."+e) {
			return "tar"
		}
	}
	for _, e := range []string{"zip", "rar"} {
		if strings.HasSuffix(n, "."+e) {
			return e
		}
	}
	return ""
}

// readArchive lists the members of data; strip drops leading path
// components as tar --strip-components.
func readArchive(data []byte, format string, strip int) ([]member, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("the archive is empty")
	}
	var ms []member
	add := func(m member) error {
		if len(ms) >= maxArchiveMembers {
			return fmt.Errorf("the archive has more than %d members", maxArchiveMembers)
		}
		if strip > 0 {
			parts := strings.SplitN(strings.TrimPrefix(m.raw, "./"), "/", strip+1)
			if len(parts) <= strip || parts[strip] == "" {
				return nil
			}
			m.raw = parts[strip]
		}
		ms = append(ms, m)
		return nil
	}
	switch format {
	case "zip":
		zs, err := readZip(data)
		if err != nil {
			return nil, err
		}
		for _, m := range zs {
			if err := add(m); err != nil {
				return nil, err
			}
		}
	case "tar":
		var r io.Reader = bytes.NewReader(data)
		switch {
		case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
			gz, err := gzip.NewReader(r)
			if err != nil {
				return nil, fmt.Errorf("unable to read the gzip stream: %w", err)
			}
			r = gz
		case bytes.HasPrefix(data, []byte("BZh")):
			return nil, fmt.Errorf("bzip2-compressed tar archives are not supported on this agent (gzip is)")
		case bytes.HasPrefix(data, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
			return nil, fmt.Errorf("xz-compressed tar archives are not supported on this agent (gzip and bzip2 are)")
		}
		if err := readTar(r, add); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unsupported archive format %s", format)
	}
	return ms, nil
}

// checkMembers cleans member names and refuses those that would land
// outside the target: absolute names, ".." components, links whose
// target resolves outside.
func checkMembers(ms []member) ([]member, []string) {
	var bad []string
	out := ms[:0]
	for _, m := range ms {
		raw := m.raw
		if strings.ContainsRune(raw, 0) {
			bad = append(bad, fmt.Sprintf("%q has a NUL byte", raw))
			continue
		}
		if strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, `\`) || filepath.VolumeName(raw) != "" {
			bad = append(bad, ("'" + raw + "' is an absolute path"))
			continue
		}
		if strings.Contains("/"+strings.ReplaceAll(raw, `\`, "/")+"/", "/../") {
			bad = append(bad, ("'" + raw + "' climbs out with '..'"))
			continue
		}
		n := path.Clean(raw)
		if n == "." || n == "" {
			continue
		}
		m.name = n
		out = append(out, m)
	}
	links := map[string]string{}
	for _, m := range out {
		if m.kind == 'l' {
			links[m.name] = m.linkname
		}
	}
	kept := out[:0]
	for _, m := range out {
		if m.kind == 'l' {
			if _, ok := resolveInside(links, path.Dir(m.name), m.linkname); !ok {
				bad = append(bad, ("'" + m.raw + "' is a symlink to '" + m.linkname + "', outside the target"))
				continue
			}
		}
		kept = append(kept, m)
	}
	return kept, bad
}

// resolveInside resolves target from dir (both relative to the target
// directory) through the archive's own links, as the kernel would after
// extraction; false when it leaves the target directory at any step, is
// absolute, or loops.
func resolveInside(links map[string]string, dir, target string) ([]string, bool) {
	hops := 0
	var walk func(cur []string, target string) ([]string, bool)
	walk = func(cur []string, target string) ([]string, bool) {
		if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
			return nil, false
		}
		for _, c := range strings.Split(target, "/") {
			switch c {
			case "", ".":
				continue
			case "..":
				if len(cur) == 0 {
					return nil, false
				}
				cur = cur[:len(cur)-1]
				continue
			}
			cur = append(cur, c)
			if t, ok := links[strings.Join(cur, "/")]; ok {
				hops++
				if hops > 40 {
					return nil, false
				}
				var ok bool
				cur, ok = walk(append([]string(nil), cur[:len(cur)-1]...), t)
				if !ok {
					return nil, false
				}
			}
		}
		return cur, true
	}
	var start []string
	if dir != "." && dir != "" {
		start = strings.Split(dir, "/")
	}
	return walk(start, target)
}

// listing is archive.list(verbose=True): dirs end in "/".
type listing struct {
	dirs, files, links          []string
	topDirs, topFiles, topLinks []string
}

func listOf(ms []member) listing {
	var l listing
	for _, m := range ms {
		switch m.kind {
		case 'd':
			l.dirs = append(l.dirs, m.name+"/")
		case 'l':
			l.links = append(l.links, m.name)
		default:
			l.files = append(l.files, m.name)
		}
	}
	sort.Strings(l.dirs)
	sort.Strings(l.files)
	sort.Strings(l.links)
	for _, d := range l.dirs {
		if strings.Count(d, "/") == 1 {
			l.topDirs = append(l.topDirs, d)
		}
	}
	// Salt's common_prefix: a top-level directory only implied by the
	// members under it.
	if len(l.dirs) > 0 {
		cp := l.dirs[0]
		for _, d := range l.dirs[1:] {
			for !strings.HasPrefix(d, cp) {
				cp = cp[:len(cp)-1]
			}
		}
		if strings.Contains(cp, "/") {
			cp = strings.SplitN(cp, "/", 2)[0] + "/"
			found := false
			for _, t := range l.topDirs {
				if t == cp {
					found = true
				}
			}
			if !found {
				l.topDirs = append(l.topDirs, cp)
			}
		}
	}
	for _, f := range l.files {
		if !strings.Contains(f, "/") {
			l.topFiles = append(l.topFiles, f)
		}
	}
	for _, f := range l.links {
		if !strings.Contains(f, "/") {
			l.topLinks = append(l.topLinks, f)
		}
	}
	return l
}

// throughLink says whether writing rel under root would pass through a
// symlink already on disk (an earlier member or the device's own): the
// first such path, or "".
func throughLink(root, rel string) string {
	parts := strings.Split(rel, "/")
	p := root
	for _, c := range parts[:len(parts)-1] {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil {
			return ""
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return p
		}
	}
	return ""
}

// extract writes the members under root (which exists); files are written
// to a temporary name and renamed into place.
func extract(root string, ms []member, usr, grp owner) error {
	var total int64
	for _, m := range ms {
		if l := throughLink(root, m.name); l != "" {
			return fmt.Errorf("member '%s' would be written through the symlink %s: refused", m.raw, l)
		}
		dst := filepath.Join(root, filepath.FromSlash(m.name))
		if !underDir(root, dst) {
			return fmt.Errorf("member '%s' escapes %s: refused", m.raw, root)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch m.kind {
		case 'd':
			fi, err := os.Lstat(dst)
			if err == nil && !fi.IsDir() {
				if err := os.Remove(dst); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			if m.mode != 0 {
				_ = os.Chmod(dst, m.mode|0o700)
			}
		case 'l':
			if fi, err := os.Lstat(dst); err == nil {
				if fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
					return fmt.Errorf("member '%s': a directory is in the way", m.raw)
				}
				if err := os.Remove(dst); err != nil {
					return err
				}
			}
			if err := os.Symlink(m.linkname, dst); err != nil {
				return err
			}
		default:
			r, err := m.open()
			if err != nil {
				return fmt.Errorf("member '%s': %w", m.raw, err)
			}
			f, err := os.CreateTemp(filepath.Dir(dst), ".halite-x-")
			if err != nil {
				return err
			}
			n, err := io.Copy(f, io.LimitReader(r, maxArchiveBytes-total+1))
			if c, ok := r.(io.Closer); ok {
				c.Close()
			}
			total += n
			if err == nil && total > maxArchiveBytes {
				err = fmt.Errorf("the archive would extract to more than %d bytes", maxArchiveBytes)
			}
			if err == nil {
				mode := m.mode
				if mode == 0 {
					mode = 0o644
				}
				err = f.Chmod(mode)
			}
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				if fi, lerr := os.Lstat(dst); lerr == nil && fi.IsDir() {
					err = fmt.Errorf("member '%s': a directory is in the way", m.raw)
				}
			}
			if err == nil {
				err = os.Rename(f.Name(), dst)
			}
			if err != nil {
				_ = os.Remove(f.Name())
				return err
			}
			if !m.mtime.IsZero() {
				_ = os.Chtimes(dst, m.mtime, m.mtime)
			}
		}
		if usr.id >= 0 || grp.id >= 0 {
			_ = os.Lchown(dst, usr.id, grp.id)
		}
	}
	return nil
}

var stripRe = regexp.MustCompile(`--strip(?:-components)?(?:\s+|=)["']?(\d+)["']?`)

func archiveExtracted(ctx context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := c.Name
	ret := state.Ret{Name: name, Result: state.False, Changes: map[string]any{}}
	if !filepath.IsAbs(name) {
		ret.Comment = (name + " is not an absolute path")
		return ret
	}
	name = strings.TrimRight(name, "/")
	if isRegular(name) {
		ret.Comment = (name + " exists and is not a directory")
		return ret
	}
	root := name
	name += "/"
	ifMissing := argStr(ch, "if_missing")
	if ifMissing != "" && !filepath.IsAbs(ifMissing) {
		ret.Comment = "Value for 'if_missing' is not an absolute path"
		return ret
	}
	if ifMissing != "" && lexists(ifMissing) {
		ret.Result = state.True
		ret.Comment = ("Path " + ifMissing + " exists")
		return ret
	}
	usr, grp := ownerArgs(ch)
	if usr.spec != "" && usr.id < 0 {
		ret.Comment = ("User " + usr.spec + " does not exist")
		return ret
	}
	if grp.spec != "" && grp.id < 0 {
		ret.Comment = ("Group " + grp.spec + " does not exist")
		return ret
	}
	src, ok := arg(ch, "source")
	if !ok {
		ret.Comment = `Invalid source ""`
		return ret
	}
	// The hash is checked below with archive.py's own message.
	fetched, msg := fetchSources(ctx, c, ch, sourceURLs(src))
	if msg != "" {
		ret.Comment = msg
		return ret
	}
	want, msg := resolveSource(fetched, src, "")
	if msg != "" {
		if p, ok := strings.CutPrefix(msg, "Local file source "); ok {
			msg = ("Source file '" + strings.TrimSuffix(p, " does not exist") + "' does not exist")
		}
		ret.Comment = msg
		return ret
	}
	source := want.url
	format := strings.ToLower(argStr(ch, "archive_format"))
	if format == "" {
		format = guessArchiveType(source)
		if format == "" {
			ret.Comment = "Could not guess archive_format from the value of the 'source' argument. " +
				"Please set this archive_format to one of the following: tar, rar, zip"
			return ret
		}
	}
	switch format {
	case "tar", "zip":
	case "rar":
		ret.Comment = "archive.unrar function not available, rar/unrar might not be installed on minion"
		return ret
	default:
		ret.Comment = fmt.Sprintf("Invalid archive_format '%s'. Either set it to a supported value (tar, rar, zip) "+
			"or remove this argument and the archive format will be guessed based on file extension.", format)
		return ret
	}
	if ch["password"] != nil {
		if format != "zip" {
			ret.Comment = "The 'password' argument is only supported for zip archives"
		} else {
			ret.Comment = "Password-protected zip archives are not supported on this agent"
		}
		return ret
	}
	strip := 0
	if opts := argStr(ch, "options"); opts != "" {
		if m := stripRe.FindStringSubmatch(opts); m != nil && format == "tar" {
			strip, _ = strconv.Atoi(m[1])
		}
		rest := strings.TrimSpace(stripRe.ReplaceAllString(opts, ""))
		for _, f := range strings.Fields(rest) {
			switch f {
			case "v", "-v", "--verbose", "x", "-x", "z", "-z", "xz", "-xz", "xzf", "j", "-j":
			default:
				ret.Comment = ("The option '" + f + "' is not supported on this agent, which extracts without the tar/unzip commands (supported: --strip-components)")
				return ret
			}
		}
	}
	if sh := argStr(ch, "source_hash"); sh != "" && !argBool(ch, "skip_verify", false) {
		htype, hsum, err := sourceSum(sh)
		if err != nil {
			ret.Comment = err.Error()
			return ret
		}
		if hashHex(htype, want.data) != hsum {
			ret.Comment = (source + " does not match the desired source_hash " + hsum)
			return ret
		}
	}
	ms, err := readArchive(want.data, format, strip)
	if errors.Is(err, errZipEncrypted) {
		ret.Comment = ("Archive " + source + " is password-protected, but no password was specified. Please set the 'password' argument.")
		return ret
	}
	if err != nil {
		ret.Comment = ("Unable to list contents of " + source + ": " + err.Error())
		return ret
	}
	ms, bad := checkMembers(ms)
	if len(bad) > 0 {
		ret.Comment = ("Archive " + source + " was not extracted: it has members that would be written outside " + name + ":\n")
		for i, b := range bad {
			if i == 20 {
				ret.Comment += fmt.Sprintf("\n- ... and %d more", len(bad)-20)
				break
			}
			ret.Comment += "\n- " + b
		}
		return ret
	}
	l := listOf(ms)
	if argBool(ch, "enforce_toplevel", true) && (len(l.topDirs) > 1 || len(l.topFiles) > 0) {
		ret.Comment = fmt.Sprintf("Archive does not have a single top-level directory. To allow this archive to be extracted, "+
			"set 'enforce_toplevel' to False. To avoid a '%s-bomb' it may also be advisable to set a top-level directory by "+
			"adding it to the 'name' value (for example, setting 'name' to %s instead of %s).", format, filepath.Join(name, "some_dir"), name)
		return ret
	}
	clean := argBool(ch, "clean", false)
	if clean && argBool(ch, "clean_parent", false) {
		ret.Comment = "Only one of 'clean' and 'clean_parent' can be set to True"
		return ret
	}
	cleanParent := argBool(ch, "clean_parent", false)
	needed := argBool(ch, "overwrite", false)
	contentsMissing := false
	var incorrect []string
	check := func(list []string, ok func(fs.FileMode) bool) {
		for _, p := range list {
			fi, err := os.Lstat(filepath.Join(root, strings.TrimSuffix(p, "/")))
			if err != nil {
				needed, contentsMissing = true, true
				continue
			}
			if !ok(fi.Mode()) {
				incorrect = append(incorrect, p)
			}
		}
	}
	check(l.dirs, func(m fs.FileMode) bool { return m.IsDir() })
	check(l.files, func(m fs.FileMode) bool { return m&fs.ModeSymlink == 0 && !m.IsDir() })
	check(l.links, func(m fs.FileMode) bool { return m&fs.ModeSymlink != 0 })
	if len(incorrect) > 0 {
		paths := "\n\n"
		for i, p := range incorrect {
			if i > 0 {
				paths += "\n"
			}
			paths += "- " + p
		}
		ret.Comment = ("The below paths (relative to " + name + ") exist, but are the incorrect type (file instead of directory, symlink instead of file, etc.).")
		if c.Test && clean {
			ret.Result = state.None
			ret.Comment += " Since the 'clean' option is enabled, the destination paths would be cleared and the archive would be extracted." + paths
			return ret
		}
		if c.Test && cleanParent {
			ret.Result = state.None
			ret.Comment += " Since the 'clean_parent' option is enabled, the destination parent directory would be removed first and then re-created and the archive would be extracted"
			return ret
		}
		if !clean {
			if !argBool(ch, "force", false) {
				ret.Comment += " To proceed with extraction, set 'force' to True. Note that this will remove these paths before extracting." + paths
				return ret
			}
			if !c.Test {
				for _, p := range incorrect {
					full := name + p // os.path.join(name, path): name ends in "/"
					if err := os.RemoveAll(strings.TrimSuffix(full, "/")); err != nil {
						ret.Comment = "One or more paths existed by were the incorrect type (i.e. file instead of directory or vice-versa), but could not be removed. The following errors were observed:\n\n- " + err.Error()
						return ret
					}
					appendRemoved(&ret, full)
				}
			}
			needed = true
		}
	}
	explain := func() {
		if contentsMissing {
			ret.Comment += ", due to absence of one or more files/dirs"
		}
	}
	trim := "False"
	if v, ok := arg(ch, "trim_output"); ok {
		trim = pyStr(v)
		if v == true {
			trim = "100"
		}
	}
	if needed {
		if c.Test {
			ret.Result = state.None
			ret.Comment = ("Archive " + source + " would be extracted to " + name)
			if clean {
				ret.Comment += ", after cleaning destination path(s)"
			}
			explain()
			return ret
		}
		if cleanParent {
			if err := os.RemoveAll(root); err != nil && !errors.Is(err, fs.ErrNotExist) {
				ret.Comment = ("Unable to remove the directory " + name + ". The following errors were observed:\n\n- " + err.Error())
				return ret
			}
			ret.Changes["removed"] = ("Directory " + name + " was removed prior to the extraction")
		}
		if clean {
			for _, p := range append(append([]string(nil), l.topDirs...), l.topFiles...) {
				full := name + p // os.path.join(name, path): name ends in "/"
				if err := os.RemoveAll(strings.TrimSuffix(full, "/")); err != nil {
					ret.Comment = "One or more paths could not be cleaned. The following errors were observed:\n\n- " + err.Error()
					return ret
				}
				appendRemoved(&ret, full)
			}
		}
		created := false
		if !isDir(root) {
			if _, err := makeDirs(root, perms{usr: usr}); err != nil {
				ret.Comment = ("Unable to create " + name + ": " + strerror(err))
				return ret
			}
			created = true
		}
		if err := extract(root, ms, usr, grp); err != nil {
			ret.Comment = ("Unable to extract " + source + " to " + name + ": " + err.Error())
			return ret
		}
		files := make([]any, 0, len(ms))
		for _, m := range ms {
			files = append(files, strings.TrimSuffix(m.raw, "/"))
		}
		if n, err := strconv.Atoi(trim); err == nil && n > 0 && n < len(files) {
			files = files[:n]
		}
		if len(files) == 0 {
			ret.Comment = ("No files were extracted from " + source)
			return ret
		}
		if created {
			ret.Changes["directories_created"] = []any{name}
		}
		ret.Changes["extracted_files"] = files
		ret.Comment = (source + " extracted to " + name)
		explain()
		ret.Comment += (". Output was trimmed to " + trim + " number of lines")
		ret.Result = state.True
		return ret
	}
	ret.Result = state.True
	ret.Comment = "All files in archive are already present"
	if usr.spec != "" || grp.spec != "" {
		if owned := ownershipDiffers(root, l, usr, grp); owned {
			if c.Test {
				ret.Result = state.None
				ret.Comment += ". Ownership would be updated on one or more files/directories."
				ret.Changes["updated ownership"] = true
			} else {
				for _, p := range append(append(append([]string(nil), l.topDirs...), l.topFiles...), l.topLinks...) {
					_ = filepath.WalkDir(filepath.Join(root, strings.TrimSuffix(p, "/")), func(p string, _ fs.DirEntry, err error) error {
						if err == nil {
							_ = os.Lchown(p, usr.id, grp.id)
						}
						return nil
					})
				}
				ret.Changes["updated ownership"] = true
			}
		}
	}
	return ret
}

func appendRemoved(ret *state.Ret, p string) {
	l, _ := ret.Changes["removed"].([]any)
	ret.Changes["removed"] = append(l, p)
}

// ownershipDiffers says whether anything the archive made under root is
// not owned by usr/grp.
func ownershipDiffers(root string, l listing, usr, grp owner) bool {
	for _, list := range [][]string{l.dirs, l.files, l.links} {
		for _, p := range list {
			fi, err := os.Lstat(filepath.Join(root, strings.TrimSuffix(p, "/")))
			if err != nil {
				continue
			}
			uid, gid := fileOwner(fi)
			if (usr.id >= 0 && uid != usr.id) || (grp.id >= 0 && gid != grp.id) {
				return true
			}
		}
	}
	return false
}
