package config

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
)

// Master is the master's configuration (CONFIG_DIR/master and
// CONFIG_DIR/master.d/*.conf), also read by the operator CLIs to find the
// master's socket. Field tags are Salt's option names. Paths are already
// relocated under RootDir.
type Master struct {
	RootDir           string `yaml:"root_dir"`
	Interface         string `yaml:"interface"`
	Port              int    `yaml:"port"` // UDP (QUIC)
	PkiDir            string `yaml:"pki_dir"`
	CacheDir          string `yaml:"cachedir"`
	SockDir           string `yaml:"sock_dir"`
	AutoAccept        bool   `yaml:"auto_accept"`
	AutosignFile      string `yaml:"autosign_file"`
	AutorejectFile    string `yaml:"autoreject_file"`
	AutosignGrainsDir string `yaml:"autosign_grains_dir"`
	// MaxPendingKeys (Halite's max_pending_keys) caps the keys waiting in
	// minions_pre: a Hello that would add one more is refused. 0: no cap.
	MaxPendingKeys int `yaml:"max_pending_keys"`
	// NewKeysPerAddress (Halite's new_keys_per_address) is how many keys
	// of ids the master does not know one source address (an IPv6 /64)
	// may present a minute, in bursts of as many; more are refused until
	// the rate allows. Devices behind a relay are not counted (the relay
	// limits its own). 0: no limit.
	NewKeysPerAddress int `yaml:"new_keys_per_address"`
	// GatherJobTimeout (seconds, Salt's gather_job_timeout): once a job's
	// timeout has passed, minions that have not returned are asked
	// (saltutil.find_job) whether they still run it, every
	// gather_job_timeout, and waited for while they do.
	GatherJobTimeout int  `yaml:"gather_job_timeout"`
	KeepJobs         int  `yaml:"keep_jobs"` // hours
	Timeout          int  `yaml:"timeout"`   // seconds, the CLI's default wait
	WorkerThreads    int  `yaml:"worker_threads"`
	UTCJID           bool `yaml:"utc_jid"` // job ids in UTC rather than local time
	// JIDNode (Halite's jid_node, 0 to 999) ends every job id, so that the
	// masters of a multimaster set never make the same one; -1: derived
	// from the host name, interface, port and cachedir.
	JIDNode int `yaml:"jid_node"`

	LogLevel        string `yaml:"log_level"`
	LogFile         string `yaml:"log_file"`
	LogLevelLogfile string `yaml:"log_level_logfile"` // "" means LogLevel

	// LogFormat is text (Salt's layout) or json; LogRotateMaxBytes and
	// LogRotateBackupCount rotate log_file by size (both above 0).
	LogFormat            string `yaml:"log_format"`
	LogRotateMaxBytes    int    `yaml:"log_rotate_max_bytes"`
	LogRotateBackupCount int    `yaml:"log_rotate_backup_count"`

	Nodegroups           map[string]any      `yaml:"nodegroups"`
	Reactor              []any               `yaml:"reactor"`
	ReactorWorkerThreads int                 `yaml:"reactor_worker_threads"`
	ReactorWorkerHwm     int                 `yaml:"reactor_worker_hwm"`
	FileRoots            map[string][]string `yaml:"file_roots"`
	PillarRoots          map[string][]string `yaml:"pillar_roots"`
	MasterJobCache       string              `yaml:"master_job_cache"`
	EventReturn          []string            `yaml:"event_return"` // a string or a list
	Engines              []any               `yaml:"engines"`
	// RelayAllow (Halite's relay_allow) lists the agents that may open a
	// relay link, by id or glob (Salt's fnmatch); an accepted agent not
	// listed is refused as a relay. Empty, the default: none may.
	RelayAllow []string `yaml:"relay_allow"` // a string or a list

	// Raw holds every option as loaded from the files (defaults are not
	// in it), known or not, for features that read their own options.
	Raw map[string]any `yaml:"-"`
}

