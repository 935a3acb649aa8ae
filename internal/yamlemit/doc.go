// Package yamlemit writes YAML byte for byte as go-yaml v3's encoder
// (go.yaml.in/yaml/v3) does, for what Halite writes: Go maps, slices and
// scalars (yaml.Marshal, Encoder.Encode with SetIndent and
// CompactSeqIndent), Node trees in block or flow style with plain,
// single-quoted, double-quoted and literal scalars, and the node that
// (*yaml.Node).Encode makes of a Go value.
//
// It exists for the size of the device agent: go-yaml's encoder (its
// libyaml emitter port) costs the armv7 agent about 94 KB, and the agent
// needs go-yaml only to read. Its writers (beacons.Save, the grains
// file, the schedule listing, `--out yaml` in internal/output and the
// yaml Jinja filter in render/sls) use this package instead; go-yaml
// still reads everywhere, and the tests compare this package's output
// with go-yaml's (differential tests and FuzzEmitMatchesGoYAML).
//
// Not carried over, as no caller asks for them: anchors, aliases,
// comments, documents and directives, folded scalars, line folding (the
// encoder's width is unlimited), yaml.Marshaler and struct fields.
package yamlemit
