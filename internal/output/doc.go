// Package output renders job returns for Halite's command-line tools the way
// Salt's outputters do, so that `halite`, `halite-run`, `halite-key` and
// `halite-call` print what `salt`, `salt-run`, `salt-key` and `salt-call`
// would. It sits between the CBOR-decoded results the CLIs receive from the
// master (or a masterless agent) and the terminal: the CLI picks the
// outputter (--out) and whether to colour, this package does the rendering.
//
// The outputters are nested (Salt's default), json, yaml, txt, raw and quiet.
// Values are rendered as the Python objects Salt would hold: nil is None,
// booleans are True/False, floats use Python's repr (1.0, 1e+20) and maps are
// printed with their keys sorted, since Go maps keep no order.
package output