// DefaultMaster returns the master's defaults, as used when no file sets
// an option.
func DefaultMaster() *Master {
	return &Master{
		RootDir:              "/",
		Interface:            "0.0.0.0",
		Port:                 4506,
		PkiDir:               "/etc/halite/pki/master",
		CacheDir:             "/var/cache/halite/master",
		SockDir:              "/var/run/halite/master",
		KeepJobs:             24,
		Timeout:              5,
		GatherJobTimeout:     10,
		WorkerThreads:        5,
		JIDNode:              -1,
		MaxPendingKeys:       10000,
		NewKeysPerAddress:    60,
		LogLevel:             "warning",
		LogFile:              "/var/log/halite/master",
		ReactorWorkerThreads: 10,
		ReactorWorkerHwm:     10000,
		FileRoots:            map[string][]string{"base": {"/srv/halite"}},
		PillarRoots:          map[string][]string{"base": {"/srv/pillar"}},
		MasterJobCache:       "local_cache",
		Raw:                  map[string]any{},
	}
}

// masterRole is built on first use rather than at package init, so that
// programs that never load a master configuration (halite-agent, whose
// size is budgeted) do not link its option table.
func masterRole() *role[Master] {
	masterRoleOnce.Do(func() { masterRoleVal = newMasterRole() })
	return masterRoleVal
}

var (
	masterRoleOnce sync.Once
	masterRoleVal  *role[Master]
)

func newMasterRole() *role[Master] {
	return &role[Master]{
		name:  "master",
		other: "agent",
		options: map[string]func(*Master, value) error{
			"root_dir":             func(m *Master, v value) error { return v.str(&m.RootDir) },
			"interface":            func(m *Master, v value) error { return v.str(&m.Interface) },
			"port":                 func(m *Master, v value) error { return v.port(&m.Port) },
			"pki_dir":              func(m *Master, v value) error { return v.str(&m.PkiDir) },
			"cachedir":             func(m *Master, v value) error { return v.str(&m.CacheDir) },
			"sock_dir":             func(m *Master, v value) error { return v.str(&m.SockDir) },
			"auto_accept":          func(m *Master, v value) error { return v.bool(&m.AutoAccept) },
			"autosign_file":        func(m *Master, v value) error { return v.str(&m.AutosignFile) },
			"autoreject_file":      func(m *Master, v value) error { return v.str(&m.AutorejectFile) },
			"autosign_grains_dir":  func(m *Master, v value) error { return v.str(&m.AutosignGrainsDir) },
			"max_pending_keys":     func(m *Master, v value) error { return v.count(&m.MaxPendingKeys) },
			"new_keys_per_address": func(m *Master, v value) error { return v.count(&m.NewKeysPerAddress) },
			"keep_jobs":            func(m *Master, v value) error { return v.count(&m.KeepJobs) },
			"timeout":              func(m *Master, v value) error { return v.count(&m.Timeout) },
			"gather_job_timeout":   func(m *Master, v value) error { return v.count(&m.GatherJobTimeout) },
			"worker_threads":       func(m *Master, v value) error { return v.count(&m.WorkerThreads) },
			"utc_jid":              func(m *Master, v value) error { return v.bool(&m.UTCJID) },
			"jid_node": func(m *Master, v value) error {
				i, err := v.integer()
				if err == nil && (i < 0 || i > 999) {
					err = fmt.Errorf("expected a number from 0 to 999, got %d", i)
				}
				if err == nil {
					m.JIDNode = i
				}
				return err
			},
			"log_level":         func(m *Master, v value) error { return v.logLevel(&m.LogLevel) },
			"log_file":          func(m *Master, v value) error { return v.str(&m.LogFile) },
			"log_level_logfile": func(m *Master, v value) error { return v.logLevel(&m.LogLevelLogfile) },

			// config/log.go
			"log_format":              func(m *Master, v value) error { return v.oneOf(&m.LogFormat, "text", "json") },
			"log_rotate_max_bytes":    func(m *Master, v value) error { return v.count(&m.LogRotateMaxBytes) },
			"log_rotate_backup_count": func(m *Master, v value) error { return v.count(&m.LogRotateBackupCount) },

			"nodegroups":             func(m *Master, v value) error { return v.anyMap(&m.Nodegroups) },
			"reactor":                func(m *Master, v value) error { return v.anyList(&m.Reactor) },
			"reactor_worker_threads": func(m *Master, v value) error { return v.count(&m.ReactorWorkerThreads) },
			"reactor_worker_hwm":     func(m *Master, v value) error { return v.count(&m.ReactorWorkerHwm) },
			"file_roots":             func(m *Master, v value) error { return v.roots(&m.FileRoots) },
			"pillar_roots":           func(m *Master, v value) error { return v.roots(&m.PillarRoots) },
			"master_job_cache":       func(m *Master, v value) error { return v.str(&m.MasterJobCache) },
			"event_return":           func(m *Master, v value) error { return v.strList(&m.EventReturn, false) },
			"engines":                func(m *Master, v value) error { return v.anyList(&m.Engines) },
			"relay_allow": func(m *Master, v value) error {
				var ids []string
				if err := v.strList(&ids, false); err != nil {
					return err
				}
				for _, id := range ids {
					if id == "" {
						return fmt.Errorf("expected agent ids or globs, got an empty one")
					}
				}
				m.RelayAllow = ids
				return nil
			},
		},
		silent:  setOf(saltMasterOptions, saltCommonOptions, haliteMasterRawOptions),
		foreign: setOf(saltMinionOptions, haliteAgentOptions),
		hints: map[string]string{
			"ret_port":     `Halite listens on one UDP port; set "port"`,
			"publish_port": `Halite listens on one UDP port; set "port"`,
		},
	}
}

