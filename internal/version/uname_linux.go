package version

import (
	"os"
	"strings"
	"syscall"
)

func uname() utsname {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return utsname{machine: goarch()}
	}
	return utsname{release: cstring(u.Release[:]), machine: cstring(u.Machine[:])}
}

// osRelease reads /etc/os-release as Salt's linux_distribution does (the
// distro package): dist is "ID VERSION_ID VERSION_CODENAME", version
// "NAME VERSION_ID VERSION_CODENAME".
func osRelease() (dist, version string) {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "", ""
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok {
			kv[k] = strings.Trim(v, `"'`)
		}
	}
	join := func(ss ...string) string {
		var out []string
		for _, s := range ss {
			if s != "" {
				out = append(out, s)
			}
		}
		return strings.Join(out, " ")
	}
	return join(kv["ID"], kv["VERSION_ID"], kv["VERSION_CODENAME"]), join(kv["NAME"], kv["VERSION_ID"], kv["VERSION_CODENAME"])
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
