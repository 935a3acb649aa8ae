package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Agent is the agent's configuration (CONFIG_DIR/agent and
// CONFIG_DIR/agent.d/*.conf), for devices, relays and halite-call. Field
// tags are Salt's minion option names. Paths are already relocated under
// RootDir. Durations are in seconds, as in Salt.
type Agent struct {
	RootDir                string   `yaml:"root_dir"`
	ID                     string   `yaml:"id"`
	Master                 []string `yaml:"master"` // a string or a list
	MasterPort             int      `yaml:"master_port"`
	MasterFinger           string   `yaml:"master_finger"`
	RelayFinger            string   `yaml:"relay_finger"` // the relay's key, for a device behind one
	MasterType             string   `yaml:"master_type"`  // str, failover or disable
	MasterAliveInterval    int      `yaml:"master_alive_interval"`
	MasterFailback         bool     `yaml:"master_failback"`
	MasterFailbackInterval int      `yaml:"master_failback_interval"`
	RandomReauthDelay      int      `yaml:"random_reauth_delay"`
	MasterShuffle          bool     `yaml:"master_shuffle"`
	RandomMaster           bool     `yaml:"random_master"`
	RetryDNS               int      `yaml:"retry_dns"`
	AcceptanceWaitTime     int      `yaml:"acceptance_wait_time"`
	AcceptanceWaitTimeMax  int      `yaml:"acceptance_wait_time_max"`

	PkiDir   string `yaml:"pki_dir"`
	CacheDir string `yaml:"cachedir"`
	SockDir  string `yaml:"sock_dir"`

	Grains     map[string]any `yaml:"grains"`
	Beacons    any            `yaml:"beacons"`
	Engines    []any          `yaml:"engines"`
	Return     []string       `yaml:"return"` // "a,b" or a list
	FileClient string         `yaml:"file_client"`
	Reactor    []any          `yaml:"reactor"`

	// SpoolMax bounds, in bytes, the returns and events the agent keeps
	// on disk (cachedir/spool) until the master acknowledges them; past
	// it the oldest are dropped.
	SpoolMax int `yaml:"spool_max"`
	// JobReplayWindow, in seconds, is how old a job may be when it
	// arrives: older than that by the agent's clock (when it is set), or
	// than the newest job seen from the same master, it is refused as a
	// replay. 0 turns the time checks off (the record of jids already
	// run, cachedir/jobs.log, still applies).
	JobReplayWindow int `yaml:"job_replay_window"`

	LogLevel        string `yaml:"log_level"`
	LogFile         string `yaml:"log_file"`
	LogLevelLogfile string `yaml:"log_level_logfile"` // "" means LogLevel

	// LogFormat is text (Salt's layout) or json; LogRotateMaxBytes and
	// LogRotateBackupCount rotate log_file by size (both above 0).
	LogFormat            string `yaml:"log_format"`
	LogRotateMaxBytes    int    `yaml:"log_rotate_max_bytes"`
	LogRotateBackupCount int    `yaml:"log_rotate_backup_count"`

	// Relay is the relay: section; an agent with one runs as a relay.
	// nil: not a relay.
	Relay *Relay `yaml:"relay"`

	// Raw holds every option as loaded from the files (defaults are not
	// in it), known or not, for features that read their own options.
	Raw map[string]any `yaml:"-"`
	// ConfigDir is the directory the configuration was read from
	// (beacons.save writes ConfigDir/agent.d/beacons.conf).
	ConfigDir string `yaml:"-"`
}

// DefaultAgent returns the agent's defaults; ID is the host name.
func DefaultAgent() *Agent {
	return &Agent{
		RootDir:            "/",
		ID:                 hostname(),
		Master:             []string{"salt"},
		MasterPort:         4506,
		MasterType:         "str",
		RandomReauthDelay:  10,
		RetryDNS:           30,
		AcceptanceWaitTime: 10,
		PkiDir:             "/etc/halite/pki/agent",
		CacheDir:           "/var/cache/halite/agent",
		SockDir:            "/var/run/halite/agent",
		FileClient:         "remote",
		SpoolMax:           16 << 20,
		JobReplayWindow:    3600,
		LogLevel:           "warning",
		LogFile:            "/var/log/halite/agent",
		Raw:                map[string]any{},
	}
}