// LoadMaster reads dir/master, then dir/master.d/*.conf in lexical order,
// over the defaults, and relocates the paths under root_dir. A missing
// dir/master means defaults. Problems that do not stop the master, such as
// unknown options, go to warn (which may be nil). The error, if any, is an
// *Error.
func LoadMaster(dir string, warn func(Warning)) (*Master, error) {
	m := DefaultMaster()
	raw, err := masterRole().load(dir, m, warn)
	if err != nil {
		return nil, err
	}
	m.Raw = raw
	root, err := absRoot(m.RootDir)
	if err != nil {
		return nil, &Error{File: filepath.Join(dir, "master"), Msg: err.Error(), err: err}
	}
	m.RootDir = root
	for _, p := range []*string{&m.PkiDir, &m.CacheDir, &m.SockDir, &m.AutosignFile, &m.AutorejectFile, &m.AutosignGrainsDir} {
		*p = prependRoot(root, *p)
	}
	if !isURI(m.LogFile) {
		m.LogFile = prependRoot(root, m.LogFile)
	}
	return m, nil
}

// ListenAddr returns interface:port for the QUIC listener.
func (m *Master) ListenAddr() string {
	return net.JoinHostPort(m.Interface, strconv.Itoa(m.Port))
}

// SocketPath returns the master's local unix socket, sock_dir/master.sock.
func (m *Master) SocketPath() string { return filepath.Join(m.SockDir, "master.sock") }

// JobCachePath returns the embedded job cache file, cachedir/jobs.db.
func (m *Master) JobCachePath() string { return filepath.Join(m.CacheDir, "jobs.db") }

// keyDirs are Salt's pki_dir subdirectories per key state.
var keyDirs = map[string]string{
	"accepted": "minions",
	"pending":  "minions_pre",
	"rejected": "minions_rejected",
	"denied":   "minions_denied",
}

// KeyDir returns the directory holding agent keys in state (accepted,
// pending, rejected or denied) under pki_dir, with Salt's names (minions,
// minions_pre, minions_rejected, minions_denied); "" for another state.
func (m *Master) KeyDir(state string) string {
	d, ok := keyDirs[state]
	if !ok {
		return ""
	}
	return filepath.Join(m.PkiDir, d)
}

// FileLogLevel returns log_level_logfile, or log_level when it is unset.
func (m *Master) FileLogLevel() string {
	if m.LogLevelLogfile != "" {
		return m.LogLevelLogfile
	}
	return m.LogLevel
}
