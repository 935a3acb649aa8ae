package exec

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// network.interfaces, network.ip_addrs, network.ping and network.netstat,
// after salt/modules/network.py and salt/utils/network.py (Linux).

// modnetworkModule is the network functions of modnetwork.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modnetworkModule = module{name: "network", funcs: []function{
	{
		name: "interfaces",
		doc: `Return the interfaces as {name: {up, hwaddr, inet: [{address, netmask,
broadcast, label}], inet6: [{address, prefixlen, scope}]}}.

CLI Example:

    halite '*' network.interfaces`,
		run: func(context.Context, *call) (any, error) { return interfaces() },
	},
	{
		name: "ip_addrs",
		params: []param{{name: "interface"}, {name: "include_loopback", def: false},
			{name: "cidr"}, {name: "type"}},
		doc: `Return the IPv4 addresses of the host, sorted, without 127.0.0.1 unless
include_loopback=True. interface selects interfaces (a name, a glob or a
list); cidr keeps the addresses in a subnet; type=public or type=private
keeps those.

CLI Example:

    halite '*' network.ip_addrs
    halite '*' network.ip_addrs interface='eth*' cidr=10.0.0.0/8`,
		run: ipAddrs,
	},
	{
		name:   "ping",
		params: []param{{name: "host", required: true}, {name: "timeout", def: false}, {name: "return_boolean", def: false}},
		doc: `Ping host 4 times with the system's ping (BusyBox's does) and return
its output, or with return_boolean=True whether it answered. timeout is
ping's -W, in seconds.

CLI Example:

    halite '*' network.ping archlinux.org
    halite '*' network.ping archlinux.org return_boolean=True timeout=3`,
		run: networkPing,
	},
	{
		name: "netstat",
		doc: `Return the TCP and UDP sockets, as netstat -tulpnea shows them: a list
of {proto, recv-q, send-q, local-address, remote-address, state (TCP),
user, inode, program}, read from /proc/net.

CLI Example:

    halite '*' network.netstat`,
		run: func(context.Context, *call) (any, error) { return netstat(), nil },
	},
}}

func init() { register(modnetworkModule) }

// interfaces is salt.utils.network.interfaces() from the kernel's view.
func interfaces() (map[string]any, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, commandf("list interfaces: %v", err)
	}
	ret := make(map[string]any, len(ifs))
	for _, ifc := range ifs {
		data := map[string]any{"up": ifc.Flags&net.FlagUp != 0}
		switch {
		case len(ifc.HardwareAddr) > 0:
			data["hwaddr"] = ifc.HardwareAddr.String()
		case ifc.Flags&net.FlagLoopback != 0:
			data["hwaddr"] = "00:00:00:00:00:00"
		}
		addrs, _ := ifc.Addrs()
		var v4, v6 []any
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			if ip := ipn.IP.To4(); ip != nil {
				mask := net.IP(net.CIDRMask(ones, 32)).String()
				var brd any
				if ifc.Flags&net.FlagBroadcast != 0 && ones < 31 {
					b := make(net.IP, 4)
					for i := range b {
						b[i] = ip[i] | ^ipn.Mask[len(ipn.Mask)-4+i]
					}
					brd = b.String()
				}
				v4 = append(v4, map[string]any{"address": ip.String(), "netmask": mask, "broadcast": brd, "label": ifc.Name})
				continue
			}
			scope := "global"
			switch {
			case ipn.IP.IsLoopback():
				scope = "host"
			case ipn.IP.IsLinkLocalUnicast():
				scope = "link"
			}
			v6 = append(v6, map[string]any{"address": ipn.IP.String(), "prefixlen": strconv.Itoa(ones), "scope": scope})
		}
		if v4 != nil {
			data["inet"] = v4
		}
		if v6 != nil {
			data["inet6"] = v6
		}
		ret[ifc.Name] = data
	}
	return ret, nil
}

func ipAddrs(_ context.Context, c *call) (any, error) {
	ifs, err := interfaces()
	if err != nil {
		return nil, err
	}
	var pats []string
	switch v := c.arg("interface").(type) {
	case nil:
	case []any:
		if pats, err = strArgs(v); err != nil {
			return nil, err
		}
	default:
		s, ok := toString(v)
		if !ok {
			return nil, invalidf("interface must be a string or a list, not %v", v)
		}
		// salt.utils.args.split_input: a comma-separated string.
		for _, p := range strings.Split(s, ",") {
			pats = append(pats, strings.TrimSpace(p))
		}
	}
	var subnet *net.IPNet
	if s, ok, err := c.str("cidr"); err != nil {
		return nil, err
	} else if ok && s != "" {
		if _, subnet, err = net.ParseCIDR(s); err != nil {
			return nil, invalidf("cidr %q is not a network: %v", s, err)
		}
	}
	kind, _, err := c.str("type")
	if err != nil {
		return nil, err
	}
	loop := isTrue(c.arg("include_loopback"))
	seen := map[string]net.IP{}
	for name, d := range ifs {
		if pats != nil && !globAny(pats, name) {
			continue
		}
		v4, _ := d.(map[string]any)["inet"].([]any)
		for _, a := range v4 {
			ip := net.ParseIP(a.(map[string]any)["address"].(string)).To4()
			if ip == nil || (ip.IsLoopback() && !loop) {
				continue
			}
			seen[ip.String()] = ip
		}
	}
	ips := make([]net.IP, 0, len(seen))
	for _, ip := range seen {
		ips = append(ips, ip)
	}
	sort.Slice(ips, func(i, j int) bool { return string(ips[i]) < string(ips[j]) })
	out := []any{}
	for _, ip := range ips {
		private := ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast()
		switch {
		case subnet != nil && !subnet.Contains(ip):
		case subnet == nil && kind == "public" && private:
		case subnet == nil && kind == "private" && !private:
		default:
			out = append(out, ip.String())
		}
	}
	return out, nil
}

