// Package statecomp is the master's state compiler: for each device a
// state job targets, it reads the top files and SLS files of file_roots
// through the master's file server (master/fileserver), renders them with
// the device's grains and pillar (Jinja then YAML, package render), merges
// and matches the top files and compiles high data into Salt's ordered
// low state with package state, checks the requisites, and inlines the
// salt:// sources the chunks need (fileserver.Inline; `template: jinja`
// sources rendered for the device). Devices whose render inputs are equal
// share one compile.
//
// The cache (cache.go) keys a compile on the request (function, saltenv,
// mods, the pillar= override) and on the values of the inputs the
// templates it rendered can read: the grains and pillar keys they name,
// the top file targets they match, or all of a device's grains and pillar
// when a template reads them in a way that cannot be named ahead
// (grains.items(), grains[var], opts). Every file server lookup a compile
// made (SLS names, templates, top files, inlined sources and directories,
// the SLS listing of an env) is recorded with the path it found and its
// SHA-256, and asked again at the start of each Compile call: a change
// drops the cached compiles of that request.
//
// Within one Compile call each file is rendered once per distinct value
// of what it (and the templates it includes) can read: a file that reads
// no per-device input is rendered and parsed once for all the devices,
// and what package state makes of it on its own (its IDs' state
// declarations, auto orders and chunks) is made once too (a state.Memo per
// call): a device whose compile differs from the others' in one file pays
// for rendering that file and for the stages that join the files
// (requisites, order, checks), not for the files it shares. The shared
// chunks are read only: those fileserver.Inline fills are copied first.
//
// Render-time salt[] functions are evaluated on the master from what it
// knows (funcs.go); any other is an error naming the file and line.
package statecomp
