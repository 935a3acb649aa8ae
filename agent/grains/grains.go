package grains

import (
	"context"
	"net"
	"os"
	"os/user"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// fqdnTimeout bounds the name lookups behind the fqdn grain, so a device with
// a broken resolver still starts promptly.
const fqdnTimeout = 2 * time.Second

// Collect gathers the core grains of this host under Salt's names, then lays
// static (the config file's `grains:`) over them, key by key, as Salt does.
// It never fails: a grain it cannot read is left out and logged at debug level.
// The result is a fresh map that the caller owns.
func Collect(id string, static map[string]any, log *zap.Logger) map[string]any {
	if log == nil {
		log = zap.NewNop()
	}
	c := &collector{g: make(map[string]any, 64), log: log}
	c.g["id"] = id
	c.g["pid"] = os.Getpid()
	c.g["kernel"] = kernelName()
	c.platform()
	c.osRelease()
	c.cpu()
	c.memory()
	c.hostnames()
	c.network()
	c.machineID()
	c.hardware()
	c.process()
	for k, v := range static {
		c.g[k] = v
	}
	return c.g
}

// collector accumulates grains; each method adds what it can read.
type collector struct {
	g   map[string]any
	log *zap.Logger
}

// skip logs a grain that could not be read.
func (c *collector) skip(grain string, err error) {
	c.log.Debug("grain not collected", zap.String("grain", grain), zap.Error(err))
}

// readTrim reads a small text file and trims blanks and NULs around it.
func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.Trim(string(b), " \t\r\n\x00"), nil
}

// kernelName is Salt's kernel grain: platform.system().
func kernelName() string {
	switch runtime.GOOS {
	case "linux":
		return "Linux"
	case "darwin":
		return "Darwin"
	case "freebsd":
		return "FreeBSD"
	case "openbsd":
		return "OpenBSD"
	case "netbsd":
		return "NetBSD"
	case "windows":
		return "Windows"
	}
	return runtime.GOOS
}

// platform fills kernelrelease, kernelversion, cpuarch, osarch and nodename.
func (c *collector) platform() {
	u, err := uname()
	if err != nil {
		c.skip("kernelrelease", err)
		c.g["cpuarch"] = runtime.GOARCH
	} else {
		c.g["kernelrelease"] = u.release
		c.g["kernelversion"] = u.version
		c.g["cpuarch"] = u.machine
		if u.nodename != "" {
			c.g["nodename"] = u.nodename
		}
	}
}

// osNames maps an os-release ID to Salt's os grain.
var osNames = map[string]string{
	"debian": "Debian", "ubuntu": "Ubuntu", "raspbian": "Raspbian", "linuxmint": "Mint",
	"pop": "Pop", "devuan": "Devuan", "kali": "Kali", "centos": "CentOS", "rhel": "RedHat",
	"fedora": "Fedora", "rocky": "Rocky", "almalinux": "AlmaLinux", "ol": "OEL",
	"amzn": "Amazon", "cloudlinux": "CloudLinux", "scientific": "ScientificLinux",
	"alpine": "Alpine", "arch": "Arch", "archarm": "Arch ARM", "manjaro": "Manjaro",
	"opensuse-leap": "Leap", "opensuse-tumbleweed": "openSUSE Tumbleweed", "sles": "SUSE",
	"gentoo": "Gentoo", "void": "Void", "openwrt": "OpenWrt", "buildroot": "Buildroot",
	"poky": "Poky", "nixos": "NixOS", "mendel": "Mendel", "photon": "VMware Photon OS",
}

