// Package output renders job returns for Halite's command-line tools the way
// Salt's outputters do, so that `halite`, `halite-run`, `halite-key` and
// `halite-call` print what `salt`, `salt-run`, `salt-key` and `salt-call`
// would. It sits between the CBOR-decoded results the CLIs receive from the
// master (or a masterless agent) and the terminal: the CLI picks the
// outputter (--out) and whether to colour, this package does the rendering.
//
// The outputters are nested (Salt's default), json, yaml, txt, raw, pprint,
// newline_values_only and quiet; the CLIs fall back to nested for an unknown
// one, as Salt does. Values are rendered as the Python objects Salt would
// hold: nil is None, booleans are True/False, floats use Python's repr (1.0,
// 1e+20). nested, yaml and pprint sort keys as Salt's do; json, txt, raw and
// newline_values_only keep an Ordered's order (InSaltOrder gives the order
// of the functions where Salt's is known) and sort plain Go maps, which keep
// none.
package output
