//go:build !linux

package exec

import (
	"errors"
	"io/fs"
)

func statFields(fi fs.FileInfo) map[string]any {
	return map[string]any{"size": fi.Size(), "mtime": float64(fi.ModTime().UnixNano()) / 1e9}
}

func statfs(string) (int64, int64, error) {
	return 0, 0, errors.New("statvfs is not supported on this platform")
}
