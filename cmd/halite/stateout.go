package main

import "github.com/halite-fleet/halite/internal/output"

// outputter is the outputter for one return, as salt picks it: --out when
// given (but --out highstate means the function's own, get_printout in
// salt/output/__init__.py), else the function's: highstate for the state
// runs (state.apply, sls, highstate, single, ...), nested for the rest and
// for a compound command (its return has no outputter in Salt).
func (o options) outputter(ret any, ok bool) string {
	out := ""
	if o.outSet {
		out = o.out
	}
	if o.funs != nil {
		if out == "" || out == "highstate" {
			return "nested"
		}
		return out
	}
	return output.ReturnOutputter(out, o.fun, ret, ok)
}
