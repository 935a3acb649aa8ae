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
	AuthTimeout            int      `yaml:"auth_timeout"`

	PkiDir   string `yaml:"pki_dir"`
	CacheDir string `yaml:"cachedir"`
	SockDir  string `yaml:"sock_dir"`

	Grains     map[string]any `yaml:"grains"`
	Beacons    any            `yaml:"beacons"`
	Engines    []any          `yaml:"engines"`
	Return     []string       `yaml:"return"` // "a,b" or a list
	FileClient string         `yaml:"file_client"`
	Reactor    []any          `yaml:"reactor"`

	// Schedule is the schedule: option (Salt's minion schedule), merged
	// over every file as Salt's include does; ScheduleAt says where each
	// job was set ("file:line"). See schedule.go.
	Schedule   map[string]any    `yaml:"schedule"`
	ScheduleAt map[string]string `yaml:"-"`
	// MineFunctions and MineInterval are Salt's mine_functions and
	// mine_interval (minutes; 0: no periodic mine.update).
	MineFunctions map[string]any `yaml:"mine_functions"`
	MineInterval  int            `yaml:"mine_interval"`

	// SpoolMax bounds, in bytes, the returns and events the agent keeps
	// on disk (cachedir/spool) until the master acknowledges them; past
	// it the oldest are dropped.
	SpoolMax int `yaml:"spool_max"`
	// MultifuncOrdered makes a compound job's return a list of the
	// functions' returns in their order, instead of a mapping keyed by
	// function (Salt's multifunc_ordered).
	MultifuncOrdered bool `yaml:"multifunc_ordered"`
	// JobReplayWindow, in seconds, is how old a job may be when it
	// arrives: older than that by the agent's clock (when it is set), or
	// than the newest job seen from the same master, it is refused as a
	// replay. 0 turns the time checks off (the record of jids already
	// run, cachedir/jobs.log, still applies).
	JobReplayWindow int `yaml:"job_replay_window"`
	// UpdateTrialTimeout (Halite's update_trial_timeout), in seconds, is
	// how long a new build installed by firmware.update has to reach a
	// master and be accepted; past it the old build runs again.
	UpdateTrialTimeout int `yaml:"update_trial_timeout"`

	LogLevel        string `yaml:"log_level"`
	LogFile         string `yaml:"log_file"`
	LogLevelLogfile string `yaml:"log_level_logfile"` // "" means LogLevel

	// LogFormat is text (Salt's layout) or json; LogRotateMaxBytes and
	// LogRotateBackupCount rotate log_file by size (both above 0).
	LogFormat            string `yaml:"log_format"`
	LogRotateMaxBytes    int    `yaml:"log_rotate_max_bytes"`
	LogRotateBackupCount int    `yaml:"log_rotate_backup_count"`

	// The state system's options (Salt's names): file_roots of a
	// masterless agent (halite-call --local state.apply), test (every
	// state run is test=True), failhard, state_events (progress events)
	// and state_queue (queue state runs instead of refusing them: true,
	// or the most runs waiting).
	FileRoots   map[string][]string `yaml:"file_roots"`
	Test        bool                `yaml:"test"`
	Failhard    bool                `yaml:"failhard"`
	StateEvents bool                `yaml:"state_events"`
	StateQueue  any                 `yaml:"state_queue"`
	// ServiceInitDir (Halite's) is where the service states find init.d
	// scripts; set, they use those scripts (SysV style, enablement by the
	// rc?.d links beside it) whatever init the device booted with. For
	// tests and devices whose scripts live elsewhere; "": /etc/init.d.
	ServiceInitDir string `yaml:"service_init_dir"`

	// Relay is the relay: section; an agent with one runs as a relay.
	// nil: not a relay.
	Relay *Relay `yaml:"relay"`

	// Raw holds every option as loaded from the files (defaults are not
	// in it), known or not, for features that read their own options.
	Raw map[string]any `yaml:"-"`
	// ConfigDir is the directory the configuration was read from
	// (beacons.save writes ConfigDir/agent.d/beacons.conf).
	ConfigDir string `yaml:"-"`

	StateOutput `yaml:",inline"` // state_output, state_verbose, ... (stateoutput.go)
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
		UpdateTrialTimeout: 120,
		MineInterval:       60,
		FileRoots:          map[string][]string{"base": {"/srv/halite"}},
		LogLevel:           "warning",
		LogFile:            "/var/log/halite/agent",
		Raw:                map[string]any{},
		StateOutput:        defaultStateOutput(),
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

