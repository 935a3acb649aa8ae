package statecomp

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// highstate20 is a 20-file highstate: top.sls and 20 SLS files that branch
// on grains the devices share (os, role); with perDevice, one of them also
// names grains['id'].
func highstate20(perDevice bool) map[string]string {
	files := map[string]string{}
	top := "base:\n  '*':\n"
	for i := 0; i < 20; i++ {
		top += fmt.Sprintf("    - app%d\n", i)
		files[fmt.Sprintf("app%d.sls", i)] = fmt.Sprintf(`{%% if grains['os'] == 'Debian' %%}
app%[1]d_conf:
  test.succeed_without_changes:
    - name: /etc/app%[1]d/debian.conf
{%% else %%}
app%[1]d_conf:
  test.succeed_without_changes:
    - name: /etc/app%[1]d/other.conf
{%% endif %%}
app%[1]d_run:
  cmd.run:
    - name: echo {{ salt['grains.get']('role', 'none') }}
    - unless: test -e /tmp/app%[1]d
`, i)
	}
	if perDevice {
		files["app0.sls"] += "hostname:\n  test.nop:\n    - name: {{ grains['id'] }}\n"
	}
	files["top.sls"] = top
	return files
}

var benchN = 10000

func benchDevices(n int) []Device {
	devs := make([]Device, n)
	oses := []string{"Debian", "Debian", "Debian", "OpenWrt", "Alpine"}
	for i := range devs {
		id := fmt.Sprintf("cam%05d", i)
		devs[i] = Device{ID: id, Grains: map[string]any{
			"id": id, "os": oses[i%len(oses)], "role": []string{"camera", "gateway"}[i%2],
			"serialnumber": fmt.Sprintf("SN%08d", i), "mem_total": 256 + i%3,
			"ip4_interfaces": map[string]any{"eth0": []any{fmt.Sprintf("10.0.%d.%d", i/250, i%250)}},
		}}
	}
	return devs
}

// BenchmarkCompileHighstate compiles a 20-file highstate for 10,000
// devices with per-device grains, from a cold cache (a new Compiler each
// time): the goal is at least 5,000 devices/s.
func BenchmarkCompileHighstate(b *testing.B) {
	for _, perDevice := range []bool{false, true} {
		name := "grains=shared"
		if perDevice {
			name = "grains=id"
		}
		if testing.Short() {
			benchN = 500
		}
		b.Run(fmt.Sprintf("%s/devices=%d", name, benchN), func(b *testing.B) {
			dir := writeRoots(b, highstate20(perDevice))
			devs := benchDevices(benchN)
			b.ReportAllocs()
			var st Stats
			var res []*Result
			cpu0 := cpuTime()
			for b.Loop() {
				c := New(Options{FileRoots: map[string][]string{"base": {dir}}})
				res, st = c.Compile(Request{Fun: "state.apply"}, devs)
			}
			if errs := res[0].State["errors"]; errs != nil {
				b.Fatal(errs)
			}
			if n := len(res[0].State["low"].([]any)); n < 40 {
				b.Fatalf("%d chunks", n)
			}
			// The machine may be shared: CPU time per device tells what a
			// device costs, devices/s what the wall clock saw.
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(len(devs))*float64(b.N)/b.Elapsed().Seconds(), "devices/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(len(devs)*b.N), "cpu-µs/device")
			b.ReportMetric(float64(st.Variants), "variants")
			b.ReportMetric(float64(st.Compiled), "compiles")
		})
	}
}
