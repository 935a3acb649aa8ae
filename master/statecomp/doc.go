// Package statecomp is the master's state compiler: for each device a
// state job targets, it renders top.sls and the SLS files of the file
// roots (Jinja with the device's grains and pillar, through package render)
// into Salt's low state with package state, and caches the result so that
// devices whose render inputs are equal share one compile.
//
// The cache (cache.go) keys a compile on the request (saltenv, function,
// mods, the pillar= override) and on the values of the inputs the templates
// it rendered can read: the grains and pillar keys they name, the targets
// they match, or all of a device's grains and pillar when a template reads
// them in a way that cannot be named ahead (grains.items(), grains[var],
// opts). Files are checked by stat, and their hash when the stat changed,
// at the start of each compile request; a change drops the cached compiles
// that read the file.
//
// Render-time salt[] functions are evaluated on the master from what it
// knows (funcs.go); any other is an error naming the file and line.
package statecomp