var agentRole = &role[Agent]{name: "agent", alt: "minion", other: "master", options: agentOptions(), foreign: setOf(masterOnlyOptions)}

// agentOptions is the agent's option table: every option it knows, one
// line each. Options of the master only are in masterOnlyOptions.
func agentOptions() map[string]*option[Agent] {
	type A = Agent
	return table([]option[A]{
		optStr("root_dir", func(a *A) *string { return &a.RootDir }, "directory every path option is relocated under"),
		optFunc("id", "agent id", func(a *A, v value) error { return v.id(&a.ID) }, func(a *A) any { return a.ID }, "the agent's id").with("the host name"),
		optFunc("master", "string or list of strings", setMasters, func(a *A) any { return a.Master }, "masters (host, host:port or [v6]:port), in order"),
		optPort("master_port", func(a *A) *int { return &a.MasterPort }, "the masters' UDP port, for masters given without one (Salt's ret_port of the master)"),
		optStr("master_finger", func(a *A) *string { return &a.MasterFinger }, "fingerprint of the master's key, pinned"),
		optStr("relay_finger", func(a *A) *string { return &a.RelayFinger }, "fingerprint of the relay's key, for a device behind one"),
		optOneOf("master_type", func(a *A) *string { return &a.MasterType }, []string{"str", "failover", "disable"}, "str: every master at once; failover: one at a time; disable: masterless"),
		optCount("master_alive_interval", func(a *A) *int { return &a.MasterAliveInterval }, "seconds between checks that the master is alive; 0: off (a relay's link to the master ends after twice this of silence)"),
		optBool("master_failback", func(a *A) *bool { return &a.MasterFailback }, "go back to the first master when it returns (failover)"),
		optCount("master_failback_interval", func(a *A) *int { return &a.MasterFailbackInterval }, "seconds between checks of the first master (failover)"),
		optCount("random_reauth_delay", func(a *A) *int { return &a.RandomReauthDelay }, "most seconds of random wait before reconnecting"),
		optBool("master_shuffle", func(a *A) *bool { return &a.MasterShuffle }, "shuffle the masters before trying them"),
		optBool("random_master", func(a *A) *bool { return &a.RandomMaster }, "start with a random master (failover)"),
		optCount("retry_dns", func(a *A) *int { return &a.RetryDNS }, "seconds between retries of a master name that does not resolve"),
		optCount("acceptance_wait_time", func(a *A) *int { return &a.AcceptanceWaitTime }, "seconds between tries while the key is not accepted"),
		optCount("acceptance_wait_time_max", func(a *A) *int { return &a.AcceptanceWaitTimeMax }, "upper bound of the growing acceptance wait; 0: no growth"),
		optRange("auth_timeout", 0, 3600, func(a *A) *int { return &a.AuthTimeout }, "seconds one try to reach a master or relay may go unanswered before it is given up (the QUIC handshake's idle timeout); the whole try gets twice that, at least 10 s. 0: Salt's 5 s with master_type failover and several masters (the next try goes to the next master), else 20 s, so that devices whose relay restarts wait their turn instead of starting over"),
		optStr("pki_dir", func(a *A) *string { return &a.PkiDir }, "the agent's key and the pinned master keys"),
		optStr("cachedir", func(a *A) *string { return &a.CacheDir }, "spool, job log, relay spool"),
		optStr("sock_dir", func(a *A) *string { return &a.SockDir }, "directory of the local socket (halite-call)"),
		optMap("grains", func(a *A) *map[string]any { return &a.Grains }, "static grains"),
		optFunc("beacons", "mapping", func(a *A, v value) error { return v.any(&a.Beacons) }, func(a *A) any { return a.Beacons }, "beacons: {name: options}"),
		optAnyList("engines", func(a *A) *[]any { return &a.Engines }, "engines to run: list of {name: options}"),
		optList("return", true, func(a *A) *[]string { return &a.Return }, "returners every job's return also goes to"),
		optOneOf("file_client", func(a *A) *string { return &a.FileClient }, []string{"remote", "local"}, "local: masterless"),
		optAnyList("reactor", func(a *A) *[]any { return &a.Reactor }, "the agent's own reactor rules"),
		optCount("spool_max", func(a *A) *int { return &a.SpoolMax }, "bytes of returns and events kept on disk until acknowledged"),
		optBool("multifunc_ordered", func(a *A) *bool { return &a.MultifuncOrdered }, "a compound job returns a list in the functions' order, not a mapping by function"),
		optCount("job_replay_window", func(a *A) *int { return &a.JobReplayWindow }, "seconds old a job may be; older is refused as a replay; 0: off"),
		optRange("update_trial_timeout", 5, 86400, func(a *A) *int { return &a.UpdateTrialTimeout }, "seconds a build installed by firmware.update has to be accepted by a master; then the old build runs again"),
		optLevel("log_level", func(a *A) *string { return &a.LogLevel }, "console log level"),
		optStr("log_file", func(a *A) *string { return &a.LogFile }, "log file"),
		optLevel("log_level_logfile", func(a *A) *string { return &a.LogLevelLogfile }, "log file level; unset: log_level"),
		optFunc("relay", "mapping (see below)", func(a *A, v value) error { return v.relay(&a.Relay) }, func(a *A) any { return a.Relay }, "makes the agent a relay; the relay options below").with("(not a relay)"),
		optFunc("schedule", "schedule: mapping of jobs", func(a *A, v value) error { return v.schedule(&a.Schedule, &a.ScheduleAt) }, func(a *A) any { return a.Schedule }, "Salt's schedule: jobs the agent runs by itself, with or without a master"),
		optFunc("mine_functions", "mapping or list", func(a *A, v value) error { return v.mineFunctions(&a.MineFunctions) }, func(a *A) any { return a.MineFunctions }, "functions whose returns the agent sends to the master's mine"),
		optCount("mine_interval", func(a *A) *int { return &a.MineInterval }, "minutes between mine updates"),
		optRoots("file_roots", func(a *A) *map[string][]string { return &a.FileRoots }, "state files of a masterless agent (halite-call --local state.apply), per environment"),
		optBool("test", func(a *A) *bool { return &a.Test }, "every state run is a test run (test=True) unless the job says test=False"),
		optBool("failhard", func(a *A) *bool { return &a.Failhard }, "a failed state stops the state run"),
		optBool("state_events", func(a *A) *bool { return &a.StateEvents }, "fire salt/job/<jid>/prog/<id>/<n> after each state of a run"),
		optFunc("state_queue", "bool or count", setStateQueue, func(a *A) any { return a.StateQueue }, "queue a state run while another runs (true, or the most that wait) instead of refusing it"),
		optStr("service_init_dir", func(a *A) *string { return &a.ServiceInitDir }, "Halite's: the init.d directory the service states use, SysV style, whatever the init system (rc?.d links in its parent); for tests and devices whose scripts live elsewhere; unset: detected, /etc/init.d"),
		optOneOf("log_format", func(x *A) *string { return &x.LogFormat }, []string{"text", "json"}, "text (Salt's layout) or json (one object a line, for log shippers)"),
		optCount("log_rotate_max_bytes", func(x *A) *int { return &x.LogRotateMaxBytes }, "rotate log_file past this size (with log_rotate_backup_count; both above 0)"),
		optCount("log_rotate_backup_count", func(x *A) *int { return &x.LogRotateBackupCount }, "rotated log files kept (file.1 the newest)"),
	},
		stateOutputOptions(func(a *A) *StateOutput { return &a.StateOutput }),
		elsewhere[A]("cli", "output color"),
		elsewhere[A]("daemon", "metrics_port"),
		[]option[A]{
			refusedTrue[A]("fips_mode", "Halite's TLS 1.3 (QUIC) is not a FIPS module"),
			refusedTrue[A]("verify_master_pubkey_sign", "Halite pins the master's key with master_finger instead"),
		},
		ignored[A](saltCommonOptions+saltMinionOptions, ""),
	)
}

