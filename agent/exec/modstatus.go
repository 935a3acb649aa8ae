package exec

import (
	"bufio"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path"
	"strconv"
	"strings"
	"time"
)

// status.uptime, status.loadavg and status.diskusage, Linux branch of
// salt/modules/status.py.

// modstatusModule is the status functions of modstatus.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modstatusModule = module{name: "status", funcs: []function{
	{
		name: "uptime",
		doc: `Return the uptime: {seconds, since_iso, since_t, days, time ("H:M")},
plus users (lines of "who -s") when who is installed.

CLI Example:

    halite '*' status.uptime`,
		run: statusUptime,
	},
	{
		name: "loadavg",
		doc: `Return the load averages: {"1-min", "5-min", "15-min"}.

CLI Example:

    halite '*' status.loadavg`,
		run: func(context.Context, *call) (any, error) {
			b, err := os.ReadFile("/proc/loadavg")
			if err != nil {
				return nil, commandf("status.loadavag is not available on your platform")
			}
			f := strings.Fields(string(b))
			out := map[string]any{}
			for i, k := range []string{"1-min", "5-min", "15-min"} {
				if i >= len(f) {
					return nil, commandf("cannot parse /proc/loadavg")
				}
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return nil, commandf("cannot parse /proc/loadavg: %v", err)
				}
				out[k] = v
			}
			return out, nil
		},
	},
	{
		name:    "diskusage",
		varargs: true,
		doc: `Return {mount point: {available, total}} in bytes: of every file
system, or of the paths (arguments starting with /) and file system types
(globs such as ext?) given.

CLI Example:

    halite '*' status.diskusage
    halite '*' status.diskusage / /tmp
    halite '*' status.diskusage ext?`,
		run: statusDiskusage,
	},
}}

func init() { register(modstatusModule) }

func statusUptime(ctx context.Context, _ *call) (any, error) {
	now := time.Now()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return nil, commandf("File /proc/uptime was not found.")
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil, commandf("cannot parse /proc/uptime")
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return nil, commandf("cannot parse /proc/uptime: %v", err)
	}
	secs := int64(up)
	cur := float64(now.UnixNano()) / 1e9
	boot := time.Unix(0, int64((cur-float64(secs))*1e9)).UTC()
	days, rem := secs/86400, secs%86400
	ret := map[string]any{
		"seconds":   secs,
		"since_iso": pyISO(boot),
		"since_t":   int64(cur - float64(secs)),
		"days":      days,
		// Salt's "{}:{}": minutes are not zero-padded.
		"time": fmt.Sprintf("%d:%d", rem/3600, rem%3600/60),
	}
	if who, err := osexec.LookPath("who"); err == nil {
		out, _ := osexec.CommandContext(ctx, who, "-s").CombinedOutput()
		// Salt counts the lines of cmd.run's (stripped) output: "" is one.
		ret["users"] = len(strings.Split(strings.TrimRight(string(out), " \t\r\n"), "\n"))
	}
	return ret, nil
}

// pyISO is Python's datetime.isoformat(): microseconds only when non-zero.
func pyISO(t time.Time) string {
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.000000")
}

func statusDiskusage(_ context.Context, c *call) (any, error) {
	args, err := strArgs(c.rest)
	if err != nil {
		return nil, err
	}
	selected := map[string]bool{}
	var fstypes []string
	if len(args) == 0 {
		fstypes = []string{"*"}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "/") {
			selected[a] = true
		} else {
			fstypes = append(fstypes, a)
		}
	}
	if len(fstypes) > 0 {
		f, err := os.Open("/proc/mounts")
		if err != nil {
			return map[string]any{}, nil
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			comps := strings.Fields(sc.Text())
			if len(comps) < 3 {
				continue
			}
			for _, t := range fstypes {
				if ok, _ := path.Match(t, comps[2]); ok {
					selected[unescapeMount(comps[1])] = true
				}
			}
		}
		f.Close()
	}
	ret := map[string]any{}
	for p := range selected {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		avail, total, err := statfs(p)
		if err != nil {
			c.e.log.Warn("cannot get stats of " + p + ": " + err.Error())
			ret[p] = map[string]any{"available": nil, "total": nil}
			continue
		}
		ret[p] = map[string]any{"available": avail, "total": total}
	}
	return ret, nil
}

// unescapeMount undoes /proc/mounts' octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
