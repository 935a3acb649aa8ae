package yamlemit

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

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
	kind    yaml.Kind
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
func nodeEvent(n *yaml.Node, depth int) (*event, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	if n.Kind == 0 && n.IsZero() {
		return nullEvent(), nil
	}
	if n.Anchor != "" || n.Alias != nil || n.HeadComment != "" || n.LineComment != "" || n.FootComment != "" || n.Style&yaml.FoldedStyle != 0 {
		return nil, fmt.Errorf("yamlemit: cannot write anchors, aliases, comments or folded scalars")
	}
	tag := n.Tag
	stag := shortTag(tag)
	forceQuoting := false
	if tag != "" && n.Style&yaml.TaggedStyle == 0 {
		switch n.Kind {
		case yaml.ScalarNode:
			if stag == strTag && n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle) != 0 {
				tag = ""
			} else if rtag := resolve(n.Value); rtag == stag {
				tag = ""
			} else if stag == strTag {
				tag = ""
				forceQuoting = true
			}
		case yaml.MappingNode:
			if stag == mapTag {
				tag = ""
			}
		case yaml.SequenceNode:
			if stag == seqTag {
				tag = ""
			}
		}
	}
	ev := &event{kind: n.Kind, tag: shortTag(tag)}
	if !plainTag(ev.tag) {
		return nil, fmt.Errorf("yamlemit: cannot write tag %q", n.Tag)
	}
	switch n.Kind {
	case yaml.SequenceNode, yaml.MappingNode:
		content := n.Content
		if n.Kind == yaml.MappingNode && len(content)%2 != 0 {
			content = content[:len(content)-1] // go-yaml drops a key without a value
		}
		ev.flow = n.Style&yaml.FlowStyle != 0
		ev.content = make([]*event, 0, len(content))
		for _, c := range content {
			ce, err := nodeEvent(c, depth+1)
			if err != nil {
				return nil, err
			}
			ev.content = append(ev.content, ce)
		}
	case yaml.ScalarNode:
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
		case n.Style&yaml.DoubleQuotedStyle != 0:
			ev.style = doubleStyle
		case n.Style&yaml.SingleQuotedStyle != 0:
			ev.style = singleStyle
		case n.Style&yaml.LiteralStyle != 0:
			ev.style = literalStyle
		case strings.Contains(value, "\n"):
			ev.style = literalStyle
		case forceQuoting:
			ev.style = doubleStyle
		}
	case yaml.DocumentNode, yaml.AliasNode:
		// go-yaml writes these too; nothing in Halite asks.
		return nil, fmt.Errorf("yamlemit: cannot write document or alias nodes")
	default:
		return nil, fmt.Errorf("yaml: cannot encode node with unknown kind %d", n.Kind)
	}
	return ev, nil
}

// plainTag says go-yaml writes the short tag t as it is spelled: "!" or
// "!!" (tag:yaml.org,2002:) then characters its emitter does not escape
// (yaml_emitter_write_tag_content). Other tags, written %-escaped or as
// !<verbatim>, no caller asks for.
func plainTag(t string) bool {
	if t == "" {
		return true
	}
	if t[0] != '!' {
		return false
	}
	if strings.HasPrefix(t, "!!") {
		t = t[1:]
	}
	for i := 1; i < len(t); i++ {
		c := t[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || strings.IndexByte("-_;/?:@&=+$,.~*'()[]", c) >= 0) {
			return false
		}
	}
	return true
}

func nullEvent() *event {
	return &event{kind: yaml.ScalarNode, value: "null"}
}

// toNode is what go-yaml's parser makes of ev as the emitter wrote it (in
// block style, as (*yaml.Node).Encode writes and reads back): the style it
// was written in and the tag it reads as.
func (ev *event) toNode() *yaml.Node {
	n := &yaml.Node{Kind: ev.kind, Value: ev.value}
	if ev.tag != "" {
		n.Tag = ev.tag
		n.Style = yaml.TaggedStyle
	}
	switch ev.kind {
	case yaml.ScalarNode:
		var s yaml.Style
		switch ev.chosen {
		case singleStyle:
			s = yaml.SingleQuotedStyle
		case doubleStyle:
			s = yaml.DoubleQuotedStyle
		case literalStyle:
			s = yaml.LiteralStyle
		}
		n.Style |= s
		if n.Tag == "" {
			if s != 0 {
				n.Tag = strTag
			} else {
				n.Tag = resolve(ev.value)
			}
		}
	case yaml.SequenceNode, yaml.MappingNode:
		if n.Tag == "" {
			n.Tag = seqTag
			if ev.kind == yaml.MappingNode {
				n.Tag = mapTag
			}
		}
		if ev.inFlow {
			n.Style |= yaml.FlowStyle
		}
		for _, c := range ev.content {
			n.Content = append(n.Content, c.toNode())
		}
	}
	return n
}
