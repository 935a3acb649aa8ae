// Package complete is the operator CLIs' shell completion: the flag
// --completion bash|zsh|fish prints a script, and the script calls the
// program back as "PROG __complete WORD..." for the candidates, so that
// completion stays current with the program and the master. Flags come
// from the program's pflag set; positional arguments and flag values from
// the program (minion ids and function names from the master's local
// API). Candidates are filtered here, one a line: the scripts never hand
// them to an expanding builtin such as compgen -W.
package complete
