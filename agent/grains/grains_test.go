package grains

import (
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/saltdata"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestCollectCore(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("core grains are read from Linux's /proc and /sys")
	}
	g := Collect("cam-01", nil, zap.NewNop())
	for _, k := range []string{"id", "os", "os_family", "kernel", "kernelrelease", "kernelversion",
		"cpuarch", "osarch", "num_cpus", "mem_total", "host", "localhost", "nodename", "fqdn",
		"domain", "ipv4", "ipv6", "hwaddr_interfaces", "ip_interfaces", "pid"} {
		if _, ok := g[k]; !ok {
			t.Errorf("grain %q missing; got keys %v", k, keys(g))
		}
	}
	if got, want := g["id"], "cam-01"; got != want {
		t.Errorf("id: got %v, want %v", got, want)
	}
	if got, want := g["kernel"], "Linux"; got != want {
		t.Errorf("kernel: got %v, want %v", got, want)
	}
	if n, ok := g["num_cpus"].(int); !ok || n < 1 {
		t.Errorf("num_cpus: got %#v, want a positive int", g["num_cpus"])
	}
	if n, ok := g["mem_total"].(int); !ok || n < 1 {
		t.Errorf("mem_total: got %#v, want a positive int of MiB", g["mem_total"])
	}
	ipv4, _ := g["ipv4"].([]any)
	if !slices.Contains(ipv4, any("127.0.0.1")) {
		t.Errorf("ipv4: got %v, want it to include loopback 127.0.0.1", ipv4)
	}
	hw, _ := g["hwaddr_interfaces"].(map[string]any)
	if got, want := hw["lo"], "00:00:00:00:00:00"; got != want {
		t.Errorf("hwaddr_interfaces[lo]: got %v, want %v", got, want)
	}
	if want, err := readTrim("/etc/machine-id"); err == nil && want != "" {
		if got := g["machine_id"]; got != want {
			t.Errorf("machine_id: got %v, want %v", got, want)
		}
	}
	host, _ := os.Hostname()
	if got, want := g["localhost"], host; got != want {
		t.Errorf("localhost: got %v, want %v", got, want)
	}
	if h := g["host"].(string); strings.Contains(h, ".") {
		t.Errorf("host: got %q, want a short name", h)
	}
}

func TestCollectStaticOverlay(t *testing.T) {
	static := map[string]any{
		"os":    "CameraOS",
		"roles": []any{"camera", "outdoor"},
		"site":  map[string]any{"name": "lyon", "rack": 4},
	}
	g := Collect("cam-02", static, nil)
	if got, want := g["os"], "CameraOS"; got != want {
		t.Errorf("os: got %v, want the static grain %v", got, want)
	}
	if got, ok := saltdata.Traverse(g, "site:rack", ":"); !ok || got != 4 {
		t.Errorf("site:rack: got %v, %v, want 4, true", got, ok)
	}
	if got, want := g["id"], "cam-02"; got != want {
		t.Errorf("id: got %v, want %v", got, want)
	}
}

func TestFillOS(t *testing.T) {
	tests := []struct {
		name    string
		release string
		want    map[string]any
	}{
		{
			name: "debian",
			release: `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION_CODENAME=bookworm
ID=debian`,
			want: map[string]any{"os": "Debian", "os_family": "Debian", "osfullname": "Debian GNU/Linux",
				"osrelease": "12", "osrelease_info": []any{12}, "osmajorrelease": 12,
				"oscodename": "bookworm", "osfinger": "Debian-12"},
		},
		{
			name: "ubuntu",
			release: `NAME="Ubuntu"
VERSION_ID="22.04"
ID=ubuntu
ID_LIKE=debian
VERSION_CODENAME=jammy`,
			want: map[string]any{"os": "Ubuntu", "os_family": "Debian", "osfullname": "Ubuntu",
				"osrelease": "22.04", "osrelease_info": []any{22, 4}, "osmajorrelease": 22,
				"oscodename": "jammy", "osfinger": "Ubuntu-22.04"},
		},
		{
			name: "alpine",
			release: `NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.19.1`,
			want: map[string]any{"os": "Alpine", "os_family": "Alpine", "osfullname": "Alpine Linux",
				"osrelease": "3.19.1", "osrelease_info": []any{3, 19, 1}, "osmajorrelease": 3,
				"osfinger": "Alpine Linux-3"},
		},
		{
			name: "unknown id like rhel",
			release: `NAME='Acme Enterprise'
ID=acme
ID_LIKE="rhel fedora"
VERSION_ID=9.3`,
			want: map[string]any{"os": "Acme", "os_family": "RedHat", "osfullname": "Acme Enterprise",
				"osrelease": "9.3", "osrelease_info": []any{9, 3}, "osmajorrelease": 9,
				"osfinger": "Acme Enterprise-9"},
		},
		{
			name: "buildroot with rolling version",
			release: `NAME=Buildroot
ID=buildroot
VERSION_ID=2023.02-rc1`,
			want: map[string]any{"os": "Buildroot", "os_family": "Buildroot", "osfullname": "Buildroot",
				"osrelease": "2023.02-rc1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := map[string]any{"kernel": "Linux"}
			fillOS(g, parseOSRelease(tt.release))
			delete(g, "kernel")
			if d := cmp.Diff(tt.want, g); d != "" {
				t.Errorf("os grains (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseCPUInfo(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		wantN     int
		wantModel string
	}{
		{"x86", "processor\t: 0\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n", 2, "AMD EPYC"},
		{"old arm", "Processor\t: ARMv7 Processor rev 5 (v7l)\nprocessor\t: 0\nHardware\t: Ambarella\n", 1, "ARMv7 Processor rev 5 (v7l)"},
		{"arm hardware only", "processor\t: 0\nBogoMIPS\t: 38.40\nHardware\t: BCM2835\n", 1, "BCM2835"},
		{"mips", "system type\t\t: MT7621\nprocessor\t\t: 0\ncpu model\t\t: MIPS 1004Kc V2.15\nprocessor\t\t: 1\n", 2, "MIPS 1004Kc V2.15"},
		{"empty", "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, model := parseCPUInfo(tt.text)
			if n != tt.wantN || model != tt.wantModel {
				t.Errorf("got %d, %q, want %d, %q", n, model, tt.wantN, tt.wantModel)
			}
		})
	}
}

func TestStoreSnapshots(t *testing.T) {
	s := New("cam-03", map[string]any{"role": "door"}, zap.NewNop())
	first := s.Get()
	if got, want := first["role"], "door"; got != want {
		t.Fatalf("role: got %v, want %v", got, want)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.Refresh()
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				if got := s.Get()["id"]; got != "cam-03" {
					t.Errorf("id: got %v, want cam-03", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	second := s.Get()
	if reflect.ValueOf(first).UnsafePointer() == reflect.ValueOf(second).UnsafePointer() {
		t.Errorf("Refresh did not swap in a new map")
	}
	if got, want := first["id"], "cam-03"; got != want {
		t.Errorf("old snapshot changed: id got %v, want %v", got, want)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
