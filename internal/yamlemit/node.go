package yamlemit

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind is a node's kind; the values are go-yaml's.
type Kind uint32

const (
	SequenceNode Kind = 1 << (iota + 1)
	MappingNode
	ScalarNode
)

// Style holds a node's style flags; the values are go-yaml's (there is no
// folded style: nothing in Halite writes one).
type Style uint32

const (
	TaggedStyle Style = 1 << iota
	DoubleQuotedStyle
	SingleQuotedStyle
	LiteralStyle
	_ // go-yaml's FoldedStyle
	FlowStyle
)

// Node is a YAML node to write, the part of go-yaml's yaml.Node that
// Halite's writers use: no anchors, aliases, comments or documents.
type Node struct {
	Kind    Kind
	Style   Style
	Tag     string // "!!str", "!!int", …; "" leaves it to the value
	Value   string
	Content []*Node // a sequence's items; a mapping's keys and values in turn
}

// scalarStyle is the emitter's scalar style (libyaml's yaml_scalar_style_t).
type scalarStyle uint8

const (
	plainStyle scalarStyle = iota
	singleStyle
	doubleStyle
	literalStyle
)

// event is a node as go-yaml's encoder hands it to the emitter: a tag only
// when it must be written, and the style asked for.
type event struct {
	kind    Kind
	tag     string // short form; "" is implicit
	value   string
	style   scalarStyle
	flow    bool // a collection asked for in flow style
	content []*event
	chosen  scalarStyle // the style the emitter wrote a scalar in
	inFlow  bool        // the emitter wrote a collection in flow style
}

// nodeEvent is go-yaml's encoder.node: it drops a tag the value implies
// anyway and double-quotes a !!str whose plain text would read as
// something else.
func nodeEvent(n *Node, depth int) (*event, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	if n.Kind == 0 && n.Style == 0 && n.Tag == "" && n.Value == "" && n.Content == nil {
		return nullEvent(), nil
	}
	tag := n.Tag
	stag := shortTag(tag)
	forceQuoting := false
	if tag != "" && n.Style&TaggedStyle == 0 {
		switch n.Kind {
		case ScalarNode:
			if stag == strTag && n.Style&(SingleQuotedStyle|DoubleQuotedStyle|LiteralStyle) != 0 {
				tag = ""
			} else if rtag := resolve(n.Value); rtag == stag {
				tag = ""
			} else if stag == strTag {
				tag = ""
				forceQuoting = true
			}
		case MappingNode:
			if stag == mapTag {
				tag = ""
			}
		case SequenceNode:
			if stag == seqTag {
				tag = ""
			}
		}
	}
	ev := &event{kind: n.Kind, tag: shortTag(tag)}
	switch n.Kind {
	case SequenceNode, MappingNode:
		if n.Kind == MappingNode && len(n.Content)%2 != 0 {
			// go-yaml drops a key without a value.
			n = &Node{Kind: n.Kind, Style: n.Style, Content: n.Content[:len(n.Content)-1]}
		}
		ev.flow = n.Style&FlowStyle != 0
		ev.content = make([]*event, 0, len(n.Content))
		for _, c := range n.Content {
			ce, err := nodeEvent(c, depth+1)
			if err != nil {
				return nil, err
			}
			ev.content = append(ev.content, ce)
		}
	case ScalarNode:
		value := n.Value
		if !utf8.ValidString(value) {
			if stag == binaryTag {
				return nil, fmt.Errorf("yaml: explicitly tagged !!binary data must be base64-encoded")
			}
			if stag != "" {
				return nil, fmt.Errorf("yaml: cannot marshal invalid UTF-8 data as %s", stag)
			}
			ev.tag = binaryTag
			value = encodeBase64(value)
		}
		ev.value = value
		switch {
		case n.Style&DoubleQuotedStyle != 0:
			ev.style = doubleStyle
		case n.Style&SingleQuotedStyle != 0:
			ev.style = singleStyle
		case n.Style&LiteralStyle != 0:
			ev.style = literalStyle
		case strings.Contains(value, "\n"):
			ev.style = literalStyle
		case forceQuoting:
			ev.style = doubleStyle
		}
	default:
		return nil, fmt.Errorf("yaml: cannot encode node with unknown kind %d", n.Kind)
	}
	return ev, nil
}

func nullEvent() *event {
	return &event{kind: ScalarNode, value: "null"}
}

// toNode is what go-yaml's parser makes of ev as the emitter wrote it (in
// block style, as (*yaml.Node).Encode writes and reads back): the style it
// was written in and the tag it reads as.
func (ev *event) toNode() *Node {
	n := &Node{Kind: ev.kind, Value: ev.value}
	if ev.tag != "" {
		n.Tag = ev.tag
		n.Style = TaggedStyle
	}
	switch ev.kind {
	case ScalarNode:
		var s Style
		switch ev.chosen {
		case singleStyle:
			s = SingleQuotedStyle
		case doubleStyle:
			s = DoubleQuotedStyle
		case literalStyle:
			s = LiteralStyle
		}
		n.Style |= s
		if n.Tag == "" {
			if s != 0 {
				n.Tag = strTag
			} else {
				n.Tag = resolve(ev.value)
			}
		}
	case SequenceNode, MappingNode:
		if n.Tag == "" {
			n.Tag = seqTag
			if ev.kind == MappingNode {
				n.Tag = mapTag
			}
		}
		if ev.inFlow {
			n.Style |= FlowStyle
		}
		for _, c := range ev.content {
			n.Content = append(n.Content, c.toNode())
		}
	}
	return n
}
