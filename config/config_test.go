package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// writeDir makes a config directory holding files (name -> content; a name
// ending in "/" is a directory).
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// collect returns a warn func and the warnings it saw, as "FILE:LINE: MSG"
// with FILE relative to dir.
func collect(dir string) (func(Warning), *[]string) {
	var got []string
	return func(w Warning) {
		rel, _ := filepath.Rel(dir, w.File)
		got = append(got, fmt.Sprintf("%s:%d: %s", rel, w.Line, w.Msg))
	}, &got
}

var ignoreRaw = cmpopts.IgnoreFields(Master{}, "Raw")
var ignoreAgentRaw = cmpopts.IgnoreFields(Agent{}, "Raw", "ConfigDir")

func TestMasterDefaults(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no files":      nil,
		"empty file":    {"master": ""},
		"comments only": {"master": "# port: 1\n"},
		"null document": {"master": "---\n~\n"},
		"empty master.d": {
			"master.d/": "",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeDir(t, files)
			warn, warns := collect(dir)
			got, err := LoadMaster(dir, warn)
			if err != nil {
				t.Fatalf("LoadMaster: %v", err)
			}
			if diff := cmp.Diff(DefaultMaster(), got); diff != "" {
				t.Errorf("defaults (-want +got):\n%s", diff)
			}
			if len(*warns) != 0 {
				t.Errorf("got warnings %q, want none", *warns)
			}
		})
	}
	m := DefaultMaster()
	if m.Port != 4506 || m.Interface != "0.0.0.0" || m.KeepJobs != 24 || m.Timeout != 5 ||
		m.PkiDir != "/etc/halite/pki/master" || m.MasterJobCache != "local_cache" || m.LogLevel != "warning" ||
		m.MaxPendingKeys != 10000 || m.NewKeysPerAddress != 60 {
		t.Errorf("DefaultMaster() got %+v, want Salt's defaults", m)
	}
}

func TestAgentDefaults(t *testing.T) {
	dir := writeDir(t, nil)
	got, err := LoadAgent(dir, nil)
	if err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
	want := DefaultAgent()
	want.ConfigDir = dir
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	host, _ := os.Hostname()
	if got.ID != host {
		t.Errorf("ID got %q, want the host name %q", got.ID, host)
	}
	if fmt.Sprint(got.Master) != "[salt]" || got.MasterPort != 4506 || got.MasterType != "str" ||
		got.RandomReauthDelay != 10 || got.AcceptanceWaitTime != 10 || got.RetryDNS != 30 || got.AuthTimeout != 0 ||
		got.PkiDir != "/etc/halite/pki/agent" || got.FileClient != "remote" {
		t.Errorf("DefaultAgent() got %+v, want Salt's defaults", got)
	}
}

