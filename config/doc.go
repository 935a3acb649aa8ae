// Package config loads the Salt-style YAML configuration of the Halite
// daemons and CLIs: CONFIG_DIR/master plus CONFIG_DIR/master.d/*.conf for
// the master and the operator tools, CONFIG_DIR/agent plus
// CONFIG_DIR/agent.d/*.conf for the agent (and relay), else Salt's
// CONFIG_DIR/minion and minion.d/*.conf, with Salt's option names, defaults
// and root_dir relocation. Each daemon has one option table (master.go,
// agent.go, relayparse.go) that is the list of its options: name, type,
// default, meaning and status; docs/CONFIG.md is generated from it
// (tools/configdoc). It also builds the zap logger the
// daemons share (NewLogger, with Salt's log levels).
//
// A missing main file means defaults, as in Salt. A file that cannot be read
// or parsed, or an option of the wrong type, is an *Error naming the file and
// line. Salt options Halite does not use, and options it does not know,
// are reported once as Warnings naming file and line, and kept in Raw with
// every other option. "module.option" names (redis.host, ...) are free-form:
// the returner, engine or beacon module reads and type-checks its own.
//
// It imports only the standard library, zap, go.yaml.in/yaml/v3 and
// protocol (whose ValidID is the rule for the id option), all of which the
// static agent binary carries anyway.
package config
