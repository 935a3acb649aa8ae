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

// meminfo reads /proc/meminfo into kB values by field name.
func meminfo(e *env) (map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(e.proc, "meminfo"))
	if err != nil {
		return nil, fmt.Errorf("read meminfo: %w", err)
	}
	out := make(map[string]uint64, 48)
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err == nil {
			out[string(k)] = n
		}
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

// procNames returns the names of the running processes: each one's comm
// and the base name of its argv[0].
func procNames(e *env) (map[string]int, error) {
	ents, err := os.ReadDir(e.proc)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := make(map[string]int, len(ents))
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(e.proc, ent.Name(), "comm")); err == nil {
			out[strings.TrimSpace(string(b))] = pid
		}
		if b, err := os.ReadFile(filepath.Join(e.proc, ent.Name(), "cmdline")); err == nil && len(b) > 0 {
			arg0, _, _ := bytes.Cut(b, []byte{0})
			out[filepath.Base(string(arg0))] = pid
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
