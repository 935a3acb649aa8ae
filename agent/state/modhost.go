package state

// The host state module, after Salt 3006's salt/states/host.py (present,
// absent) over salt/modules/hosts.py's reading and writing of /etc/hosts;
// the file is replaced atomically.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// hostsFile is the hosts file, a variable for tests.
var hostsFile = "/etc/hosts"

func init() {
	Register("host.present", Mod{Run: hostPresent, Doc: `Ensures that the named host is present with the given ip.

    name     the host name
    ip       an address or a list of addresses
    comment  a comment for the line (after #)
    clean    remove the name from other addresses`})
	Register("host.absent", Mod{Run: hostAbsent, Doc: "Ensure that the named host is absent (name, ip)."})
}

// hostEntry is one address line of the hosts file (or a comment line).
type hostEntry struct {
	ip      string
	aliases []string
	comment string
	hasCmt  bool
	raw     string // a comment line kept as it is
}

// hostsList is hosts._list_hosts: the file's lines by address, in order.
type hostsList struct{ entries []*hostEntry }

func (h *hostsList) get(ip string) *hostEntry {
	for _, e := range h.entries {
		if e.raw == "" && e.ip == ip {
			return e
		}
	}
	return nil
}

func hostsRead() (*hostsList, error) {
	h := &hostsList{}
	b, err := os.ReadFile(hostsFile)
	if err != nil {
		if os.IsNotExist(err) {
			return h, nil
		}
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			h.entries = append(h.entries, &hostEntry{raw: line})
			continue
		}
		var comment string
		hasCmt := false
		if i := strings.IndexByte(line, '#'); i >= 0 {
			comment = strings.TrimLeft(line[i+1:], " \t")
			hasCmt = comment != ""
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		e := h.get(f[0])
		if e == nil {
			e = &hostEntry{ip: f[0]}
			h.entries = append(h.entries, e)
		}
		e.aliases = append(e.aliases, f[1:]...)
		if hasCmt {
			e.comment, e.hasCmt = comment, true
		}
	}
	return h, nil
}

// write is hosts._write_hosts.
func (h *hostsList) write() error {
	var b strings.Builder
	for _, e := range h.entries {
		line := e.raw
		if line == "" {
			line = e.ip + "\t\t" + strings.Join(e.aliases, " ")
			if e.hasCmt {
				line += "\t\t# " + e.comment
			}
		}
		if strings.TrimSpace(line) != "" {
			b.WriteString(strings.TrimSpace(line) + "\n")
		}
	}
	return sysWriteAtomic(hostsFile, []byte(b.String()), 0o644)
}

func hostHas(e *hostEntry, name string) bool {
	if e == nil {
		return false
	}
	for _, a := range e.aliases {
		if a == name {
			return true
		}
	}
	return false
}

// hostArgs reads name and ip, refusing what would break the file.
func hostArgs(c *Call) ([]string, string) {
	if bad := sysBadName("host", c.Name, "#"); bad != "" {
		return nil, bad
	}
	ips, ok, err := sysKw(c.Chunk).list("ip", false)
	if err != nil {
		return nil, err.Error()
	}
	if !ok || len(ips) == 0 {
		return nil, "ip is required"
	}
	for _, ip := range ips {
		if _, err := netip.ParseAddr(ip); err != nil {
			return nil, fmt.Sprintf("Invalid IP Address for %s (%s)", c.Name, ip)
		}
	}
	return ips, ""
}

