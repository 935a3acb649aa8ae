// Package saltdata holds Salt's rules for plain data, in one place for every
// part of Halite that follows them:
//
//   - traverse.go is salt.utils.data.traverse_dict_and_list: the nested key
//     "a:b:0" that grains.get, config.get, pillar and grain targets and
//     Starlark engines look up (agent/grains, agent/exec, targets,
//     engines/starlark);
//   - repr.go is Python's repr() and str() of the values Salt holds: how
//     grain targets compare a number or a list (targets) and how the
//     outputters print a return (internal/output).
//
// It imports nothing of ours and nothing outside the standard library, so
// that targets (which imports nothing else of ours) and the device agent
// can use it.
package saltdata
