package pillar

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"go.uber.org/zap"
)

// BenchmarkCompile10k compiles the pillar of 10,000 devices from a cold
// cache (each device once): a top file with a glob, a grain and a
// compound target; five SLS files, three of them Jinja reading the
// device's grains, one with an include.
//
//	go test -run '^$' -bench Compile10k -benchtime 3x ./master/pillar/
func BenchmarkCompile10k(b *testing.B) {
	const devices = 10000
	dir := b.TempDir()
	files := map[string]string{
		"top.sls": `base:
  '*':
    - common
    - users
  'role:web':
    - match: grain
    - web
  'G@site:north and cam*':
    - north
`,
		"common.sls":       "ntp: [pool.ntp.org]\nhostname: {{ grains['id'] }}\nsite: {{ grains['site'] }}\n",
		"users.sls":        "include:\n  - users.admins\nusers:\n  ops: {uid: 1000, shell: /bin/sh}\n",
		"users/admins.sls": "admins:\n  - alice\n  - bob\n",
		"web.sls":          "nginx:\n  port: 8080\n  workers: {{ grains['cpus'] * 2 }}\n",
		"north.sls":        "{% if grains['site'] == 'north' %}gateway: 10.1.0.1{% else %}gateway: 10.2.0.1{% endif %}\n",
	}
	for p, s := range files {
		writeB(b, dir, p, s)
	}
	grains := make(map[string]map[string]any, devices)
	ids := make([]string, devices)
	for i := range ids {
		id := fmt.Sprintf("cam%05d", i)
		ids[i] = id
		role := "cam"
		if i%10 == 0 {
			role = "web"
		}
		grains[id] = map[string]any{"id": id, "site": []string{"north", "south"}[i%2], "role": role, "cpus": 1 + i%4}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		c := New(Options{Roots: map[string][]string{"base": {dir}}, Log: zap.NewNop(), Grains: func(id string) map[string]any { return grains[id] }})
		ps, err := c.ForMany(context.Background(), ids, runtime.GOMAXPROCS(0))
		if err != nil {
			b.Fatal(err)
		}
		if ps[0]["nginx"] == nil || ps[1]["hostname"] != "cam00001" || ps[1]["_errors"] != nil {
			b.Fatalf("unexpected pillar %v / %v", ps[0], ps[1])
		}
	}
	b.ReportMetric(float64(devices*b.N)/b.Elapsed().Seconds(), "devices/s")
}

func writeB(b *testing.B, dir, p, s string) {
	b.Helper()
	full := dir + "/" + p
	if err := mkdirWrite(full, s); err != nil {
		b.Fatal(err)
	}
}