func TestMasterOptions(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(m *Master)
	}{
		{"interface and port", "interface: 127.0.0.1\nport: 4600\n", func(m *Master) { m.Interface, m.Port = "127.0.0.1", 4600 }},
		{"quoted port", "port: '4600'\n", func(m *Master) { m.Port = 4600 }},
		{"auto_accept true", "auto_accept: true\n", func(m *Master) { m.AutoAccept = true }},
		{"auto_accept yes", "auto_accept: yes\n", func(m *Master) { m.AutoAccept = true }},
		{"auto_accept On", "auto_accept: On\n", func(m *Master) { m.AutoAccept = true }},
		{"auto_accept off", "auto_accept: off\n", func(m *Master) { m.AutoAccept = false }},
		{"auto_accept NO", "auto_accept: NO\n", func(m *Master) { m.AutoAccept = false }},
		{"keep_jobs", "keep_jobs: 48\ntimeout: 10\n", func(m *Master) { m.KeepJobs, m.Timeout = 48, 10 }},
		{"null keeps default", "port:\nkeep_jobs: ~\n", func(m *Master) {}},
		{"log", "log_level: DEBUG\nlog_level_logfile: garbage\nlog_file: /tmp/x.log\n", func(m *Master) {
			m.LogLevel, m.LogLevelLogfile, m.LogFile = "debug", "garbage", "/tmp/x.log"
		}},
		{"event_return string", "event_return: redis\n", func(m *Master) { m.EventReturn = []string{"redis"} }},
		{"event_return list", "event_return:\n  - redis\n  - pgjsonb\n", func(m *Master) { m.EventReturn = []string{"redis", "pgjsonb"} }},
		{"file_roots", "file_roots:\n  base:\n    - /srv/a\n    - /srv/b\n  dev: /srv/dev\n", func(m *Master) {
			m.FileRoots = map[string][]string{"base": {"/srv/a", "/srv/b"}, "dev": {"/srv/dev"}}
		}},
		{"nodegroups", "nodegroups:\n  cams: 'L@cam1,cam2'\n  all: ['cam*', 'gw*']\n", func(m *Master) {
			m.Nodegroups = map[string]any{"cams": "L@cam1,cam2", "all": []any{"cam*", "gw*"}}
		}},
		{"reactor", "reactor:\n  - 'salt/minion/*/start':\n    - /srv/reactor/start.sls\n", func(m *Master) {
			m.Reactor = []any{map[string]any{"salt/minion/*/start": []any{"/srv/reactor/start.sls"}}}
		}},
		{"engines with anchors", "x: &conf {interval: 5}\nengines:\n  - redis_sentinel: *conf\n  - test: {<<: *conf, extra: on}\n", func(m *Master) {
			m.Engines = []any{
				map[string]any{"redis_sentinel": map[string]any{"interval": 5}},
				map[string]any{"test": map[string]any{"interval": 5, "extra": true}},
			}
		}},
		{"reactor workers", "reactor_worker_threads: 2\nreactor_worker_hwm: 50\nworker_threads: 3\n", func(m *Master) {
			m.ReactorWorkerThreads, m.ReactorWorkerHwm, m.WorkerThreads = 2, 50, 3
		}},
		{"new key limits", "max_pending_keys: 500\nnew_keys_per_address: 0\n", func(m *Master) { m.MaxPendingKeys, m.NewKeysPerAddress = 500, 0 }},
		{"job cache", "master_job_cache: pgjsonb\nutc_jid: True\n", func(m *Master) { m.MasterJobCache, m.UTCJID = "pgjsonb", true }},
		// Salt's list form (salt/config/__init__.py apply_master_config
		// repacks a list of one-key mappings), which stopped the master.
		{"nodegroups list form", "nodegroups:\n  - cams: 'L@cam1,cam2'\n  - all: ['cam*', 'gw*']\n  - cams: 'G@role:cam'\n", func(m *Master) {
			m.Nodegroups = map[string]any{"cams": "G@role:cam", "all": []any{"cam*", "gw*"}}
		}},
		{"pillar options", "pillarenv: dev\npillar_source_merging_strategy: overwrite\npillar_merge_lists: True\next_pillar_first: yes\npillar_cache_ttl: 0\npillar_safe_render_error: False\next_pillar:\n  - cmd_json: 'echo %s'\n  - file_tree: {root_dir: /srv/tree}\n", func(m *Master) {
			m.Pillarenv, m.PillarSourceMergingStrategy, m.PillarMergeLists, m.ExtPillarFirst, m.PillarCacheTTL, m.PillarSafeRenderError = "dev", "overwrite", true, true, 0, false
			m.ExtPillar = []any{map[string]any{"cmd_json": "echo %s"}, map[string]any{"file_tree": map[string]any{"root_dir": "/srv/tree"}}}
		}},
		{"ret_port is the port when port is absent", "ret_port: 4606\n", func(m *Master) { m.Port, m.RetPort = 4606, 4606 }},
		{"port wins over ret_port", "ret_port: 4606\nport: 4700\n", func(m *Master) { m.Port, m.RetPort = 4700, 4606 }},
		{"publish_port is checked, not used", "publish_port: 4505\n", func(m *Master) {}},
		{"typed former Raw options", "reactor_refresh_interval: 5\nloop_interval: '2'\nmax_frame: 1048576\nreactor_max_depth: -1\nid: m1\n", func(m *Master) {
			m.ReactorRefreshInterval, m.LoopInterval, m.MaxFrame, m.ReactorMaxDepth, m.ID = 5, 2, 1<<20, -1, "m1"
		}},
		{"event returner options", "event_return_queue: 10\nevent_return_queue_max_seconds: 3\nevent_return_whitelist: 'salt/*'\nevent_return_blacklist: [a, b]\next_job_cache: 'x, y'\nreturner_queue_max: 0\n", func(m *Master) {
			m.EventReturnQueue, m.EventReturnQueueMaxSeconds, m.ReturnerQueueMax = 10, 3, 0
			m.EventReturnWhitelist, m.EventReturnBlacklist, m.ExtJobCache = []string{"salt/*"}, []string{"a", "b"}, []string{"x", "y"}
		}},
		{"metrics", "metrics_port: 9100\nmetrics_interface: '::1'\n", func(m *Master) { m.MetricsPort, m.MetricsInterface = 9100, "::1" }},
		{"metrics off", "metrics_port: 0\n", func(m *Master) {}},
		{"relay_allow string", "relay_allow: 'relay-*'\n", func(m *Master) { m.RelayAllow = []string{"relay-*"} }},
		{"relay_allow list", "relay_allow:\n  - r1\n  - 'gw[0-9]'\n", func(m *Master) { m.RelayAllow = []string{"r1", "gw[0-9]"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"master": tt.yaml})
			got, err := LoadMaster(dir, nil)
			if err != nil {
				t.Fatalf("LoadMaster: %v", err)
			}
			want := DefaultMaster()
			tt.want(want)
			if diff := cmp.Diff(want, got, ignoreRaw); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAgentOptions(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(a *Agent)
	}{
		{"master string", "master: 10.0.0.1\n", func(a *Agent) { a.Master = []string{"10.0.0.1"} }},
		{"master string with comma is one", "master: 'a,b'\n", func(a *Agent) { a.Master = []string{"a,b"} }},
		{"master list", "master:\n  - m1\n  - m2\nmaster_type: failover\n", func(a *Agent) {
			a.Master, a.MasterType = []string{"m1", "m2"}, "failover"
		}},
		{"numeric id", "id: 1234\n", func(a *Agent) { a.ID = "1234" }},
		{"failover knobs", "master_alive_interval: 30\nmaster_failback: yes\nmaster_failback_interval: 60\nmaster_shuffle: on\nrandom_master: true\n", func(a *Agent) {
			a.MasterAliveInterval, a.MasterFailback, a.MasterFailbackInterval, a.MasterShuffle, a.RandomMaster = 30, true, 60, true, true
		}},
		{"auth knobs", "random_reauth_delay: 3\nacceptance_wait_time: 2\nacceptance_wait_time_max: 20\nretry_dns: 0\nmaster_finger: 'ab:cd'\nmaster_port: 4600\nauth_timeout: 20\n", func(a *Agent) {
			a.RandomReauthDelay, a.AcceptanceWaitTime, a.AcceptanceWaitTimeMax, a.RetryDNS, a.MasterFinger, a.MasterPort, a.AuthTimeout = 3, 2, 20, 0, "ab:cd", 4600, 20
		}},
		{"master_port quoted, as Salt allows", "master_port: '4600'\n", func(a *Agent) { a.MasterPort = 4600 }},
		{"spool_max", "spool_max: 1048576\n", func(a *Agent) { a.SpoolMax = 1 << 20 }},
		{"job_replay_window", "job_replay_window: 600\n", func(a *Agent) { a.JobReplayWindow = 600 }},
		{"return string", "return: redis, pgjsonb,,\n", func(a *Agent) { a.Return = []string{"redis", "pgjsonb"} }},
		{"return list", "return: [redis, 'a,b']\n", func(a *Agent) { a.Return = []string{"redis", "a,b"} }},
		{"grains pyyaml bools", "grains:\n  roles: [camera]\n  outdoor: yes\n  quoted: 'yes'\n  floor: 3\n", func(a *Agent) {
			a.Grains = map[string]any{"roles": []any{"camera"}, "outdoor": true, "quoted": "yes", "floor": 3}
		}},
		{"beacons", "beacons:\n  diskusage:\n    - /: 90%\n", func(a *Agent) {
			a.Beacons = map[string]any{"diskusage": []any{map[string]any{"/": "90%"}}}
		}},
		{"masterless", "file_client: local\nmaster_type: disable\n", func(a *Agent) { a.FileClient, a.MasterType = "local", "disable" }},
		{"relay", "relay:\n  interface: 10.0.0.1\n  port: 4600\n  spool_max: 1024\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.Interface, a.Relay.Port, a.Relay.SpoolMax = "10.0.0.1", 4600, 1024
		}},
		{"relay defaults", "relay: {}\n", func(a *Agent) { a.Relay = DefaultRelay() }},
		{"relay batch", "relay:\n  batch_max: 1048576\n  batch_delay: 0\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.BatchMax, a.Relay.BatchDelay = 1<<20, 0
		}},
		{"relay batch low", "relay:\n  batch_max: '1024'\n  batch_delay: 1000\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.BatchMax, a.Relay.BatchDelay = 1024, 1000
		}},
		{"relay device_timeout", "relay:\n  device_timeout: 600\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.DeviceTimeout = 600
		}},
		{"relay gc_percent", "relay:\n  gc_percent: 100\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.GCPercent = 100
		}},
		{"relay_finger", "relay_finger: 'ab:cd'\n", func(a *Agent) { a.RelayFinger = "ab:cd" }},
		{"discovery list", "relay:\n  discovery:\n    methods: [onvif, ssdp]\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.Discovery = DefaultDiscovery()
			a.Relay.Discovery.ONVIF = &DiscoveryMethod{Passive: true, Active: true}
			a.Relay.Discovery.SSDP = &DiscoveryMethod{Passive: true, Active: true}
		}},
		{"discovery mapping", "relay:\n  discovery:\n    interval: 60\n    packets_per_second: 500\n    max_devices: 100\n    gone_after: 600\n" +
			"    methods:\n      arp: {interfaces: eth0, subnets: [10.1.0.9/22, 192.168.0.0/24], passive: no}\n      onvif:\n      mdns: {interfaces: [eth0, eth1]}\n      ssdp: off\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.Discovery = &Discovery{Interval: 60, PacketsPerSecond: 500, MaxDevices: 100, GoneAfter: 600,
				ARP:   &DiscoveryMethod{Interfaces: []string{"eth0"}, Subnets: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/22"), netip.MustParsePrefix("192.168.0.0/24")}, Active: true},
				ONVIF: &DiscoveryMethod{Passive: true, Active: true}, MDNS: &DiscoveryMethod{Interfaces: []string{"eth0", "eth1"}, Passive: true, Active: true}}
		}},
		{"proxy", "relay:\n  proxy:\n    - id: cam7\n      proxytype: onvif\n      host: 10.0.0.7\n      username: admin\n      password_pillar: 'proxy:cam7:password'\n      grains: {site: depot}\n" +
			"    - {id: gw1, proxytype: http, url: 'http://10.0.0.8/api', timeout: 3, health_path: /ping}\n", func(a *Agent) {
			a.Relay = DefaultRelay()
			a.Relay.Proxies = []Proxy{
				{ID: "cam7", ProxyType: "onvif", Host: "10.0.0.7", Username: "admin", PasswordPillar: "proxy:cam7:password", Timeout: 10, Grains: map[string]any{"site": "depot"}, Line: 3},
				{ID: "gw1", ProxyType: "http", URL: "http://10.0.0.8/api", Timeout: 3, HealthPath: "/ping", Line: 9},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"agent": tt.yaml})
			got, err := LoadAgent(dir, nil)
			if err != nil {
				t.Fatalf("LoadAgent: %v", err)
			}
			want := DefaultAgent()
			tt.want(want)
			if diff := cmp.Diff(want, got, ignoreAgentRaw, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDropInOrder(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"master":                  "port: 1001\ninterface: 10.0.0.1\nfile_roots: {base: [/a], dev: [/d]}\n",
		"master.d/20-second.conf": "port: 1003\nkeep_jobs: 3\n",
		"master.d/10-first.conf":  "port: 1002\nkeep_jobs: 2\ntimeout: 9\nfile_roots: {base: [/b]}\n",
		"master.d/99-ignored.txt": "port: 9999\n",
		"master.d/sub.conf/":      "",
	})
	got, err := LoadMaster(dir, nil)
	if err != nil {
		t.Fatalf("LoadMaster: %v", err)
	}
	want := DefaultMaster()
	want.Port, want.Interface, want.KeepJobs, want.Timeout = 1003, "10.0.0.1", 3, 9
	want.FileRoots = map[string][]string{"base": {"/b"}} // a later key replaces the whole value, as in Salt
	if diff := cmp.Diff(want, got, ignoreRaw); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	wantRaw := map[string]any{
		"port": 1003, "interface": "10.0.0.1", "keep_jobs": 3, "timeout": 9,
		"file_roots": map[string]any{"base": []any{"/b"}},
	}
	if diff := cmp.Diff(wantRaw, got.Raw); diff != "" {
		t.Errorf("Raw (-want +got):\n%s", diff)
	}

	// Drop-ins apply even without a main file.
	dir = writeDir(t, map[string]string{"agent.d/id.conf": "id: cam7\n"})
	a, err := LoadAgent(dir, nil)
	if err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
	if a.ID != "cam7" {
		t.Errorf("ID got %q, want cam7 from agent.d", a.ID)
	}
}

