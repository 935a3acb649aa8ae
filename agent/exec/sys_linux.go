package exec

import (
	"io/fs"
	"syscall"
)

// statFields are file.stats' numbers from the system's stat: times as
// float seconds, as Python's st_atime.
func statFields(fi fs.FileInfo) map[string]any {
	ret := map[string]any{"size": fi.Size(), "mtime": float64(fi.ModTime().UnixNano()) / 1e9}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ret
	}
	ret["inode"] = int64(st.Ino)
	ret["uid"] = int(st.Uid)
	ret["gid"] = int(st.Gid)
	as, an := st.Atim.Unix()
	cs, cn := st.Ctim.Unix()
	ret["atime"] = float64(as) + float64(an)/1e9
	ret["ctime"] = float64(cs) + float64(cn)/1e9
	return ret
}

// statfs returns a file system's available and total bytes (Python's
// statvfs f_bavail and f_blocks times f_bsize).
func statfs(path string) (avail, total int64, err error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return 0, 0, err
	}
	bs := int64(s.Bsize)
	return int64(s.Bavail) * bs, int64(s.Blocks) * bs, nil
}
