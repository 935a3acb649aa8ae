// Package state is the agent's state system: it applies the low state the
// master compiled (package state's Chunks) in Salt's order, honouring the
// requisites, and runs the state modules (file, cmd, service, pkg, user,
// group, cron, host, archive, module, event, test), each registered from
// its own file with Register. It also provides the state.* execution
// functions.
package state
