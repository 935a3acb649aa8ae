package config

// StateTop holds Salt's options of the top file, read by the master when
// it compiles a highstate (salt/state.py BaseHighState.get_tops,
// _get_envs, merge_tops).
type StateTop struct {
	// StateTop is the top file's path in each environment's file roots.
	StateTop string `yaml:"state_top"`
	// StateTopSaltenv, when set, is the only environment whose top file
	// is read.
	StateTopSaltenv string `yaml:"state_top_saltenv"`
	// TopFileMergingStrategy is merge, same or merge_all (state.MergeTops).
	TopFileMergingStrategy string `yaml:"top_file_merging_strategy"`
	// DefaultTop is the environment whose top file serves an environment
	// without one, with strategy same.
	DefaultTop string `yaml:"default_top"`
	// EnvOrder is the order environments' top files are read and merged
	// in; unset: base, then the others.
	EnvOrder []string `yaml:"env_order"`
}

// defaultStateTop is Salt 3006's (DEFAULT_MASTER_OPTS in
// salt/config/__init__.py).
func defaultStateTop() StateTop {
	return StateTop{StateTop: "top.sls", TopFileMergingStrategy: "merge", DefaultTop: "base"}
}

// stateTopOptions are the StateTop options of a role whose struct holds
// one at f.
func stateTopOptions[T any](f func(*T) *StateTop) []option[T] {
	return []option[T]{
		optStr("state_top", func(t *T) *string { return &f(t).StateTop }, "the top file's path under each environment's file_roots (salt://top.sls or top.sls)"),
		optStr("state_top_saltenv", func(t *T) *string { return &f(t).StateTopSaltenv }, "read the top file of this environment only; unset: every environment's"),
		optOneOf("top_file_merging_strategy", func(t *T) *string { return &f(t).TopFileMergingStrategy }, []string{"merge", "same", "merge_all"}, "how the environments' top files combine: merge (base's first, others add their own env), same (each env its own file), merge_all"),
		optStr("default_top", func(t *T) *string { return &f(t).DefaultTop }, "with top_file_merging_strategy same: the environment whose top file serves an environment that has none"),
		optList("env_order", false, func(t *T) *[]string { return &f(t).EnvOrder }, "the order the environments' top files are read and merged in; unset: base, then the others by name"),
	}
}