// osFamilies maps Salt's os grain to its os_family grain.
var osFamilies = map[string]string{
	"Debian": "Debian", "Ubuntu": "Debian", "Raspbian": "Debian", "Mint": "Debian",
	"Pop": "Debian", "Devuan": "Debian", "Kali": "Debian", "Mendel": "Debian",
	"CentOS": "RedHat", "RedHat": "RedHat", "Fedora": "RedHat", "Rocky": "RedHat",
	"AlmaLinux": "RedHat", "OEL": "RedHat", "Amazon": "RedHat", "CloudLinux": "RedHat",
	"ScientificLinux": "RedHat", "VMware Photon OS": "RedHat",
	"Alpine": "Alpine", "Arch": "Arch", "Arch ARM": "Arch", "Manjaro": "Arch",
	"Leap": "Suse", "openSUSE Tumbleweed": "Suse", "SUSE": "Suse",
	"Gentoo": "Gentoo", "Void": "Void", "NixOS": "NixOS",
}

// debianArch maps uname's machine to dpkg's architecture names for osarch.
var debianArch = map[string]string{
	"x86_64": "amd64", "aarch64": "arm64", "armv7l": "armhf", "armv6l": "armhf",
	"armv5tel": "armel", "i686": "i386", "i386": "i386", "ppc64le": "ppc64el",
	"mips": "mips", "mipsel": "mipsel", "mips64": "mips64el", "s390x": "s390x", "riscv64": "riscv64",
}

// parseOSRelease parses /etc/os-release (KEY=value, values optionally quoted).
func parseOSRelease(text string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, `"'`)
		}
		m[k] = v
	}
	return m
}

// osRelease fills os, os_family, osfullname, osrelease, osrelease_info,
// osmajorrelease, oscodename, osfinger and osarch.
func (c *collector) osRelease() {
	kernel := c.g["kernel"].(string)
	var rel map[string]string
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(p)
		if err == nil {
			rel = parseOSRelease(string(b))
			break
		}
		c.skip("os", err)
	}
	osName, family := kernel, kernel
	if rel != nil {
		fillOS(c.g, rel)
		osName, family = c.g["os"].(string), c.g["os_family"].(string)
	} else {
		c.g["os"], c.g["os_family"] = osName, family
	}
	arch, _ := c.g["cpuarch"].(string)
	if family == "Debian" {
		if a, ok := debianArch[arch]; ok {
			arch = a
		}
	}
	c.g["osarch"] = arch
}

// fillOS sets the os grains from parsed os-release fields.
func fillOS(g map[string]any, rel map[string]string) {
	id := strings.ToLower(rel["ID"])
	name := osNames[id]
	if name == "" {
		name = rel["NAME"]
		if f := strings.Fields(name); len(f) > 0 {
			name = f[0]
		}
	}
	if name == "" {
		name = g["kernel"].(string)
	}
	family := osFamilies[name]
	if family == "" {
		for _, like := range strings.Fields(rel["ID_LIKE"]) {
			if f := osFamilies[osNames[strings.ToLower(like)]]; f != "" {
				family = f
				break
			}
		}
	}
	if family == "" {
		family = name
	}
	g["os"], g["os_family"] = name, family
	if full := rel["NAME"]; full != "" {
		g["osfullname"] = full
	}
	if code := rel["VERSION_CODENAME"]; code != "" {
		g["oscodename"] = code
	}
	ver := rel["VERSION_ID"]
	if ver == "" {
		return
	}
	g["osrelease"] = ver
	var info []any
	for _, part := range strings.Split(ver, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			info = nil
			break
		}
		info = append(info, n)
	}
	if len(info) > 0 {
		g["osrelease_info"] = info
		g["osmajorrelease"] = info[0]
		// Salt's osfinger: Debian-12, Ubuntu-22.04, else "osfullname-major".
		switch name {
		case "Debian", "Raspbian":
			g["osfinger"] = name + "-" + strconv.Itoa(info[0].(int))
		case "Ubuntu":
			g["osfinger"] = rel["NAME"] + "-" + ver
		default:
			g["osfinger"] = rel["NAME"] + "-" + strconv.Itoa(info[0].(int))
		}
	}
}

// cpu fills num_cpus and cpu_model from /proc/cpuinfo.
func (c *collector) cpu() {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		c.skip("cpu_model", err)
		c.g["num_cpus"] = runtime.NumCPU()
		return
	}
	n, model := parseCPUInfo(string(b))
	if n == 0 {
		n = runtime.NumCPU()
	}
	c.g["num_cpus"] = n
	if model != "" {
		c.g["cpu_model"] = model
	}
}

