package yamlemit

import (
	"reflect"

	"go.yaml.in/yaml/v3"
)

// Options are go-yaml Encoder settings.
type Options struct {
	// Indent is Encoder.SetIndent's: 0 means go-yaml's default, 4; one
	// outside 2..9 is 2.
	Indent int
	// CompactSeq is Encoder.CompactSeqIndent: "- " counts as part of the
	// indentation of a sequence in a mapping.
	CompactSeq bool
}

// Marshal is yaml.Marshal: v as one YAML document, indented by four.
func Marshal(v any) ([]byte, error) {
	return Encode(v, Options{})
}

// Encode is what a yaml.Encoder with o's settings writes for Encode(v)
// and Close. v is a Go value as valueEvent describes, or a *yaml.Node
// (without anchors, aliases, comments or folded scalars).
func Encode(v any, o Options) ([]byte, error) {
	ev, err := valueEvent(reflect.ValueOf(v), 0)
	if err != nil {
		return nil, err
	}
	indent := o.Indent
	if indent == 0 {
		indent = 4
	}
	e := newEmitter(indent, o.CompactSeq)
	e.document(ev)
	return e.out, nil
}

// FromValue is (*yaml.Node).Encode: the node go-yaml reads back from its
// own encoding of v, with the styles the emitter chose and the tags the
// resolver gives.
func FromValue(v any) (*yaml.Node, error) {
	ev, err := valueEvent(reflect.ValueOf(v), 0)
	if err != nil {
		return nil, err
	}
	newEmitter(4, false).document(ev)
	return ev.toNode(), nil
}
