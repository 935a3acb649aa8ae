package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/halite-fleet/halite/internal/version"
)

// ErrVersionPrinted is returned by VersionFlags.Print when it printed the
// version: the program exits 0 (Exit treats it as success).
var ErrVersionPrinted = errors.New("version printed")

// VersionFlags are every program's --version and -V/--versions-report, as
// in Salt's OptionParser (salt/utils/parsers.py): --version prints
// "PROG VERSION", -V the versions report.
type VersionFlags struct{ version, report bool }

// AddVersionFlags adds --version and -V/--versions-report to fs.
func AddVersionFlags(fs *pflag.FlagSet) *VersionFlags {
	v := &VersionFlags{}
	fs.BoolVar(&v.version, "version", false, "print the program's version, commit and Go version, and exit")
	fs.BoolVarP(&v.report, "versions-report", "V", false, "print the versions of the program, Go, the Go modules it is built with and the system, and exit")
	return v
}

// Print prints the version (or the report) if asked and then returns
// ErrVersionPrinted; it returns nil if neither flag was given.
func (v *VersionFlags) Print(prog string, w io.Writer) error {
	switch {
	case v.report:
		if err := version.Report(w); err != nil {
			return fmt.Errorf("print versions report: %w", err)
		}
	case v.version:
		if _, err := fmt.Fprintln(w, version.Line(prog)); err != nil {
			return fmt.Errorf("print version: %w", err)
		}
	default:
		return nil
	}
	return ErrVersionPrinted
}
