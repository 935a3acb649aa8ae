package config

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/halite-fleet/halite/protocol"
)

// Master is the master's configuration (CONFIG_DIR/master and
// CONFIG_DIR/master.d/*.conf), also read by the operator CLIs to find the
// master's socket. Field tags are Salt's option names. Paths are already
// relocated under RootDir.
type Master struct {
	RootDir string `yaml:"root_dir"`
	// ID is the master's id (Salt's id on a master): the name it gives
	// itself in events and returner records. "" means HOSTNAME_master.
	ID        string `yaml:"id"`
	Interface string `yaml:"interface"`
	Port      int    `yaml:"port"` // UDP (QUIC)
	// RetPort is Salt's ret_port, as set: the port when port is not set
	// (Halite has one port, Port, which is the one to use).
	RetPort           int    `yaml:"ret_port"`
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
	// Failhard (Salt's failhard on the master): a failed step stops an
	// orchestration (state.orchestrate), and salt.state and salt.function
	// steps run their batches with failhard.
	Failhard bool `yaml:"failhard"`
	// JIDNode (Halite's jid_node, 0 to 999) ends every job id, so that the
	// masters of a multimaster set never make the same one; -1: derived
	// from the host name, interface, port and cachedir.
	JIDNode int `yaml:"jid_node"`
	// MaxFrame (Halite's max_frame) is the largest frame, in bytes, the
	// master reads from an agent or relay.
	MaxFrame int `yaml:"max_frame"`
	// LoopInterval (seconds, Salt's loop_interval) is how often the
	// master checks presence and fires the presence events.
	LoopInterval int `yaml:"loop_interval"`
	// MetricsPort (Halite's metrics_port) is the TCP port of the
	// master's Prometheus endpoint (/metrics); 0, the default, serves
	// none. MetricsInterface is the address it binds: 127.0.0.1 by
	// default, not interface, since the page tells the fleet's size and
	// names relays and returners to whoever can reach it.
	MetricsPort      int    `yaml:"metrics_port"`
	MetricsInterface string `yaml:"metrics_interface"`

	LogLevel        string `yaml:"log_level"`
	LogFile         string `yaml:"log_file"`
	LogLevelLogfile string `yaml:"log_level_logfile"` // "" means LogLevel

	// LogFormat is text (Salt's layout) or json; LogRotateMaxBytes and
	// LogRotateBackupCount rotate log_file by size (both above 0).
	LogFormat            string `yaml:"log_format"`
	LogRotateMaxBytes    int    `yaml:"log_rotate_max_bytes"`
	LogRotateBackupCount int    `yaml:"log_rotate_backup_count"`

	// Nodegroups maps a nodegroup's name to its compound expression (a
	// string) or a list of expressions; Salt's list form (a list of
	// one-key mappings) is read into the same map.
	Nodegroups           map[string]any `yaml:"nodegroups"`
	Reactor              []any          `yaml:"reactor"`
	ReactorWorkerThreads int            `yaml:"reactor_worker_threads"`
	ReactorWorkerHwm     int            `yaml:"reactor_worker_hwm"`
	// ReactorMaxDepth (Halite's reactor_max_depth) is the reactor's loop
	// guard: how many reactions deep an event may cause another; 0 means
	// the default, below 0 turns the guard off.
	ReactorMaxDepth int `yaml:"reactor_max_depth"`
	// ReactorRefreshInterval (seconds, Salt's reactor_refresh_interval):
	// how often the reactor rereads its rules from the configuration.
	ReactorRefreshInterval int                 `yaml:"reactor_refresh_interval"`
	FileRoots              map[string][]string `yaml:"file_roots"`
	PillarRoots            map[string][]string `yaml:"pillar_roots"`
	// FirmwareDir (Halite's firmware_dir) holds the agent builds that
	// firmware.update and firmware.rollout install:
	// FirmwareDir/<version>/<platform>/halite-agent, platform as
	// `make cross` names them (linux-armv7, linux-arm64, ...).
	FirmwareDir    string `yaml:"firmware_dir"`
	MasterJobCache string `yaml:"master_job_cache"`
	// ExtJobCache (Salt's ext_job_cache) are returners every job's
	// returns also go to; "a,b" or a list.
	ExtJobCache []string `yaml:"ext_job_cache"`
	// ReturnerQueueMax (Halite's returner_queue_max) bounds the items
	// waiting in each returner's on-disk queue.
	ReturnerQueueMax int      `yaml:"returner_queue_max"`
	EventReturn      []string `yaml:"event_return"` // a string or a list
	// EventReturnQueue and EventReturnQueueMaxSeconds are Salt's batching
	// of events to the event returners: a batch goes at this many events
	// (0: each at once) or after this many seconds (0: no time bound).
	EventReturnQueue           int `yaml:"event_return_queue"`
	EventReturnQueueMaxSeconds int `yaml:"event_return_queue_max_seconds"`
	// EventReturnWhitelist and EventReturnBlacklist are tag globs of the
	// events sent to (or kept from) the event returners.
	EventReturnWhitelist []string `yaml:"event_return_whitelist"`
	EventReturnBlacklist []string `yaml:"event_return_blacklist"`
	Engines              []any    `yaml:"engines"`
	// Schedule is the master's schedule: option (Salt's master schedule:
	// runner functions run on an interval or cron); ScheduleAt says where
	// each job was set ("file:line").
	Schedule   map[string]any    `yaml:"schedule"`
	ScheduleAt map[string]string `yaml:"-"`
	// RelayAllow (Halite's relay_allow) lists the agents that may open a
	// relay link, by id or glob (Salt's fnmatch); an accepted agent not
	// listed is refused as a relay. Empty, the default: none may.
	RelayAllow []string `yaml:"relay_allow"` // a string or a list
	// MineGet (Salt's mine_get) is the mine ACL: agent id regex -> the
	// function regexes an agent may read with mine.get; nil: all.
	MineGet map[string]any `yaml:"mine_get"`

	// Raw holds every option as loaded from the files (defaults are not
	// in it), known or not: the options of returners, engines and other
	// modules ("redis.host", "alternative.mysql.db"), which those modules
	// read and type-check themselves, and config.get in reactor templates.
	Raw map[string]any `yaml:"-"`

	StateOutput `yaml:",inline"` // state_output, state_verbose, ... (stateoutput.go)
	StateTop    `yaml:",inline"` // state_top, top_file_merging_strategy, ... (statetop.go)
	Pillar      `yaml:",inline"` // pillarenv, ext_pillar, ... (pillar.go)
}

