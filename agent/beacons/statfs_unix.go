//go:build unix

package beacons

import "golang.org/x/sys/unix"

// diskPercent is psutil's disk_usage().percent: used / (used + available).
func diskPercent(path string) (float64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	used := (uint64(st.Blocks) - uint64(st.Bfree)) * uint64(st.Bsize)
	avail := uint64(st.Bavail) * uint64(st.Bsize)
	if used+avail == 0 {
		return 0, nil
	}
	return round2(float64(used) / float64(used+avail) * 100), nil
}
