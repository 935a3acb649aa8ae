package fileserver

import (
	"errors"
	"fmt"
)

// The kinds of error the Server returns; match them with errors.Is.
var (
	// ErrNotFound: no root of the environment holds the path (or the
	// environment has no roots).
	ErrNotFound = errors.New("not found on the file server")
	// ErrRefused: the path is not one the file server serves: absolute,
	// with a ".." component or a NUL byte, not a salt:// URL, or leading
	// out of its root through a symlink.
	ErrRefused = errors.New("path refused by the file server")
	// ErrTooLarge: the file is larger than the caller's limit.
	ErrTooLarge = errors.New("file too large")
)

// Error is an error of the Server: its message says what was asked and
// why it failed, in Salt's words where Salt has them; Kind is one of
// ErrNotFound, ErrRefused, ErrTooLarge, or nil for an I/O error (Err).
type Error struct {
	Kind error
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap gives errors.Is and errors.As the kind and the cause.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

func notFound(u, env string) error {
	return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("%s not found in saltenv '%s'", u, env)}
}

func refused(u, env, why string) error {
	return &Error{Kind: ErrRefused, Msg: fmt.Sprintf("%s refused in saltenv '%s': %s", u, env, why)}
}
