// Package state holds Salt's state data shared by the master, which compiles
// SLS files, and the agent, which applies them: the low chunk (one state
// function with its arguments, as Salt's State.compile_high_data makes it),
// the return of one state (Ret, keyed by Tag), the high data compiler
// (include, extend, names, requisite _in forms, order) and the requisite
// checks that refuse cycles and missing IDs before anything runs.
//
// It renders nothing: the master gives it YAML already rendered through
// package render (Jinja, then YAML in key order); a masterless agent gives
// it plain YAML. It imports neither master nor agent.
package state
