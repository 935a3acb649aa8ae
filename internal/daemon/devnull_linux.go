package daemon

import (
	"os"
	"syscall"
)

// toDevNull points file descriptor fd at /dev/null.
func toDevNull(fd int) error {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	return syscall.Dup3(int(null.Fd()), fd, 0)
}