func setMasters(a *Agent, v value) error {
	if err := v.strList(&a.Master, false); err != nil {
		return err
	}
	for _, m := range a.Master {
		if err := checkMasterAddr(m); err != nil {
			return err
		}
	}
	return nil
}

// AgentOptions documents the agent's options, in name order.
func AgentOptions() []OptionDoc {
	a := DefaultAgent()
	return docs(agentRole.options, a)
}

// masterOnlyOptions are the master's options that the agent does not
// know, for the agent's "that is a master option" warning. The master's
// table is not linked into the agent (see masterRole), so its names are
// repeated here; TestForeignNames keeps the two equal and prints this
// list when they differ.
const masterOnlyOptions = `
allow_minion_key_revoke archive_jobs auth_events auth_mode auto_accept autoreject_file autosign_file
autosign_grains_dir autosign_timeout batch_safe_limit batch_safe_size cli_summary client_acl_verify con_cache
detect_remote_minions django_auth_path django_auth_settings drop_messages_signature_fail dummy_pub
eauth_acl_module eauth_tokens enable_ssh_minions enforce_mine_cache event_publisher_niceness event_return
event_return_blacklist event_return_niceness event_return_queue event_return_queue_max_seconds
event_return_whitelist ext_pillar_first external_auth fileserver_events fileserver_update_niceness
fileserver_verify_config firmware_dir gather_job_timeout git_pillar_provider gitfs_provider hgfs_base hgfs_branch_method
hgfs_mountpoint hgfs_remotes hgfs_root hgfs_saltenv_blacklist hgfs_saltenv_whitelist jid_node jinja_env
jinja_lstrip_blocks jinja_sls_env jinja_trim_blocks job_cache job_cache_store_endtime keep_acl_in_token
keep_jobs keep_jobs_seconds key_cache key_pass maintenance_niceness master_job_cache master_pubkey_signature
master_roots master_sign_pubkey master_stats master_stats_event_iter master_tops master_use_pubkey_signature
max_frame max_minions max_open_files max_pending_keys memcache_debug memcache_expire_seconds
memcache_full_cleanup memcache_max_items metrics_interface min_extra_mods mine_get minion_data_cache minion_data_cache_events
minionfs_blacklist minionfs_env minionfs_mountpoint minionfs_whitelist mworker_niceness mworker_queue_niceness
netapi_allow_raw_shell netapi_enable_clients new_keys_per_address nodegroups order_masters output_file pass_dir
pass_gnupghome pass_strict_fetch pass_variable_prefix peer peer_run permissive_acl pillar_gitfs_ssl_verify
pillar_safe_render_error pillar_version ping_on_rotate port presence_events preserve_minion_cache pub_hwm
pub_server_niceness publish_port publish_session queue_dirs reactor_max_depth regen_thin relay_allow
remote_minions_port req_server_niceness require_minion_sign_messages rest_cherrypy rest_tornado ret_port
returner_queue_max roster roster_file rosters rotate_aes_key runner_returns search serial show_jid show_timeout
signing_key_pass sqlite_queue_dir ssh_config_file ssh_identities_only ssh_list_nodegroups ssh_log_file
ssh_minion_opts ssh_passwd ssh_port ssh_priv_passwd ssh_run_pre_flight ssh_scan_ports ssh_scan_timeout ssh_sudo
ssh_sudo_user ssh_timeout ssh_update_roster ssh_use_home_key ssh_user sudo_acl svnfs_branches svnfs_mountpoint
svnfs_remotes svnfs_root svnfs_saltenv_blacklist svnfs_saltenv_whitelist svnfs_tags svnfs_trunk syndic_dir
syndic_event_forward_timeout syndic_failover syndic_forward_all_events syndic_jid_forward_cache_hwm
syndic_log_file syndic_master syndic_master_port syndic_pidfile syndic_user syndic_wait tcp_master_pub_port
tcp_master_publish_pull tcp_master_pull_port tcp_master_workers thin_extra_mods timeout token_dir token_expire
token_expire_user_override utc_jid winrepo_mastercachefile worker_threads zmq_backlog
`

