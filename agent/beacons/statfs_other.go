//go:build !unix

package beacons

import "errors"

func diskPercent(string) (float64, error) { return 0, errors.New("disk usage needs a unix system") }