// parseCPUInfo counts processors and finds the model, whatever the
// architecture calls it ("model name" on x86 and newer ARM kernels,
// "Processor" on older ARM, "cpu model" on MIPS, "cpu" on PowerPC).
func parseCPUInfo(text string) (int, string) {
	n := 0
	found := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "processor" {
			n++
		}
		if _, seen := found[k]; !seen && v != "" {
			found[k] = v
		}
	}
	for _, k := range []string{"model name", "Processor", "cpu model", "cpu"} {
		if v := found[k]; v != "" {
			return n, v
		}
	}
	if v := found["Hardware"]; v != "" {
		return n, v
	}
	return n, ""
}

// memory fills mem_total and swap_total in MiB, as Salt does.
func (c *collector) memory() {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		c.skip("mem_total", err)
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var grain string
		switch k {
		case "MemTotal":
			grain = "mem_total"
		case "SwapTotal":
			grain = "swap_total"
		default:
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		kib, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			c.skip(grain, err)
			continue
		}
		c.g[grain] = int(kib / 1024)
	}
}

// hostnames fills localhost, host, nodename (when uname had none), fqdn and
// domain. fqdn follows Python's socket.getfqdn: the first name with a dot
// among the reverse names of the hostname's address, else the hostname.
func (c *collector) hostnames() {
	name, err := os.Hostname()
	if err != nil {
		c.skip("host", err)
		return
	}
	c.g["localhost"] = name
	if _, ok := c.g["nodename"]; !ok {
		c.g["nodename"] = name
	}
	host, _, _ := strings.Cut(name, ".")
	c.g["host"] = host
	fqdn := lookupFQDN(name)
	c.g["fqdn"] = fqdn
	if _, dom, ok := strings.Cut(fqdn, "."); ok {
		c.g["domain"] = dom
	} else {
		c.g["domain"] = ""
	}
}

func lookupFQDN(name string) string {
	if strings.Contains(name, ".") {
		return name
	}
	ctx, cancel := context.WithTimeout(context.Background(), fqdnTimeout)
	defer cancel()
	var r net.Resolver
	addrs, err := r.LookupHost(ctx, name)
	if err != nil || len(addrs) == 0 {
		return name
	}
	names, err := r.LookupAddr(ctx, addrs[0])
	if err != nil {
		return name
	}
	for _, n := range names {
		n = strings.TrimSuffix(n, ".")
		if strings.Contains(n, ".") {
			return n
		}
	}
	return name
}

// network fills ipv4, ipv6 (loopback included, as Salt), ip4_interfaces,
// ip6_interfaces, ip_interfaces and hwaddr_interfaces.
func (c *collector) network() {
	ifaces, err := net.Interfaces()
	if err != nil {
		c.skip("ipv4", err)
		return
	}
	ipv4, ipv6 := []string{}, []string{}
	ip4if, ip6if, ipif := map[string]any{}, map[string]any{}, map[string]any{}
	hw := map[string]any{}
	for _, ifc := range ifaces {
		switch {
		case len(ifc.HardwareAddr) > 0:
			hw[ifc.Name] = ifc.HardwareAddr.String()
		case ifc.Flags&net.FlagLoopback != 0:
			hw[ifc.Name] = "00:00:00:00:00:00"
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			c.skip("ipv4", err)
			continue
		}
		v4, v6 := []any{}, []any{}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip := ipn.IP.To4(); ip != nil {
				v4 = append(v4, ip.String())
				ipv4 = append(ipv4, ip.String())
			} else {
				v6 = append(v6, ipn.IP.String())
				ipv6 = append(ipv6, ipn.IP.String())
			}
		}
		ip4if[ifc.Name] = v4
		ip6if[ifc.Name] = v6
		ipif[ifc.Name] = append(append([]any{}, v4...), v6...)
	}
	c.g["ipv4"] = toAny(uniqSorted(ipv4))
	c.g["ipv6"] = toAny(uniqSorted(ipv6))
	c.g["ip4_interfaces"] = ip4if
	c.g["ip6_interfaces"] = ip6if
	c.g["ip_interfaces"] = ipif
	c.g["hwaddr_interfaces"] = hw
}