func globAny(pats []string, name string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok || p == name {
			return true
		}
	}
	return false
}

// sanitizeHost is salt.utils.network.sanitize_host: the first 255
// characters, keeping only letters, digits, ".", "-" and "_".
func sanitizeHost(h string) string {
	if len(h) > 255 {
		h = h[:255]
	}
	var b strings.Builder
	for _, r := range h {
		if r < 128 && (r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func networkPing(ctx context.Context, c *call) (any, error) {
	h, err := c.need("host")
	if err != nil {
		return nil, err
	}
	host := sanitizeHost(h)
	if host == "" || strings.HasPrefix(host, "-") {
		return nil, invalidf("host %q is not a host name or address", h)
	}
	argv := []string{"ping", "-c", "4", host}
	if t := c.arg("timeout"); t != nil && t != false && t != 0 && t != "" {
		n, ok := toInt(t)
		if !ok || n < 0 {
			return nil, invalidf("timeout must be a number of seconds, not %v", t)
		}
		argv = []string{"ping", "-W", strconv.Itoa(n), "-c", "4", host}
	}
	boolean := isTrue(c.arg("return_boolean"))
	r, err := runArgv(ctx, c, argv)
	if err != nil {
		return nil, err
	}
	if boolean {
		// Salt's cmd.run_all keeps the retcode out of the job here.
		c.retcode = 0
		return r.retcode == 0, nil
	}
	return r.stdout, nil
}

// tcpStates are the kernel's TCP states as netstat names them.
var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
	"06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// netstat reads /proc/net/{tcp,tcp6,udp,udp6} into the entries Salt's
// _netstat_linux makes of "netstat -tulpnea".
func netstat() []any {
	progs := socketPrograms()
	out := []any{}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		f, err := os.Open("/proc/net/" + proto)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			if e := netstatEntry(proto, sc.Text(), progs); e != nil {
				out = append(out, e)
			}
		}
		f.Close()
	}
	return out
}

// netstatEntry parses one line of /proc/net/tcp and friends; a line it
// cannot read is skipped (nil).
func netstatEntry(proto, line string, progs map[string]string) map[string]any {
	f := strings.Fields(line)
	if len(f) < 10 {
		return nil
	}
	local, ok1 := procAddr(f[1])
	remote, ok2 := procAddr(f[2])
	tx, rx, ok3 := strings.Cut(f[4], ":")
	txn, err1 := strconv.ParseUint(tx, 16, 64)
	rxn, err2 := strconv.ParseUint(rx, 16, 64)
	if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil {
		return nil
	}
	prog := progs[f[9]]
	if prog == "" {
		prog = "-"
	}
	e := map[string]any{
		"proto": proto, "recv-q": strconv.FormatUint(rxn, 10), "send-q": strconv.FormatUint(txn, 10),
		"local-address": local, "remote-address": remote, "user": f[7], "inode": f[9], "program": prog,
	}
	if strings.HasPrefix(proto, "tcp") {
		st := tcpStates[f[3]]
		if st == "" {
			st = f[3]
		}
		e["state"] = st
	}
	return e
}

// procAddr turns /proc/net's "0100007F:0016" into netstat -n's
// "127.0.0.1:22" (port 0 is "*"; IPv6 as "::1:22").
func procAddr(s string) (string, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", false
	}
	// The kernel prints each 32-bit word in host (little-endian) order.
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		for i := 0; i < 4; i++ {
			ip[w+i] = raw[w+3-i]
		}
	}
	ps := "*"
	if port != 0 {
		ps = strconv.FormatUint(port, 10)
	}
	return ip.String() + ":" + ps, true
}

// socketPrograms maps socket inodes to netstat -p's "pid/name", for the
// processes whose file descriptors the agent may read.
func socketPrograms() map[string]string {
	out := map[string]string{}
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range pids {
		fds, err := os.ReadDir(dir + "/fd")
		if err != nil {
			continue
		}
		name := ""
		for _, fd := range fds {
			l, err := os.Readlink(dir + "/fd/" + fd.Name())
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			if name == "" {
				comm, _ := os.ReadFile(dir + "/comm")
				name = fmt.Sprintf("%s/%s", filepath.Base(dir), strings.TrimSpace(string(comm)))
			}
			out[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = name
		}
	}
	return out
}
