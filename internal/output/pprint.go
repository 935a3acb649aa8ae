package output

import (
	"strings"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// renderPprint renders like Salt's pprint outputter
// (salt/output/pprint_out.py): pprint.pformat(data), with
// indent=output_indent when that is set and not negative.
func renderPprint(v any, opts Options) (string, error) {
	per := 1
	if opts.IndentSet && opts.Indent >= 0 {
		per = opts.Indent
	}
	return pyPformatIndent(v, per), nil
}

// renderNewlineValuesOnly renders like Salt's newline_values_only
// outputter (salt/output/newline_values_only.py): the minion ids go, each
// value is a line (its Python str()), and a list value gives a line per
// item. Data that is not a dictionary makes that outputter fail, and Salt
// then prints it with nested (salt/output/__init__.py try_printout).
func renderNewlineValuesOnly(v any, opts Options) (string, error) {
	d, ok := v.(*dict)
	if !ok {
		return renderNested(v, opts)
	}
	var lines []string
	for _, val := range d.vals {
		if l, ok := val.(list); ok {
			for _, e := range l {
				lines = append(lines, saltdata.Str(e))
			}
			continue
		}
		lines = append(lines, saltdata.Str(val))
	}
	return strings.Join(lines, "\n"), nil
}
