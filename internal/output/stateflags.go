package output

import "github.com/spf13/pflag"

// StateFlags are the highstate outputter's command-line options, as
// Salt's OutputOptionsMixIn and --output-diff (salt/utils/parsers.py):
// --state-output (--state_output), --state-verbose (--state_verbose) and
// --output-diff.
type StateFlags struct {
	fs      *pflag.FlagSet
	output  string
	verbose string
	diff    bool
}

// AddStateFlags adds the state output flags to fs.
func AddStateFlags(fs *pflag.FlagSet) *StateFlags {
	f := &StateFlags{fs: fs}
	const outHelp = "how state runs print (state_output): full, terse, mixed, changes or filter, each with _id to show IDs for names"
	const verbHelp = "state_verbose: False hides the states that succeeded without changes"
	fs.StringVar(&f.output, "state-output", "", outHelp)
	fs.StringVar(&f.output, "state_output", "", "same as --state-output")
	fs.StringVar(&f.verbose, "state-verbose", "", verbHelp)
	fs.StringVar(&f.verbose, "state_verbose", "", "same as --state-verbose")
	fs.BoolVar(&f.diff, "output-diff", false, "report only the states that changed or failed (state_output_diff)")
	return f
}

// Options are the highstate outputter's options: Salt's defaults, then
// conf's (the master's options for halite, the agent's for halite-call,
// by Salt's names: state_output, state_verbose, state_output_diff,
// state_output_profile, state_output_pct, state_compress_ids,
// state_tabular, state_output_exclude, state_output_terse), then the
// flags given. kwargs are the job's keyword arguments: with state_output
// filter, exclude= and terse= win over the configuration, as Salt reads
// them from the command line's arguments.
func (f *StateFlags) Options(conf, kwargs map[string]any) *StateOptions {
	o := DefaultStateOptions()
	if s, ok := conf["state_output"].(string); ok {
		o.Output = s
	}
	confBool := func(name string, dst *bool) {
		if v, ok := conf[name]; ok {
			*dst = pyTruthyRaw(v)
		}
	}
	confBool("state_verbose", &o.Verbose)
	confBool("state_output_diff", &o.Diff)
	confBool("state_output_profile", &o.Profile)
	confBool("state_output_pct", &o.Pct)
	confBool("state_compress_ids", &o.CompressIDs)
	if b, ok := conf["state_tabular"].(bool); ok {
		o.Tabular = b
	}
	o.Exclude, o.Terse = conf["state_output_exclude"], conf["state_output_terse"]
	if v, ok := kwargs["exclude"]; ok {
		o.Exclude = v
	}
	if v, ok := kwargs["terse"]; ok {
		o.Terse = v
	}
	if f == nil || f.fs == nil {
		return &o
	}
	if f.fs.Changed("state-output") || f.fs.Changed("state_output") {
		o.Output = f.output
	}
	if f.fs.Changed("state-verbose") || f.fs.Changed("state_verbose") {
		// process_state_verbose: True/true and False/false are booleans;
		// any other text stays a string, true unless empty.
		switch f.verbose {
		case "True", "true":
			o.Verbose = true
		case "False", "false":
			o.Verbose = false
		default:
			o.Verbose = f.verbose != ""
		}
	}
	if f.diff {
		o.Diff = true
	}
	return &o
}

// pyTruthyRaw is Python's bool() of a configuration value.
func pyTruthyRaw(v any) bool {
	n, err := normalize(v)
	if err != nil {
		return true
	}
	return pyTruthy(n)
}
