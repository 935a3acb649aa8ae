package grains

import "syscall"

type utsname struct {
	release, version, machine, nodename string
}

// uname reads the kernel's identity. Utsname's fields are [65]int8 on some
// architectures and [65]uint8 on others (arm, ppc64, riscv64, s390x), hence
// the generic cstring.
func uname() (utsname, error) {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return utsname{}, err
	}
	return utsname{
		release:  cstring(u.Release[:]),
		version:  cstring(u.Version[:]),
		machine:  cstring(u.Machine[:]),
		nodename: cstring(u.Nodename[:]),
	}, nil
}

func cstring[T ~int8 | ~uint8](s []T) string {
	b := make([]byte, 0, len(s))
	for _, c := range s {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