// MaxFrameLimit is the largest max_frame.
const MaxFrameLimit = 64 << 20

// DefaultMaster returns the master's defaults, as used when no file sets
// an option.
func DefaultMaster() *Master {
	return &Master{
		RootDir:                "/",
		Interface:              "0.0.0.0",
		Port:                   4506,
		RetPort:                4506,
		PkiDir:                 "/etc/halite/pki/master",
		CacheDir:               "/var/cache/halite/master",
		SockDir:                "/var/run/halite/master",
		KeepJobs:               24,
		Timeout:                5,
		GatherJobTimeout:       10,
		WorkerThreads:          5,
		JIDNode:                -1,
		MaxPendingKeys:         10000,
		NewKeysPerAddress:      60,
		MaxFrame:               protocol.DefaultMaxFrame,
		LoopInterval:           1,
		MetricsInterface:       "127.0.0.1",
		LogLevel:               "warning",
		LogFile:                "/var/log/halite/master",
		ReactorWorkerThreads:   10,
		ReactorWorkerHwm:       10000,
		ReactorMaxDepth:        3,
		ReactorRefreshInterval: 60,
		FileRoots:              map[string][]string{"base": {"/srv/halite"}},
		PillarRoots:            map[string][]string{"base": {"/srv/pillar"}},
		FirmwareDir:            "/srv/halite/firmware",
		MasterJobCache:         "local_cache",
		ReturnerQueueMax:       1_000_000,
		Raw:                    map[string]any{},
		StateOutput:            defaultStateOutput(),
		StateTop:               defaultStateTop(),
		Pillar:                 defaultPillar(),
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

// masterOptions is the master's option table: every option it knows, one
// line each. Options of the agent only are not in it (see foreign).
func masterOptions() map[string]*option[Master] {
	type M = Master
	return table([]option[M]{
		optStr("root_dir", func(m *M) *string { return &m.RootDir }, "directory every path option is relocated under"),
		optStr("id", func(m *M) *string { return &m.ID }, "the master's name in events and returner records").with("HOSTNAME_master"),
		optStr("interface", func(m *M) *string { return &m.Interface }, "address the QUIC listener binds"),
		optPort("port", func(m *M) *int { return &m.Port }, "UDP port of the QUIC listener (agents, relays); wins over ret_port"),
		optPort("ret_port", func(m *M) *int { return &m.RetPort }, "Salt's name for the port: used when port is not set; if both are set and differ, port wins (warning)"),
		optStr("pki_dir", func(m *M) *string { return &m.PkiDir }, "the master's key and the agents' keys (minions, minions_pre, ...)"),
		optStr("cachedir", func(m *M) *string { return &m.CacheDir }, "job cache, returner queues"),
		optStr("sock_dir", func(m *M) *string { return &m.SockDir }, "directory of the local socket of the operator CLIs"),
		optBool("auto_accept", func(m *M) *bool { return &m.AutoAccept }, "accept every new agent key"),
		optStr("autosign_file", func(m *M) *string { return &m.AutosignFile }, "file of ids or globs whose keys are accepted"),
		optStr("autoreject_file", func(m *M) *string { return &m.AutorejectFile }, "file of ids or globs whose keys are rejected"),
		optStr("autosign_grains_dir", func(m *M) *string { return &m.AutosignGrainsDir }, "directory of grain files for autosigning"),
		optCount("max_pending_keys", func(m *M) *int { return &m.MaxPendingKeys }, "most keys waiting in minions_pre; 0: no cap"),
		optCount("new_keys_per_address", func(m *M) *int { return &m.NewKeysPerAddress }, "new keys one address (IPv6 /64) may present a minute; 0: no limit"),
		optCount("gather_job_timeout", func(m *M) *int { return &m.GatherJobTimeout }, "seconds between find_job checks of a job past its timeout"),
		optCount("keep_jobs", func(m *M) *int { return &m.KeepJobs }, "hours the job cache keeps jobs"),
		optCount("timeout", func(m *M) *int { return &m.Timeout }, "seconds the CLI waits for returns by default"),
		optCount("worker_threads", func(m *M) *int { return &m.WorkerThreads }, "workers handling operator requests"),
		optBool("utc_jid", func(m *M) *bool { return &m.UTCJID }, "job ids in UTC rather than local time"),
		optBool("failhard", func(m *M) *bool { return &m.Failhard }, "a failed step stops an orchestration (state.orchestrate), and its batches stop at the first failure"),
		optRange("jid_node", 0, 999, func(m *M) *int { return &m.JIDNode }, "number (0 to 999) ending every job id, for multimaster; -1: derived from host, interface, port and cachedir"),
		optRange("max_frame", 1<<10, MaxFrameLimit, func(m *M) *int { return &m.MaxFrame }, "largest frame in bytes the master reads from an agent or relay"),
		optRange("loop_interval", 1, 86400, func(m *M) *int { return &m.LoopInterval }, "seconds between presence checks (Salt's default is 60)"),
		optRange("metrics_port", 0, 65535, func(m *M) *int { return &m.MetricsPort }, "TCP port of the Prometheus endpoint (http://metrics_interface:metrics_port/metrics); 0: off"),
		optFunc("metrics_interface", "string", setMetricsInterface, func(m *M) any { return m.MetricsInterface }, "address the Prometheus endpoint binds (0.0.0.0 or :: for all); not interface, so that the page is not public unless asked"),
		optLevel("log_level", func(m *M) *string { return &m.LogLevel }, "console log level"),
		optStr("log_file", func(m *M) *string { return &m.LogFile }, "log file (a path; URIs are refused when the logger opens it)"),
		optLevel("log_level_logfile", func(m *M) *string { return &m.LogLevelLogfile }, "log file level; unset: log_level"),
		optOneOf("log_format", func(x *M) *string { return &x.LogFormat }, []string{"text", "json"}, "text (Salt's layout) or json (one object a line, for log shippers)"),
		optCount("log_rotate_max_bytes", func(x *M) *int { return &x.LogRotateMaxBytes }, "rotate log_file past this size (with log_rotate_backup_count; both above 0)"),
		optCount("log_rotate_backup_count", func(x *M) *int { return &x.LogRotateBackupCount }, "rotated log files kept (file.1 the newest)"),
		optFunc("nodegroups", "mapping, or list of one-key mappings", func(m *M, v value) error { return v.nodegroups(&m.Nodegroups) }, func(m *M) any { return m.Nodegroups }, "named target expressions (N@name)"),
		optAnyList("reactor", func(m *M) *[]any { return &m.Reactor }, "reactor rules: list of {tag glob: [sls files]}"),
		optCount("reactor_worker_threads", func(m *M) *int { return &m.ReactorWorkerThreads }, "reactions run at once"),
		optCount("reactor_worker_hwm", func(m *M) *int { return &m.ReactorWorkerHwm }, "reactions queued before new ones are dropped"),
		optInt("reactor_max_depth", func(m *M) *int { return &m.ReactorMaxDepth }, "loop guard: reactions an event may chain; 0: the default (3); below 0: off"),
		optRange("reactor_refresh_interval", 1, 86400, func(m *M) *int { return &m.ReactorRefreshInterval }, "seconds between rereads of the reactor rules (also on SIGHUP)"),
		optRoots("file_roots", func(m *M) *map[string][]string { return &m.FileRoots }, "directories of state and reactor files per environment"),
		optStr("firmware_dir", func(m *M) *string { return &m.FirmwareDir }, "agent builds for firmware.update: <version>/<platform>/halite-agent (make cross's dist/ layout)"),
		optRoots("pillar_roots", func(m *M) *map[string][]string { return &m.PillarRoots }, "directories of pillar files per environment"),
		optStr("master_job_cache", func(m *M) *string { return &m.MasterJobCache }, "returner holding the job cache"),
		optList("ext_job_cache", true, func(m *M) *[]string { return &m.ExtJobCache }, "returners every job's returns also go to"),
		optCount("returner_queue_max", func(m *M) *int { return &m.ReturnerQueueMax }, "items waiting in each returner's on-disk queue"),
		optList("event_return", false, func(m *M) *[]string { return &m.EventReturn }, "returners the master's events go to"),
		optCount("event_return_queue", func(m *M) *int { return &m.EventReturnQueue }, "events sent to event returners in one batch; 0: each at once"),
		optCount("event_return_queue_max_seconds", func(m *M) *int { return &m.EventReturnQueueMaxSeconds }, "seconds a batch of events may wait; 0: no bound"),
		optList("event_return_whitelist", false, func(m *M) *[]string { return &m.EventReturnWhitelist }, "tag globs of the events sent to event returners"),
		optList("event_return_blacklist", false, func(m *M) *[]string { return &m.EventReturnBlacklist }, "tag globs of the events kept from event returners"),
		optAnyList("engines", func(m *M) *[]any { return &m.Engines }, "engines to run: list of {name: options}"),
		optFunc("schedule", "schedule: mapping of jobs", func(m *M, v value) error { return v.schedule(&m.Schedule, &m.ScheduleAt) }, func(m *M) any { return m.Schedule }, "Salt's master schedule: runner functions the master runs on an interval or cron"),
		optMap("mine_get", func(m *M) *map[string]any { return &m.MineGet }, "mine ACL as Salt's: agent id regex -> list of function regexes an agent may read with mine.get; unset: all"),
		optFunc("relay_allow", "string or list of strings", setRelayAllow, func(m *M) any { return m.RelayAllow }, "agent ids or globs that may open a relay link; none by default"),
		optFunc("publish_port", "port", func(_ *M, v value) error { var p int; return v.port(&p) }, nil, "Halite publishes over its one UDP port (port)").with("4505").as(Ignored),
	},
		stateOutputOptions(func(m *M) *StateOutput { return &m.StateOutput }),
		stateTopOptions(func(m *M) *StateTop { return &m.StateTop }),
		pillarOptions(func(m *M) *Pillar { return &m.Pillar }),
		elsewhere[M]("cli", "output color"),
		[]option[M]{refusedTrue[M]("fips_mode", "Halite's TLS 1.3 (QUIC) is not a FIPS module")},
		ignored[M](saltCommonOptions+saltMasterOptions, ""),
	)
}

// setMetricsInterface refuses an empty address, which would bind every
// interface without saying so.
func setMetricsInterface(m *Master, v value) error {
	var s string
	if err := v.str(&s); err != nil {
		return err
	}
	if s == "" {
		return fmt.Errorf("expected an address, got an empty one (0.0.0.0 or :: binds every interface)")
	}
	m.MetricsInterface = s
	return nil
}

func setRelayAllow(m *Master, v value) error {
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
}

func newMasterRole() *role[Master] {
	foreign := make(map[string]bool)
	for name := range agentRole.options {
		foreign[name] = true
	}
	return &role[Master]{name: "master", other: "agent", options: masterOptions(), foreign: foreign}
}

// MasterOptions documents the master's options, in name order.
func MasterOptions() []OptionDoc { return docs(masterRole().options, DefaultMaster()) }

// LoadMaster reads dir/master, then dir/master.d/*.conf in lexical order,
// over the defaults, and relocates the paths under root_dir. A missing
// dir/master means defaults. Problems that do not stop the master, such as
// unknown options, go to warn (which may be nil). The error, if any, is an
// *Error.
func LoadMaster(dir string, warn func(Warning)) (*Master, error) {
	m := DefaultMaster()
	l, err := masterRole().load(dir, m, warn)
	if err != nil {
		return nil, err
	}
	m.Raw = l.raw
	m.resolvePort(l, warn)
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

// resolvePort applies ret_port, Salt's name for the one port: it is the
// port when port is not set; when both are set and differ, port wins.
func (m *Master) resolvePort(l *loaded, warn func(Warning)) {
	rp := l.at["ret_port"]
	hasRet, hasPort := l.raw["ret_port"] != nil, l.raw["port"] != nil
	switch {
	case hasRet && !hasPort:
		m.Port = m.RetPort
	case hasRet && m.RetPort != m.Port && warn != nil:
		warn(Warning{File: rp.file, Line: rp.line, Msg: fmt.Sprintf("ret_port %d differs from port %d; Halite has one UDP port and uses port", m.RetPort, m.Port)})
	}
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