// hostname is the default id. Salt uses the FQDN; Halite uses the host name
// the kernel reports, since devices seldom have working reverse DNS.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

var agentRole = &role[Agent]{
	name:  "agent",
	other: "master",
	options: map[string]func(*Agent, value) error{
		"root_dir": func(a *Agent, v value) error { return v.str(&a.RootDir) },
		"id":       func(a *Agent, v value) error { return v.id(&a.ID) },
		"master": func(a *Agent, v value) error {
			if err := v.strList(&a.Master, false); err != nil {
				return err
			}
			for _, m := range a.Master {
				if err := checkMasterAddr(m); err != nil {
					return err
				}
			}
			return nil
		},
		"master_port":              func(a *Agent, v value) error { return v.port(&a.MasterPort) },
		"master_finger":            func(a *Agent, v value) error { return v.str(&a.MasterFinger) },
		"relay_finger":             func(a *Agent, v value) error { return v.str(&a.RelayFinger) },
		"master_type":              func(a *Agent, v value) error { return v.oneOf(&a.MasterType, "str", "failover", "disable") },
		"master_alive_interval":    func(a *Agent, v value) error { return v.count(&a.MasterAliveInterval) },
		"master_failback":          func(a *Agent, v value) error { return v.bool(&a.MasterFailback) },
		"master_failback_interval": func(a *Agent, v value) error { return v.count(&a.MasterFailbackInterval) },
		"random_reauth_delay":      func(a *Agent, v value) error { return v.count(&a.RandomReauthDelay) },
		"master_shuffle":           func(a *Agent, v value) error { return v.bool(&a.MasterShuffle) },
		"random_master":            func(a *Agent, v value) error { return v.bool(&a.RandomMaster) },
		"retry_dns":                func(a *Agent, v value) error { return v.count(&a.RetryDNS) },
		"acceptance_wait_time":     func(a *Agent, v value) error { return v.count(&a.AcceptanceWaitTime) },
		"acceptance_wait_time_max": func(a *Agent, v value) error { return v.count(&a.AcceptanceWaitTimeMax) },
		"pki_dir":                  func(a *Agent, v value) error { return v.str(&a.PkiDir) },
		"cachedir":                 func(a *Agent, v value) error { return v.str(&a.CacheDir) },
		"sock_dir":                 func(a *Agent, v value) error { return v.str(&a.SockDir) },
		"grains":                   func(a *Agent, v value) error { return v.anyMap(&a.Grains) },
		"beacons":                  func(a *Agent, v value) error { return v.any(&a.Beacons) },
		"engines":                  func(a *Agent, v value) error { return v.anyList(&a.Engines) },
		"return":                   func(a *Agent, v value) error { return v.strList(&a.Return, true) },
		"file_client":              func(a *Agent, v value) error { return v.oneOf(&a.FileClient, "remote", "local") },
		"reactor":                  func(a *Agent, v value) error { return v.anyList(&a.Reactor) },
		"spool_max":                func(a *Agent, v value) error { return v.count(&a.SpoolMax) },
		"job_replay_window":        func(a *Agent, v value) error { return v.count(&a.JobReplayWindow) },
		"log_level":                func(a *Agent, v value) error { return v.logLevel(&a.LogLevel) },
		"log_file":                 func(a *Agent, v value) error { return v.str(&a.LogFile) },
		"log_level_logfile":        func(a *Agent, v value) error { return v.logLevel(&a.LogLevelLogfile) },

		// config/log.go
		"log_format":              func(a *Agent, v value) error { return v.oneOf(&a.LogFormat, "text", "json") },
		"log_rotate_max_bytes":    func(a *Agent, v value) error { return v.count(&a.LogRotateMaxBytes) },
		"log_rotate_backup_count": func(a *Agent, v value) error { return v.count(&a.LogRotateBackupCount) },

		"relay": func(a *Agent, v value) error { return v.relay(&a.Relay) },
	},
	silent:  setOf(saltMinionOptions, saltCommonOptions),
	foreign: setOf(saltMasterOptions, haliteMasterOptions),
}

