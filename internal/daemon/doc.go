// Package daemon is what the daemons (halite-master, halite-agent) do for
// Salt's -d/--daemon, --pid-file and -u/--user (DaemonMixIn and
// UserMixIn in salt/utils/parsers.py, daemonize in salt/utils/process.py,
// check_user in salt/utils/verify.py): run detached in a new session with
// stdio on /dev/null, record the pid, and drop root for another user. It
// imports only the standard library, as the agent does.
package daemon
