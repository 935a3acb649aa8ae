// Package yamlemit writes YAML byte for byte as go-yaml v3's encoder
// (go.yaml.in/yaml/v3) does, for what Halite writes: Go maps, slices and
// scalars (yaml.Marshal, or an Encoder with SetIndent and
// CompactSeqIndent), yaml.Node trees in block or flow style with plain,
// single-quoted, double-quoted and literal scalars, and the node that
// (*yaml.Node).Encode makes of a Go value (FromValue).
//
// It exists for the size of the device agent: go-yaml's encoder (its port
// of libyaml's emitter) costs the armv7 agent about 94 KB, and the agent
// needs go-yaml only to read. The writers (beacons.Save, the grains file,
// the schedule listing, `--out yaml` in internal/output and the yaml Jinja
// filter in render/sls) use this package; go-yaml still reads everywhere,
// its resolver answers here whether a plain scalar would read back as a
// string, and the tests compare this package's output with go-yaml's
// encoder (differential tests and FuzzEmitMatchesGoYAML).
//
// Not carried over, as nothing in Halite writes them: anchors, aliases,
// comments, document nodes and directives, folded scalars (all refused
// with an error), line folding (go-yaml's encoder sets no width),
// yaml.Marshaler and struct values (an error).
package yamlemit