// haliteAgentOptions and haliteMasterOptions are the options each role
// handles, for the "that is a master option" warning of the other role.
const (
	haliteAgentOptions = "id master master_port master_finger relay_finger master_type master_alive_interval master_failback master_failback_interval random_reauth_delay master_shuffle random_master retry_dns acceptance_wait_time acceptance_wait_time_max grains beacons return file_client relay spool_max job_replay_window"
	// haliteMasterRawOptions are Halite's own master options that the
	// parts using them read from Master.Raw.
	haliteMasterRawOptions = "reactor_max_depth returner_queue_max max_frame"
	haliteMasterOptions    = "jid_node interface port auto_accept autosign_file autoreject_file autosign_grains_dir keep_jobs timeout worker_threads utc_jid nodegroups reactor_worker_threads reactor_worker_hwm reactor_max_depth returner_queue_max max_frame file_roots pillar_roots master_job_cache event_return relay_allow max_pending_keys new_keys_per_address"
)

// LoadAgent reads dir/agent, then dir/agent.d/*.conf in lexical order, over
// the defaults, and relocates the paths under root_dir. A missing dir/agent
// means defaults. Problems that do not stop the agent, such as unknown
// options, go to warn (which may be nil). The error, if any, is an *Error.
func LoadAgent(dir string, warn func(Warning)) (*Agent, error) {
	a := DefaultAgent()
	raw, err := agentRole.load(dir, a, warn)
	if err != nil {
		return nil, err
	}
	a.Raw = raw
	a.ConfigDir = dir
	root, err := absRoot(a.RootDir)
	if err != nil {
		return nil, &Error{File: filepath.Join(dir, "agent"), Msg: err.Error(), err: err}
	}
	a.RootDir = root
	for _, p := range []*string{&a.PkiDir, &a.CacheDir, &a.SockDir} {
		*p = prependRoot(root, *p)
	}
	if !isURI(a.LogFile) {
		a.LogFile = prependRoot(root, a.LogFile)
	}
	return a, nil
}

// SocketPath returns the agent's local unix socket (for halite-call),
// sock_dir/agent.sock.
func (a *Agent) SocketPath() string { return filepath.Join(a.SockDir, "agent.sock") }

// SpoolDir returns the directory of the on-disk spool, cachedir/spool.
func (a *Agent) SpoolDir() string { return filepath.Join(a.CacheDir, "spool") }

// RelaySpoolDir returns the directory where a relay keeps the returns and
// events of its devices until the master acknowledges them,
// cachedir/relay-spool.
func (a *Agent) RelaySpoolDir() string { return filepath.Join(a.CacheDir, "relay-spool") }

// checkMasterAddr checks one entry of the master option: a host name or
// address, optionally with a port (host:port, [v6]:port).
func checkMasterAddr(m string) error {
	addr := strings.TrimSpace(m)
	if strings.HasSuffix(addr, "]") || (!strings.HasPrefix(addr, "[") && strings.Count(addr, ":") != 1) {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), "1") // no port: any will do
	}
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || host == "" || perr != nil || n < 1 || n > 65535 || strings.ContainsAny(host, " /@[]") {
		return fmt.Errorf("master %q: want a host, host:port or [v6]:port, with a port from 1 to 65535", m)
	}
	return nil
}

// MasterAddrs returns the masters as host:port, in configured order. A
// master given as "host:port" or "[v6]:port" keeps its port (Salt's
// master:port syntax); others get master_port.
func (a *Agent) MasterAddrs() []string {
	port := strconv.Itoa(a.MasterPort)
	out := make([]string, 0, len(a.Master))
	for _, m := range a.Master {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if host, p, err := net.SplitHostPort(m); err == nil && host != "" && p != "" {
			out = append(out, m)
			continue
		}
		out = append(out, net.JoinHostPort(strings.Trim(m, "[]"), port))
	}
	return out
}

// FileLogLevel returns log_level_logfile, or log_level when it is unset.
func (a *Agent) FileLogLevel() string {
	if a.LogLevelLogfile != "" {
		return a.LogLevelLogfile
	}
	return a.LogLevel
}
