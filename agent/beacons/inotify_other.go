//go:build !linux

package beacons

import "errors"

func init() {
	register("inotify", func(*opts, *env) (Beacon, error) {
		return nil, errors.New("the inotify beacon needs Linux")
	})
}
