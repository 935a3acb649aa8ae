package config

import "fmt"

// Error is a configuration error: a file that cannot be read, bad YAML, or
// an option with a value of the wrong type. Line is 0 when the error is not
// about one line.
type Error struct {
	File string
	Line int
	Msg  string
	err  error
}

// Error returns "FILE:LINE: MSG", or "FILE: MSG" without a line.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns the underlying error, if any (an I/O error, for example).
func (e *Error) Unwrap() error { return e.err }

// Warning is something in a configuration file that does not stop Halite
// but deserves the operator's attention, such as an unknown option.
type Warning struct {
	File string
	Line int
	Msg  string
}

// String returns "FILE:LINE: MSG".
func (w Warning) String() string {
	return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Msg)
}