func uniqSorted(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// toAny makes a list grain a []any, the shape every decoder and
// saltdata.Traverse sees.
func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// machineID fills machine_id from systemd's or D-Bus's file.
func (c *collector) machineID() {
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		id, err := readTrim(p)
		if err == nil && id != "" {
			c.g["machine_id"] = id
			return
		}
		if err != nil {
			c.skip("machine_id", err)
		}
	}
}

// hardware fills Salt's DMI grains where the firmware has them, else the
// device-tree model and serial number that ARM and MIPS boards carry.
func (c *collector) hardware() {
	dmi := map[string]string{
		"manufacturer": "sys_vendor", "productname": "product_name",
		"serialnumber": "product_serial", "uuid": "product_uuid",
		"biosversion": "bios_version", "biosreleasedate": "bios_date",
	}
	for grain, file := range dmi {
		if v, err := readTrim("/sys/class/dmi/id/" + file); err == nil && v != "" {
			c.g[grain] = v
		}
	}
	if _, ok := c.g["productname"]; !ok {
		if v, err := readTrim("/proc/device-tree/model"); err == nil && v != "" {
			c.g["productname"] = v
		}
	}
	if _, ok := c.g["serialnumber"]; !ok {
		if v, err := readTrim("/proc/device-tree/serial-number"); err == nil && v != "" {
			c.g["serialnumber"] = v
		}
	}
}

// process fills uid, gid, username, groupname, shell, path and init.
func (c *collector) process() {
	c.g["uid"], c.g["gid"] = os.Getuid(), os.Getgid()
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		c.g["username"] = u.Username
	} else {
		c.skip("username", err)
	}
	if g, err := user.LookupGroupId(strconv.Itoa(os.Getgid())); err == nil {
		c.g["groupname"] = g.Name
	} else {
		c.skip("groupname", err)
	}
	if sh := os.Getenv("SHELL"); sh != "" {
		c.g["shell"] = sh
	} else {
		c.g["shell"] = "/bin/sh"
	}
	c.g["path"] = os.Getenv("PATH")
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		c.g["init"] = "systemd"
	} else if comm, err := readTrim("/proc/1/comm"); err == nil && comm != "" {
		c.g["init"] = comm
	}
}

// Store holds an agent's current grains for concurrent readers. Get is one
// atomic load; Refresh collects a new map and swaps it in, so a map handed
// out by Get is never changed afterwards.
type Store struct {
	id     string
	static map[string]any
	file   string // the grains file, "" for none (file.go)
	log    *zap.Logger
	skip   bool // NewSkipped: no grains at all
	cur    atomic.Pointer[map[string]any]
	mu     sync.Mutex // serializes Refresh, so the last collected wins
}

// New collects the grains once and returns a Store holding them.
func New(id string, static map[string]any, log *zap.Logger) *Store {
	return NewFile(id, static, "", log)
}

// Get returns the current grains. The map is shared: do not modify it.
func (s *Store) Get() map[string]any {
	return *s.cur.Load()
}

// Refresh collects the grains again (re-reading the grains file, if any),
// stores and returns them. The returned map is shared like Get's.
func (s *Store) Refresh() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshLocked()
}

// NewSkipped returns a Store that holds no grains and collects none, as
// Salt's loader does with skip_grains (salt/loader/__init__.py grains):
// salt-call --skip-grains.
func NewSkipped() *Store {
	s := &Store{skip: true, log: zap.NewNop()}
	s.Refresh()
	return s
}

func (s *Store) refreshLocked() map[string]any {
	if s.skip {
		g := map[string]any{}
		s.cur.Store(&g)
		return g
	}
	g := Collect(s.id, s.layers(), s.log)
	s.cur.Store(&g)
	return g
}