// LoadAgent reads dir/agent, then dir/agent.d/*.conf in lexical order, over
// the defaults, and relocates the paths under root_dir. A missing dir/agent
// means defaults. Problems that do not stop the agent, such as unknown
// options, go to warn (which may be nil). The error, if any, is an *Error.
func LoadAgent(dir string, warn func(Warning)) (*Agent, error) {
	a := DefaultAgent()
	l, err := agentRole.load(dir, a, warn)
	if err != nil {
		return nil, err
	}
	a.Raw = l.raw
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

// RelayChunkDir returns the directory of a relay's chunk cache: relay:
// chunk_cache_dir, else cachedir/relay-chunks.
func (a *Agent) RelayChunkDir() string {
	if a.Relay != nil && a.Relay.ChunkCacheDir != "" {
		return a.Relay.ChunkCacheDir
	}
	return filepath.Join(a.CacheDir, "relay-chunks")
}

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

// Opts returns the options by Salt's names, as Salt's __opts__ holds them
// for config.get: every option loaded from the files (known or not), with
// the known ones as resolved (defaults filled in, paths under root_dir),
// and conf_file. The map is the caller's.
func (a *Agent) Opts() map[string]any {
	o := make(map[string]any, len(a.Raw)+16)
	for k, v := range a.Raw {
		o[k] = v
	}
	var master any = a.Master
	if len(a.Master) == 1 {
		master = a.Master[0]
	} else {
		l := make([]any, len(a.Master))
		for i, m := range a.Master {
			l[i] = m
		}
		master = l
	}
	for k, v := range map[string]any{
		"root_dir": a.RootDir, "id": a.ID, "master": master, "master_port": a.MasterPort,
		"master_type": a.MasterType, "pki_dir": a.PkiDir, "cachedir": a.CacheDir, "sock_dir": a.SockDir,
		"file_client": a.FileClient, "log_level": a.LogLevel, "log_file": a.LogFile,
		"acceptance_wait_time": a.AcceptanceWaitTime, "random_reauth_delay": a.RandomReauthDelay,
		"auth_timeout": a.AuthTimeout, "retry_dns": a.RetryDNS, "spool_max": a.SpoolMax,
		"file_roots": rootsOpt(a.FileRoots), "test": a.Test, "failhard": a.Failhard,
		"state_events": a.StateEvents, "state_queue": a.StateQueue, "service_init_dir": a.ServiceInitDir,
	} {
		o[k] = v
	}
	if a.ConfigDir != "" {
		o["conf_file"] = filepath.Join(a.ConfigDir, "agent")
	}
	return o
}

// setStateQueue reads state_queue: a bool, or a count of runs that may wait.
func setStateQueue(a *Agent, v value) error {
	var x any
	if err := v.any(&x); err != nil {
		return err
	}
	switch n := x.(type) {
	case bool:
	case int:
		if n < 0 {
			return fmt.Errorf("expected true, false or a count, got %d", n)
		}
	default:
		return fmt.Errorf("expected true, false or a count, got %v", x)
	}
	a.StateQueue = x
	return nil
}

func rootsOpt(r map[string][]string) map[string]any {
	out := make(map[string]any, len(r))
	for env, dirs := range r {
		l := make([]any, len(dirs))
		for i, d := range dirs {
			l[i] = d
		}
		out[env] = l
	}
	return out
}

// GrainsFile returns the agent's grains file, CONFIG_DIR/grains (Salt's
// /etc/salt/grains), or "" when the configuration has no directory.
func (a *Agent) GrainsFile() string {
	if a.ConfigDir == "" {
		return ""
	}
	return filepath.Join(a.ConfigDir, "grains")
}
