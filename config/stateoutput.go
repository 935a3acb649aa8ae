package config

// StateOutput holds Salt's options of the highstate outputter, read by
// the CLIs that print state runs: halite from the master's file, halite-call
// from the agent's (salt reads them from the master's, salt-call from the
// minion's). The daemons themselves do not use them. --state-output,
// --state-verbose and --output-diff override them.
type StateOutput struct {
	StateOutput        string   `yaml:"state_output"`
	StateVerbose       bool     `yaml:"state_verbose"`
	StateOutputDiff    bool     `yaml:"state_output_diff"`
	StateOutputProfile bool     `yaml:"state_output_profile"`
	StateOutputPct     bool     `yaml:"state_output_pct"`
	StateCompressIDs   bool     `yaml:"state_compress_ids"`
	StateTabular       bool     `yaml:"state_tabular"`
	StateOutputExclude []string `yaml:"state_output_exclude"`
	StateOutputTerse   []string `yaml:"state_output_terse"`
}

// defaultStateOutput is Salt 3006's (DEFAULT_MASTER_OPTS and
// DEFAULT_MINION_OPTS in salt/config/__init__.py).
func defaultStateOutput() StateOutput {
	return StateOutput{StateOutput: "full", StateVerbose: true, StateOutputProfile: true}
}

// stateOutputOptions are the StateOutput options of a role whose struct
// holds one at f.
func stateOutputOptions[T any](f func(*T) *StateOutput) []option[T] {
	return []option[T]{
		optStr("state_output", func(t *T) *string { return &f(t).StateOutput }, "how the CLIs print state runs: full, terse, mixed, changes or filter, each with _id to show IDs for names"),
		optBool("state_verbose", func(t *T) *bool { return &f(t).StateVerbose }, "false: state runs do not print the states that succeeded without changes"),
		optBool("state_output_diff", func(t *T) *bool { return &f(t).StateOutputDiff }, "state runs print only the states that changed or failed"),
		optBool("state_output_profile", func(t *T) *bool { return &f(t).StateOutputProfile }, "state runs print each state's start and duration, and the total run time"),
		optBool("state_output_pct", func(t *T) *bool { return &f(t).StateOutputPct }, "state run summaries add Success % and Failure %"),
		optBool("state_compress_ids", func(t *T) *bool { return &f(t).StateCompressIDs }, "state runs print the states of one ID, SLS and result (a names list) as one"),
		optBool("state_tabular", func(t *T) *bool { return &f(t).StateTabular }, "terse state output in aligned columns (Salt's format string is not supported)"),
		optList("state_output_exclude", true, func(t *T) *[]string { return &f(t).StateOutputExclude }, "with state_output filter: results (True, False, None) whose states are not printed"),
		optList("state_output_terse", true, func(t *T) *[]string { return &f(t).StateOutputTerse }, "with state_output filter: results (True, False, None) whose states print terse"),
	}
}
