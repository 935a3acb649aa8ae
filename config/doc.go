// Package config loads the Salt-style YAML configuration of the Halite
// daemons and CLIs: CONFIG_DIR/master plus CONFIG_DIR/master.d/*.conf for
// the master and the operator tools, CONFIG_DIR/agent plus
// CONFIG_DIR/agent.d/*.conf for the agent (and relay), with Salt's option
// names, defaults and root_dir relocation. It also builds the zap logger the
// daemons share (NewLogger, with Salt's log levels).
//
// A missing main file means defaults, as in Salt. A file that cannot be read
// or parsed, or an option of the wrong type, is an *Error naming the file and
// line. Options Halite does not know are reported as Warnings and kept in
// Raw; Salt options it does not use yet are accepted silently.
//
// It imports only the standard library, zap, go.yaml.in/yaml/v3 and
// protocol (whose ValidID is the rule for the id option), all of which the
// static agent binary carries anyway.
package config