// hostPresent is Salt's host.present.
func hostPresent(ctx context.Context, c *Call) state.Ret {
	name := c.Name
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	ips, bad := hostArgs(c)
	if bad != "" {
		return sysFail(name, "%s", bad)
	}
	k := sysKw(c.Chunk)
	comment, _, err := k.str("comment")
	if err != nil || strings.ContainsAny(comment, "\n\r") {
		return sysFail(name, "comment must be one line of text")
	}
	clean := k.boolean("clean", false)
	h, err := hostsRead()
	if err != nil {
		return sysFail(name, "read %s: %v", hostsFile, err)
	}
	want := map[string]bool{}
	for _, ip := range ips {
		want[ip] = true
	}
	var comments, warnings []string
	var toAdd, toRemove, toComment []string // addresses
	for _, ip := range ips {
		e := h.get(ip)
		switch {
		case e == nil:
			toAdd = append(toAdd, ip)
			if comment != "" {
				toComment = append(toComment, ip)
			}
		case hostHas(e, name):
			if comment != "" && (!e.hasCmt || e.comment != comment) {
				toComment = append(toComment, ip)
			} else {
				comments = append(comments, fmt.Sprintf("Host %s (%s) already present", name, ip))
			}
		default:
			toAdd = append(toAdd, ip)
			if comment != "" {
				toComment = append(toComment, ip)
			}
		}
	}
	for _, e := range h.entries {
		if e.raw == "" && !want[e.ip] && hostHas(e, name) {
			if clean {
				toRemove = append(toRemove, e.ip)
			} else {
				warnings = append(warnings, fmt.Sprintf("Host %[1]s present for IP address %[2]s. To get rid of this warning, either run this state with 'clean' set to True to remove %[1]s from %[2]s, or add %[2]s to the 'ip' argument.", name, e.ip))
			}
		}
	}
	sort.Strings(toRemove)
	changes := ret.Changes
	addTo := func(key, ip, v string) {
		m, _ := changes[key].(map[string]any)
		if m == nil {
			m = map[string]any{}
			changes[key] = m
		}
		l, _ := m[ip].([]any)
		m[ip] = append(l, v)
	}
	for _, ip := range toAdd {
		if c.Test {
			ret.Result = state.None
			comments = append(comments, fmt.Sprintf("Host %s (%s) would be added", name, ip))
		} else {
			e := h.get(ip)
			if e == nil {
				e = &hostEntry{ip: ip}
				h.entries = append(h.entries, e)
			}
			e.aliases = append(e.aliases, name)
			comments = append(comments, fmt.Sprintf("Added host %s (%s)", name, ip))
		}
		addTo("added", ip, name)
	}
	for _, ip := range toComment {
		if c.Test {
			comments = append(comments, fmt.Sprintf("Comment for %s (%s) would be added", ip, comment))
		} else {
			e := h.get(ip)
			e.comment, e.hasCmt = comment, true
			comments = append(comments, fmt.Sprintf("Set comment for host %s (%s)", ip, comment))
		}
		addTo("comment_added", ip, comment)
	}
	for _, ip := range toRemove {
		if c.Test {
			ret.Result = state.None
			comments = append(comments, fmt.Sprintf("Host %s (%s) would be removed", name, ip))
		} else {
			hostRemove(h, ip, name)
			comments = append(comments, fmt.Sprintf("Removed host %s (%s)", name, ip))
		}
		addTo("removed", ip, name)
	}
	if !c.Test && len(changes) > 0 {
		if err := h.write(); err != nil {
			return state.Ret{Name: name, Result: state.False, Comment: err.Error()}
		}
	}
	comments = append(comments, warnings...) // Salt returns them as "warnings"
	ret.Comment = strings.Join(comments, "\n")
	return ret
}

// hostRemove is hosts.rm_host: the name leaves the address's aliases; an
// address without aliases leaves the file.
func hostRemove(h *hostsList, ip, name string) {
	e := h.get(ip)
	if e == nil {
		return
	}
	keep := e.aliases[:0]
	for _, a := range e.aliases {
		if a != name {
			keep = append(keep, a)
		}
	}
	e.aliases = keep
	if len(keep) == 0 {
		for i, x := range h.entries {
			if x == e {
				h.entries = append(h.entries[:i], h.entries[i+1:]...)
				break
			}
		}
	}
}

// hostAbsent is Salt's host.absent.
func hostAbsent(ctx context.Context, c *Call) state.Ret {
	name := c.Name
	ret := state.Ret{Name: name, Result: state.None, Changes: map[string]any{}}
	ips, bad := hostArgs(c)
	if bad != "" {
		return sysFail(name, "%s", bad)
	}
	h, err := hostsRead()
	if err != nil {
		return sysFail(name, "read %s: %v", hostsFile, err)
	}
	var comments []string
	changed := false
	for _, ip := range ips {
		if !hostHas(h.get(ip), name) {
			ret.Result = state.True
			comments = append(comments, fmt.Sprintf("Host %s (%s) already absent", name, ip))
			continue
		}
		if c.Test {
			comments = append(comments, fmt.Sprintf("Host %s (%s) needs to be removed", name, ip))
			continue
		}
		hostRemove(h, ip, name)
		changed = true
		ret.Changes = map[string]any{"host": name}
		ret.Result = state.True
		comments = append(comments, fmt.Sprintf("Removed host %s (%s)", name, ip))
	}
	if changed {
		if err := h.write(); err != nil {
			return sysFail(name, "Failed to remove host: %v", err)
		}
	}
	ret.Comment = strings.Join(comments, "\n")
	return ret
}