func TestRootDir(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		yaml string
		want func(m *Master)
	}{
		{"default root leaves paths", "", func(m *Master) {}},
		{"root relocates defaults", "root_dir: /tmp/h1\n", func(m *Master) {
			m.RootDir = "/tmp/h1"
			m.PkiDir, m.CacheDir, m.SockDir = "/tmp/h1/etc/halite/pki/master", "/tmp/h1/var/cache/halite/master", "/tmp/h1/var/run/halite/master"
			m.LogFile = "/tmp/h1/var/log/halite/master"
		}},
		{"trailing slash", "root_dir: /tmp/h1/\n", func(m *Master) {
			m.RootDir = "/tmp/h1"
			m.PkiDir, m.CacheDir, m.SockDir = "/tmp/h1/etc/halite/pki/master", "/tmp/h1/var/cache/halite/master", "/tmp/h1/var/run/halite/master"
			m.LogFile = "/tmp/h1/var/log/halite/master"
		}},
		{"paths already under root kept", "root_dir: /tmp/h1\npki_dir: /tmp/h1/pki\ncachedir: /tmp/h1\nsock_dir: /tmp/h10/s\n", func(m *Master) {
			m.RootDir = "/tmp/h1"
			m.PkiDir, m.CacheDir, m.SockDir = "/tmp/h1/pki", "/tmp/h1", "/tmp/h1/tmp/h10/s"
			m.LogFile = "/tmp/h1/var/log/halite/master"
		}},
		{"relative paths go under root", "root_dir: /tmp/h1\npki_dir: pki\nautosign_file: autosign.conf\nautoreject_file: /etc/halite/autoreject.conf\nautosign_grains_dir: ag\n", func(m *Master) {
			m.RootDir = "/tmp/h1"
			m.PkiDir, m.CacheDir, m.SockDir = "/tmp/h1/pki", "/tmp/h1/var/cache/halite/master", "/tmp/h1/var/run/halite/master"
			m.LogFile = "/tmp/h1/var/log/halite/master"
			m.AutosignFile, m.AutorejectFile, m.AutosignGrainsDir = "/tmp/h1/autosign.conf", "/tmp/h1/etc/halite/autoreject.conf", "/tmp/h1/ag"
		}},
		{"relative path with default root", "pki_dir: pki\n", func(m *Master) { m.PkiDir = "/pki" }},
		{"log_file URI untouched", "root_dir: /tmp/h1\nlog_file: udp://loghost:514\n", func(m *Master) {
			m.RootDir = "/tmp/h1"
			m.PkiDir, m.CacheDir, m.SockDir = "/tmp/h1/etc/halite/pki/master", "/tmp/h1/var/cache/halite/master", "/tmp/h1/var/run/halite/master"
			m.LogFile = "udp://loghost:514"
		}},
		{"relative root_dir is from the working directory", "root_dir: rel\n", func(m *Master) {
			r := filepath.Join(cwd, "rel")
			m.RootDir = r
			m.PkiDir, m.CacheDir, m.SockDir = r+"/etc/halite/pki/master", r+"/var/cache/halite/master", r+"/var/run/halite/master"
			m.LogFile = r + "/var/log/halite/master"
		}},
		{"root_dir from master.d", "", func(m *Master) {}}, // see below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"master": tt.yaml})
			got, err := LoadMaster(dir, nil)
			if err != nil {
				t.Fatalf("LoadMaster: %v", err)
			}
			want := DefaultMaster()
			tt.want(want)
			if diff := cmp.Diff(want, got, ignoreRaw); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// root_dir set in a drop-in relocates paths set in the main file too.
	dir := writeDir(t, map[string]string{
		"agent":             "pki_dir: /etc/halite/pki/cam\n",
		"agent.d/root.conf": "root_dir: /tmp/h2\n",
	})
	a, err := LoadAgent(dir, nil)
	if err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
	want := []string{"/tmp/h2", "/tmp/h2/etc/halite/pki/cam", "/tmp/h2/var/cache/halite/agent", "/tmp/h2/var/run/halite/agent", "/tmp/h2/var/log/halite/agent"}
	if got := []string{a.RootDir, a.PkiDir, a.CacheDir, a.SockDir, a.LogFile}; !reflect.DeepEqual(got, want) {
		t.Errorf("agent paths got %q, want %q", got, want)
	}
	if got, want := a.SocketPath(), "/tmp/h2/var/run/halite/agent/agent.sock"; got != want {
		t.Errorf("SocketPath() got %q, want %q", got, want)
	}
	if got, want := a.SpoolDir(), "/tmp/h2/var/cache/halite/agent/spool"; got != want {
		t.Errorf("SpoolDir() got %q, want %q", got, want)
	}
	if got, want := a.RelaySpoolDir(), "/tmp/h2/var/cache/halite/agent/relay-spool"; got != want {
		t.Errorf("RelaySpoolDir() got %q, want %q", got, want)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		agent bool
		want  string // Error() with the temporary dir replaced by "D"
	}{
		{"relay option", map[string]string{"agent": "id: r1\nrelay:\n  port: 4600\n  max_devices: 0\n"}, true,
			`D/agent:4: relay: max_devices: expected an integer from 1 to 16384, got 0`},
		{"relay unknown", map[string]string{"agent": "relay:\n\n  listen: x\n"}, true,
			`D/agent:3: relay: unknown relay option "listen" (known: admit, batch_delay, batch_max, chunk_cache_bytes, chunk_cache_dir, device_timeout, discovery, event_burst, event_rate, gc_percent, heartbeat, interface, max_devices, port, proxy, proxy_dynamic_max, spool_max)`},
		{"proxy no type", map[string]string{"agent": "relay:\n  proxy:\n    - id: cam1\n      proxytype: ssh\n      host: 10.0.0.5\n      username: root\n    - id: cam2\n      host: 10.0.0.6\n"}, true,
			`D/agent:7: relay: proxy: proxy minion cam2: no proxytype (ssh, onvif, http)`},
		{"proxy bad type", map[string]string{"agent": "relay:\n  proxy:\n    - id: cam1\n      proxytype: telnet\n"}, true,
			`D/agent:4: relay: proxy: proxytype: expected one of ssh, onvif, http, got "telnet"`},
		{"proxy duplicate", map[string]string{"agent": "relay:\n  proxy:\n    - {id: a, proxytype: http, url: 'http://10.0.0.1/'}\n    - {id: a, proxytype: http, url: 'http://10.0.0.2/'}\n"}, true,
			`D/agent:4: relay: proxy: proxy minion a is also at line 3`},
		{"proxy unknown option", map[string]string{"agent": "relay:\n  proxy:\n    - id: a\n      proxytype: http\n      url: http://x/\n      passwd: x\n"}, true,
			`D/agent:6: relay: proxy: unknown proxy option "passwd" (known: accept_new_hostkey, grains, health_path, host, id, key_file, known_hosts, password, password_pillar, port, proxytype, timeout, url, username)`},
		{"proxy http without url", map[string]string{"agent": "relay:\n  proxy:\n    - id: a\n      proxytype: http\n"}, true,
			`D/agent:3: relay: proxy: proxy minion a: proxytype http needs url`},
		{"proxy bad id", map[string]string{"agent": "relay:\n  proxy:\n    - id: 'a/b'\n      proxytype: http\n"}, true,
			`D/agent:3: relay: proxy: id: id "a/b" has '/' at byte 1: ids may not hold / \ * ? [ ] or ,`},
		{"relay batch_max small", map[string]string{"agent": "relay:\n  batch_max: 1023\n"}, true,
			`D/agent:2: relay: batch_max: expected an integer from 1024 to 1048576, got 1023`},
		{"relay batch_max large", map[string]string{"agent": "id: r1\nrelay:\n  port: 4600\n\n  batch_max: 4194304\n"}, true,
			`D/agent:5: relay: batch_max: expected an integer from 1024 to 1048576, got 4194304`},
		{"relay batch_max text", map[string]string{"agent": "relay:\n  batch_max: 64k\n"}, true,
			`D/agent:2: relay: batch_max: expected an integer, got "64k"`},
		{"relay batch_delay negative", map[string]string{"agent": "relay:\n  batch_delay: -1\n"}, true,
			`D/agent:2: relay: batch_delay: expected an integer from 0 to 1000, got -1`},
		{"relay batch_delay large", map[string]string{"agent": "relay:\n  event_rate: 5\n  batch_delay: 1001\n"}, true,
			`D/agent:3: relay: batch_delay: expected an integer from 0 to 1000, got 1001`},
		{"relay device_timeout short", map[string]string{"agent": "relay:\n  port: 4600\n  device_timeout: 4\n"}, true,
			`D/agent:3: relay: device_timeout: expected an integer from 5 to 600, got 4`},
		{"relay gc_percent off", map[string]string{"agent": "relay:\n  gc_percent: -1\n"}, true,
			`D/agent:2: relay: gc_percent: expected an integer from 10 to 400, got -1`},
		{"discovery subnet too large", map[string]string{"agent": "relay:\n  discovery:\n    methods:\n      arp:\n        subnets:\n          - 10.0.0.0/24\n          - 10.0.0.0/15\n"}, true,
			`D/agent:7: relay: discovery: methods: arp: subnets: 10.0.0.0/15 is larger than a /16 (131072 addresses): sweep smaller subnets`},
		{"discovery subnet v6", map[string]string{"agent": "relay:\n  discovery:\n    methods:\n      arp: {subnets: 'fd00::/64'}\n"}, true,
			`D/agent:4: relay: discovery: methods: arp: subnets: expected an IPv4 network (10.0.0.0/22), got "fd00::/64"`},
		{"discovery unknown method", map[string]string{"agent": "relay:\n  discovery:\n    methods: [arp,\n      upnp]\n"}, true,
			`D/agent:4: relay: discovery: methods: unknown discovery method "upnp" (known: arp, onvif, mdns, ssdp)`},
		{"discovery method option", map[string]string{"agent": "relay:\n  discovery:\n    methods:\n      onvif:\n        subnets: [10.0.0.0/24]\n"}, true,
			`D/agent:5: relay: discovery: methods: onvif: unknown onvif option "subnets" (known: interfaces)`},
		{"discovery rate", map[string]string{"agent": "relay:\n  discovery:\n    methods: [arp]\n    packets_per_second: 0\n"}, true,
			`D/agent:4: relay: discovery: packets_per_second: expected an integer from 1 to 100000, got 0`},
		{"discovery no method", map[string]string{"agent": "relay:\n  discovery:\n    interval: 60\n"}, true,
			`D/agent:3: relay: discovery: no method given (methods: arp, onvif, mdns, ssdp)`},
		{"discovery unknown option", map[string]string{"agent": "relay:\n  discovery:\n    rate: 5\n"}, true,
			`D/agent:3: relay: discovery: unknown discovery option "rate" (known: gone_after, interval, max_devices, methods, packets_per_second)`},
		{"relay list", map[string]string{"agent": "relay: [a]\n"}, true,
			`D/agent:1: relay: expected a mapping of relay options, got a list`},
		{"int", map[string]string{"master": "interface: 0.0.0.0\n\nport: abc\n"}, false,
			`D/master:3: port: expected an integer, got "abc"`},
		{"master bad port", map[string]string{"agent": "id: a\nmaster:\n  - m1\n  - m2:abc\n"}, true,
			`D/agent:2: master: master "m2:abc": want a host, host:port or [v6]:port, with a port from 1 to 65535`},
		{"master port 0", map[string]string{"agent": "master: m1:0\n"}, true,
			`D/agent:1: master: master "m1:0": want a host, host:port or [v6]:port, with a port from 1 to 65535`},
		{"master empty", map[string]string{"agent": "master: ['']\n"}, true,
			`D/agent:1: master: master "": want a host, host:port or [v6]:port, with a port from 1 to 65535`},
		{"master bad v6", map[string]string{"agent": "master: '[fe80::1'\n"}, true,
			`D/agent:1: master: master "[fe80::1": want a host, host:port or [v6]:port, with a port from 1 to 65535`},
		{"auth_timeout negative", map[string]string{"agent": "id: a\nauth_timeout: -1\n"}, true,
			`D/agent:2: auth_timeout: expected an integer from 0 to 3600, got -1`},
		{"jid_node range", map[string]string{"master": "jid_node: 1000\n"}, false,
			`D/master:1: jid_node: expected an integer from 0 to 999, got 1000`},
		{"int from list", map[string]string{"master": "keep_jobs: [1]\n"}, false,
			`D/master:1: keep_jobs: expected an integer, got a list`},
		{"negative", map[string]string{"master": "keep_jobs: -1\n"}, false,
			`D/master:1: keep_jobs: expected a non-negative integer, got -1`},
		{"max_pending_keys negative", map[string]string{"master": "port: 4506\nmax_pending_keys: -5\n"}, false,
			`D/master:2: max_pending_keys: expected a non-negative integer, got -5`},
		{"new_keys_per_address text", map[string]string{"master": "new_keys_per_address: lots\n"}, false,
			`D/master:1: new_keys_per_address: expected an integer, got "lots"`},
		{"port range", map[string]string{"master": "port: 70000\n"}, false,
			`D/master:1: port: expected a port number from 1 to 65535, got 70000`},
		{"metrics_port range", map[string]string{"master": "metrics_port: 65536\n"}, false,
			`D/master:1: metrics_port: expected an integer from 0 to 65535, got 65536`},
		{"metrics_interface empty", map[string]string{"master": "metrics_port: 9100\nmetrics_interface: ''\n"}, false,
			`D/master:2: metrics_interface: expected an address, got an empty one (0.0.0.0 or :: binds every interface)`},
		{"bool", map[string]string{"master": "# c\nauto_accept: maybe\n"}, false,
			`D/master:2: auto_accept: expected a boolean (true/false, yes/no, on/off), got "maybe"`},
		{"bool number", map[string]string{"master": "auto_accept: 1\n"}, false,
			`D/master:1: auto_accept: expected a boolean (true/false, yes/no, on/off), got "1"`},
		{"string from mapping", map[string]string{"master": "pki_dir:\n  a: b\n"}, false,
			`D/master:1: pki_dir: expected a string, got a mapping`},
		{"log level", map[string]string{"master": "log_level: loud\n"}, false,
			`D/master:1: log_level: expected a log level (all, garbage, trace, debug, profile, info, warning, error, critical, quiet), got "loud"`},
		{"mapping", map[string]string{"master": "nodegroups: 5\n"}, false,
			`D/master:1: nodegroups: expected a mapping, got "5"`},
		{"nodegroups list of strings", map[string]string{"master": "nodegroups:\n  - g1: 'L@a'\n  - b\n"}, false,
			`D/master:3: nodegroups: expected a mapping of names to expressions or a list of one-name mappings, got a list holding "b"`},
		{"ext_pillar not a list", map[string]string{"master": "port: 4506\next_pillar:\n  cmd_json: echo\n"}, false,
			`D/master:2: ext_pillar: expected a list of one-key mappings {interface: config}, got a mapping`},
		{"ext_pillar entry of two", map[string]string{"master": "ext_pillar:\n  - cmd_json: echo\n    cmd_yaml: echo\n"}, false,
			`D/master:2: ext_pillar: expected a list of one-key mappings {interface: config}, got a list holding a mapping of 2 names`},
		{"ext_pillar file_tree without root_dir", map[string]string{"master": "ext_pillar:\n  - cmd_json: 'echo {}'\n  - file_tree: {follow_dir_links: True}\n"}, false,
			`D/master:3: ext_pillar: file_tree: root_dir is required`},
		{"pillar strategy", map[string]string{"master": "pillar_source_merging_strategy: deep\n"}, false,
			`D/master:1: pillar_source_merging_strategy: expected one of smart, recurse, overwrite, none, aggregate, got "deep"`},
		{"nodegroups list entry of two", map[string]string{"master": "nodegroups:\n  - {g1: a, g2: b}\n"}, false,
			`D/master:2: nodegroups: expected a mapping of names to expressions or a list of one-name mappings, got a list holding a mapping of 2 names`},
		// Options the master used to read from Raw, falling back to the
		// default on a bad value: now file:line errors.
		{"reactor_refresh_interval", map[string]string{"master": "port: 4506\nreactor_refresh_interval: abc\n"}, false,
			`D/master:2: reactor_refresh_interval: expected an integer, got "abc"`},
		{"reactor_refresh_interval zero", map[string]string{"master": "reactor_refresh_interval: 0\n"}, false,
			`D/master:1: reactor_refresh_interval: expected an integer from 1 to 86400, got 0`},
		{"loop_interval", map[string]string{"master.d/a.conf": "loop_interval: [1]\n"}, false,
			`D/master.d/a.conf:1: loop_interval: expected an integer, got a list`},
		{"reactor_max_depth", map[string]string{"master": "reactor_max_depth: deep\n"}, false,
			`D/master:1: reactor_max_depth: expected an integer, got "deep"`},
		{"returner_queue_max", map[string]string{"master": "returner_queue_max: -1\n"}, false,
			`D/master:1: returner_queue_max: expected a non-negative integer, got -1`},
		{"max_frame small", map[string]string{"master": "max_frame: 10\n"}, false,
			`D/master:1: max_frame: expected an integer from 1024 to 67108864, got 10`},
		{"max_frame string", map[string]string{"master": "max_frame: 4M\n"}, false,
			`D/master:1: max_frame: expected an integer, got "4M"`},
		{"event_return_queue", map[string]string{"master": "event_return_queue: many\n"}, false,
			`D/master:1: event_return_queue: expected an integer, got "many"`},
		{"event_return_queue_max_seconds", map[string]string{"master": "event_return_queue_max_seconds: 1.5\n"}, false,
			`D/master:1: event_return_queue_max_seconds: expected an integer, got "1.5"`},
		{"event_return_whitelist", map[string]string{"master": "event_return_whitelist: {a: 1}\n"}, false,
			`D/master:1: event_return_whitelist: expected a string or a list of strings, got a mapping`},
		{"ext_job_cache", map[string]string{"master": "ext_job_cache: [[a]]\n"}, false,
			`D/master:1: ext_job_cache: expected a string or a list of strings, got a list holding a list`},
		{"master id", map[string]string{"master": "id: [m]\n"}, false,
			`D/master:1: id: expected a string, got a list`},
		{"ret_port", map[string]string{"master": "ret_port: 70000\n"}, false,
			`D/master:1: ret_port: expected a port number from 1 to 65535, got 70000`},
		{"publish_port checked though unused", map[string]string{"master": "publish_port: x\n"}, false,
			`D/master:1: publish_port: expected an integer, got "x"`},
		{"fips_mode refused", map[string]string{"master": "fips_mode: True\n"}, false,
			`D/master:1: fips_mode: not supported: Halite's TLS 1.3 (QUIC) is not a FIPS module`},
		{"agent verify_master_pubkey_sign refused", map[string]string{"agent": "verify_master_pubkey_sign: yes\n"}, true,
			`D/agent:1: verify_master_pubkey_sign: not supported: Halite pins the master's key with master_finger instead`},
		{"relay_allow mapping", map[string]string{"master": "port: 4506\nrelay_allow: {r1: true}\n"}, false,
			`D/master:2: relay_allow: expected a string or a list of strings, got a mapping`},
		{"relay_allow empty id", map[string]string{"master": "relay_allow: ['r1', '']\n"}, false,
			`D/master:1: relay_allow: expected agent ids or globs, got an empty one`},
		{"list", map[string]string{"master": "reactor: {a: b}\n"}, false,
			`D/master:1: reactor: expected a list, got a mapping`},
		{"roots", map[string]string{"master": "file_roots:\n  base:\n    - {a: b}\n"}, false,
			`D/master:1: file_roots: base: expected a string or a list of strings, got a list holding a mapping`},
		{"yaml syntax", map[string]string{"master": "port: 1\ninterface: [a\nkeep_jobs: 3\n"}, false,
			`D/master:2: invalid YAML: did not find expected ',' or ']'`},
		{"yaml bad indentation", map[string]string{"master": "port: 1\nfile_roots:\n  base:\n    - /srv\n   dev: x\n"}, false,
			`D/master:3: invalid YAML: did not find expected key`},
		{"yaml bad indentation at top", map[string]string{"master": "port: 1\ninterface: x\n  timeout: 3\n"}, false,
			`D/master:3: invalid YAML: mapping values are not allowed in this context`},
		{"yaml unclosed at end of file", map[string]string{"master": "[a\n"}, false,
			`D/master:2: invalid YAML: did not find expected ',' or ']'`},
		{"yaml top-level key", map[string]string{"master": "port: 1\ninterface: x\n- y\n"}, false,
			`D/master:3: invalid YAML: did not find expected key`},
		{"yaml mapping values", map[string]string{"master": "port: 1\nid: a: b\n"}, false,
			`D/master:2: invalid YAML: mapping values are not allowed in this context`},
		{"yaml tab", map[string]string{"master": "file_roots:\n\tbase: /srv\n"}, false,
			`D/master:2: invalid YAML: found character that cannot start any token`},
		{"not a mapping", map[string]string{"master": "- port\n- 1\n"}, false,
			`D/master:1: expected a mapping of option names to values, got a list`},
		{"scalar document", map[string]string{"master": "just words\n"}, false,
			`D/master:1: expected a mapping of option names to values, got "just words"`},
		{"two documents", map[string]string{"master": "port: 1\n---\nport: 2\n"}, false,
			`D/master:2: expected one YAML document, found another`},
		{"key not a string", map[string]string{"master": "[a]: 1\n"}, false,
			`D/master:1: expected an option name, got a list`},
		{"error in drop-in", map[string]string{"master": "port: 1\n", "master.d/a.conf": "\n\ntimeout: soon\n"}, false,
			`D/master.d/a.conf:3: timeout: expected an integer, got "soon"`},
		{"main file is a directory", map[string]string{"master/": ""}, false,
			`D/master: read config: is a directory`},
		{"drop-in dir is a file", map[string]string{"master.d": "x"}, false,
			`D/master.d: read config directory: not a directory`},
		{"agent master list of lists", map[string]string{"agent": "master:\n  - [a]\n"}, true,
			`D/agent:1: master: expected a string or a list of strings, got a list holding a list`},
		{"agent master_type", map[string]string{"agent": "master_type: func\n"}, true,
			`D/agent:1: master_type: expected one of str, failover, disable, got "func"`},
		{"agent file_client", map[string]string{"agent": "file_client: ftp\n"}, true,
			`D/agent:1: file_client: expected one of remote, local, got "ftp"`},
		{"agent grains", map[string]string{"agent": "id: x\ngrains: 5\n"}, true,
			`D/agent:2: grains: expected a mapping, got "5"`},
		{"agent id with a comma", map[string]string{"agent": "master: m1\n\nid: cam9,evil\n"}, true,
			`D/agent:3: id: id "cam9,evil" has ',' at byte 4: ids may not hold / \ * ? [ ] or ,`},
		{"agent id glob", map[string]string{"agent.d/a.conf": "id: 'cam*'\n"}, true,
			`D/agent.d/a.conf:1: id: id "cam*" has '*' at byte 3: ids may not hold / \ * ? [ ] or ,`},
		{"agent id flag", map[string]string{"agent": "id: -L\n"}, true,
			`D/agent:1: id: id "-L" starts with '-'`},
		{"agent id space", map[string]string{"agent": "id: 'cam 9'\n"}, true,
			`D/agent:1: id: id "cam 9" has a control, format or space character at byte 3`},
		{"agent master_port", map[string]string{"agent": "master_port: 4506x\n"}, true,
			`D/agent:1: master_port: expected an integer, got "4506x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			var err error
			if tt.agent {
				_, err = LoadAgent(dir, nil)
			} else {
				_, err = LoadMaster(dir, nil)
			}
			if err == nil {
				t.Fatalf("got no error, want %s", tt.want)
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got %T %v, want *config.Error", err, err)
			}
			if got := strings.ReplaceAll(err.Error(), dir, "D"); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"master": strings.Join([]string{
			"port: 4506",
			"foo: bar",                  // 2 unknown
			"gitfs_remotes: [x]",        // 3 Salt, unused: warned
			"presence_events: true",     // 4 Salt, unused: warned
			"master_port: 4506",         // 5 agent option
			"ret_port: 4606",            // 6 differs from port: port wins
			"port: 4507",                // 7 duplicate
			"custom:\n  nested: [1, 2]", // 8 unknown, kept in Raw
		}, "\n") + "\n",
		"master.d/x.conf": "\nbar: 1\n",
	})
	warn, got := collect(dir)
	m, err := LoadMaster(dir, warn)
	if err != nil {
		t.Fatalf("LoadMaster: %v", err)
	}
	want := []string{
		`master:2: unknown option "foo"`,
		`master:3: option "gitfs_remotes" is a Salt option Halite does not use; it has no effect`,
		`master:4: option "presence_events" is a Salt option Halite does not use; it has no effect`,
		`master:5: option "master_port" is an agent option; the master ignores it`,
		`master:7: option "port" is set again (first at line 1); the last one wins`,
		`master:8: unknown option "custom"`,
		`master.d/x.conf:2: unknown option "bar"`,
		`master:6: ret_port 4606 differs from port 4507; Halite has one UDP port and uses port`,
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if m.Port != 4507 {
		t.Errorf("Port got %d, want 4507 (last wins)", m.Port)
	}
	wantRaw := map[string]any{"foo": "bar", "custom": map[string]any{"nested": []any{1, 2}}, "bar": 1, "presence_events": true}
	for k, v := range wantRaw {
		if diff := cmp.Diff(v, m.Raw[k]); diff != "" {
			t.Errorf("Raw[%q] (-want +got):\n%s", k, diff)
		}
	}

	dir = writeDir(t, map[string]string{"agent": "id: a\nauto_accept: true\nmetrics_port: 9100\nbogus: 1\n"})
	warn, got = collect(dir)
	if _, err := LoadAgent(dir, warn); err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
	want = []string{
		`agent:2: option "auto_accept" is a master option; the agent ignores it`,
		`agent:3: option "metrics_port" is not implemented in this build; it has no effect`,
		`agent:4: unknown option "bogus"`,
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("agent warnings (-want +got):\n%s", diff)
	}
}

func TestDerivedPaths(t *testing.T) {
	m := DefaultMaster()
	tests := []struct{ got, want string }{
		{m.SocketPath(), "/var/run/halite/master/master.sock"},
		{m.JobCachePath(), "/var/cache/halite/master/jobs.db"},
		{m.KeyDir("accepted"), "/etc/halite/pki/master/minions"},
		{m.KeyDir("pending"), "/etc/halite/pki/master/minions_pre"},
		{m.KeyDir("rejected"), "/etc/halite/pki/master/minions_rejected"},
		{m.KeyDir("denied"), "/etc/halite/pki/master/minions_denied"},
		{m.KeyDir("other"), ""},
		{m.ListenAddr(), "0.0.0.0:4506"},
		{m.FileLogLevel(), "warning"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%d: got %q, want %q", i, tt.got, tt.want)
		}
	}
	m.LogLevelLogfile = "debug"
	if got := m.FileLogLevel(); got != "debug" {
		t.Errorf("FileLogLevel() got %q, want debug", got)
	}
}

func TestMasterAddrs(t *testing.T) {
	a := DefaultAgent()
	a.MasterPort = 4600
	a.Master = []string{"m1", "m2:4700", "10.0.0.1", "::1", "[fe80::1]", "[2001:db8::1]:4800", " "}
	got := a.MasterAddrs()
	want := []string{"m1:4600", "m2:4700", "10.0.0.1:4600", "[::1]:4600", "[fe80::1]:4600", "[2001:db8::1]:4800"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MasterAddrs() (-want +got):\n%s", diff)
	}
}

// TestEveryFieldHasAnOption keeps the structs and the option tables in
// step: every yaml-tagged field is loadable, and every option has a field.
func TestEveryFieldHasAnOption(t *testing.T) {
	check := func(name string, typ reflect.Type, options []string) {
		var tags []string
		var fields func(typ reflect.Type)
		fields = func(typ reflect.Type) {
			for i := range typ.NumField() {
				switch tag := typ.Field(i).Tag.Get("yaml"); tag {
				case "", "-":
				case ",inline": // an embedded group (StateOutput)
					fields(typ.Field(i).Type)
				default:
					tags = append(tags, tag)
				}
			}
		}
		fields(typ)
		sort.Strings(tags)
		sort.Strings(options)
		if diff := cmp.Diff(tags, options); diff != "" {
			t.Errorf("%s: yaml tags vs options (-tags +options):\n%s", name, diff)
		}
	}
	implemented := func(tbl map[string]bool) []string {
		var out []string
		for k, ok := range tbl {
			if ok {
				out = append(out, k)
			}
		}
		return out
	}
	mo, ao := map[string]bool{}, map[string]bool{}
	for k, o := range masterRole().options {
		mo[k] = o.status == Implemented
	}
	for k, o := range agentRole.options {
		ao[k] = o.status == Implemented
	}
	check("Master", reflect.TypeFor[Master](), implemented(mo))
	check("Agent", reflect.TypeFor[Agent](), implemented(ao))
}

func TestMissingConfigDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "does", "not", "exist")
	m, err := LoadMaster(dir, nil)
	if err != nil {
		t.Fatalf("LoadMaster of a missing dir: %v, want defaults", err)
	}
	if diff := cmp.Diff(DefaultMaster(), m); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := LoadAgent(dir, nil); err != nil {
		t.Fatalf("LoadAgent of a missing dir: %v, want defaults", err)
	}
}

// TestAgentConfigDir: the directory the configuration came from is kept,
// for beacons.save (CONFIG_DIR/agent.d/beacons.conf).
func TestAgentConfigDir(t *testing.T) {
	dir := writeDir(t, map[string]string{"agent": "id: cam1\n"})
	got, err := LoadAgent(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.ConfigDir != dir {
		t.Errorf("ConfigDir = %q, want %q", got.ConfigDir, dir)
	}
}

// TestMinionFallback: with no CONFIG_DIR/agent, the agent reads Salt's
// CONFIG_DIR/minion and minion.d/*.conf (then agent.d/*.conf, where
// beacons.save writes), so that -c /etc/salt works; with CONFIG_DIR/agent
// present, minion files are not read.
func TestMinionFallback(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		wantID string
		wantMP int
	}{
		{"minion only", map[string]string{"minion": "id: m1\nmaster_port: 4600\n"}, "m1", 4600},
		{"minion and minion.d", map[string]string{"minion": "id: m1\n", "minion.d/a.conf": "id: m2\n"}, "m2", 4506},
		{"minion.d alone", map[string]string{"minion.d/a.conf": "id: m3\n"}, "m3", 4506},
		{"agent.d after minion.d", map[string]string{"minion": "id: m1\n", "minion.d/a.conf": "master_port: 4700\n", "agent.d/b.conf": "id: a2\n"}, "a2", 4700},
		{"agent wins", map[string]string{"agent": "id: a1\n", "minion": "id: m1\n", "minion.d/a.conf": "master_port: 4700\n"}, "a1", 4506},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			a, err := LoadAgent(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.ID != tt.wantID || a.MasterPort != tt.wantMP {
				t.Errorf("got id %q master_port %d, want %q %d", a.ID, a.MasterPort, tt.wantID, tt.wantMP)
			}
		})
	}
	dir := writeDir(t, map[string]string{"minion": "id: m1\nbogus: 1\n"})
	warn, got := collect(dir)
	if _, err := LoadAgent(dir, warn); err != nil {
		t.Fatal(err)
	}
	if want := []string{`minion:2: unknown option "bogus"`}; !cmp.Equal(want, *got) {
		t.Errorf("warnings got %q, want %q", *got, want)
	}
}
