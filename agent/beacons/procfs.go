package beacons

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// readInto reads a small proc file into buf (grown as needed) and returns
// the bytes read; beacons keep their buffer from check to check, so a check
// allocates little (a 1 s interval must not churn the agent's heap).
func readInto(path string, buf *[]byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if *buf == nil {
		*buf = make([]byte, 4096)
	}
	n := 0
	for {
		m, err := f.Read((*buf)[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, len(*buf))...)
		}
	}
	return (*buf)[:n], nil
}

// meminfo reads /proc/meminfo into kB values by field name; with keys,
// only those fields.
func meminfo(e *env, buf *[]byte, keys ...string) (map[string]uint64, error) {
	b, err := readInto(filepath.Join(e.proc, "meminfo"), buf)
	if err != nil {
		return nil, fmt.Errorf("read meminfo: %w", err)
	}
	out := make(map[string]uint64, max(len(keys), 8))
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		if len(keys) > 0 {
			want := false
			for _, w := range keys {
				if string(k) == w {
					want = true
					break
				}
			}
			if !want {
				continue
			}
		}
		rest = bytes.TrimSpace(rest)
		if i := bytes.IndexByte(rest, ' '); i >= 0 {
			rest = rest[:i]
		}
		var n uint64
		for _, c := range rest {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + uint64(c-'0')
		}
		out[string(k)] = n
	}
	return out, nil
}

// memPercent is psutil's virtual_memory().percent: (total-available)/total.
func memPercent(mi map[string]uint64) (float64, error) {
	total := mi["MemTotal"]
	if total == 0 {
		return 0, fmt.Errorf("meminfo has no MemTotal")
	}
	avail, ok := mi["MemAvailable"]
	if !ok {
		avail = mi["MemFree"] + mi["Buffers"] + mi["Cached"]
	}
	if avail > total {
		avail = total
	}
	return round2(float64(total-avail) / float64(total) * 100), nil
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// loadavg reads /proc/loadavg.
func loadavg(e *env) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(e.proc, "loadavg"))
	if err != nil {
		return nil, fmt.Errorf("read loadavg: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil, fmt.Errorf("read loadavg: %q is not a load average", b)
	}
	out := map[string]any{}
	for i, k := range []string{"1m", "5m", "15m"} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, fmt.Errorf("read loadavg: %w", err)
		}
		out[k] = v
	}
	return out, nil
}

// procRunning reports which of names run as processes: a process runs as
// name when its comm (the kernel's name, cut to 15 bytes) is name, or, for
// a longer name, when the base name of its argv[0] is. Only what is needed
// is read, with one buffer, so a check costs little.
func procRunning(e *env, names []string, buf *[]byte) (map[string]bool, error) {
	d, err := os.Open(e.proc)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer d.Close()
	ents, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	long := false
	for _, n := range names {
		if len(n) > 15 {
			long = true
		}
	}
	out := make(map[string]bool, len(names))
	for _, pid := range ents {
		if len(pid) == 0 || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		b, err := readInto(e.proc+"/"+pid+"/comm", buf)
		if err != nil {
			continue
		}
		comm := bytes.TrimSpace(b)
		for _, n := range names {
			if len(n) <= 15 && string(comm) == n {
				out[n] = true
			}
		}
		if !long {
			continue
		}
		b, err = readInto(e.proc+"/"+pid+"/cmdline", buf)
		if err != nil || len(b) == 0 {
			continue
		}
		arg0, _, _ := bytes.Cut(b, []byte{0})
		if i := bytes.LastIndexByte(arg0, '/'); i >= 0 {
			arg0 = arg0[i+1:]
		}
		for _, n := range names {
			if len(n) > 15 && string(arg0) == n {
				out[n] = true
			}
		}
	}
	return out, nil
}

// netdev reads /proc/net/dev: per interface, psutil's counter names.
func netdev(e *env) (map[string]map[string]any, error) {
	f, err := os.Open(filepath.Join(e.proc, "net", "dev"))
	if err != nil {
		return nil, fmt.Errorf("read net/dev: %w", err)
	}
	defer f.Close()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) < 16 {
			continue
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(fs[i], 10, 64); return v }
		out[strings.TrimSpace(name)] = map[string]any{
			"bytes_recv": n(0), "packets_recv": n(1), "errin": n(2), "dropin": n(3),
			"bytes_sent": n(8), "packets_sent": n(9), "errout": n(10), "dropout": n(11),
		}
	}
	return out, sc.Err()
}

// cpustats reads the aggregate cpu line of /proc/stat, plus ctxt, btime,
// processes, procs_running and procs_blocked, as Salt's status.cpustats.
func cpustats(e *env) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(e.proc, "stat"))
	if err != nil {
		return nil, fmt.Errorf("read stat: %w", err)
	}
	out := map[string]any{}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		switch fs[0] {
		case "cpu":
			cpu := map[string]any{}
			for i, k := range []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"} {
				if i+1 < len(fs) {
					v, _ := strconv.ParseUint(fs[i+1], 10, 64)
					cpu[k] = v
				}
			}
			out["cpu"] = cpu
		case "ctxt", "btime", "processes", "procs_running", "procs_blocked":
			v, _ := strconv.ParseUint(fs[1], 10, 64)
			out[fs[0]] = v
		}
	}
	return out, nil
}

// uptime reads /proc/uptime as Salt's status.uptime's seconds.
func uptime(e *env) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(e.proc, "uptime"))
	if err != nil {
		return nil, fmt.Errorf("read uptime: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil, fmt.Errorf("read uptime: empty")
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return nil, fmt.Errorf("read uptime: %w", err)
	}
	return map[string]any{"seconds": s}, nil
}
