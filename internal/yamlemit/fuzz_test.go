package yamlemit

import (
	"math"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// gen builds a Go value or a Node tree from fuzz bytes: shape picks kinds,
// lengths, styles and tags; strings come from text (split at NUL) and the
// awkward list.
type gen struct {
	shape []byte
	strs  []string
}

func (g *gen) next() (byte, bool) {
	if len(g.shape) == 0 {
		return 0, false
	}
	b := g.shape[0]
	g.shape = g.shape[1:]
	return b, true
}

func (g *gen) str() string {
	b, _ := g.next()
	if b&1 == 0 && len(g.strs) > 0 {
		return g.strs[int(b>>1)%len(g.strs)]
	}
	return awkward[int(b>>1)%len(awkward)]
}

func (g *gen) value(depth int) any {
	op, ok := g.next()
	if !ok || depth > 6 {
		return g.str()
	}
	switch op % 16 {
	case 0, 1, 2:
		return g.str()
	case 3:
		b, _ := g.next()
		return int(int8(b)) * 1000003
	case 4:
		b, _ := g.next()
		return []float64{0, -0.5, 1e21, 1e-7, 3.14, math.Inf(1), math.Inf(-1), math.NaN(), 100, 1e6}[int(b)%10]
	case 5:
		return op&16 != 0
	case 6:
		return nil
	case 7, 8:
		b, _ := g.next()
		l := make([]any, int(b)%5)
		for i := range l {
			l[i] = g.value(depth + 1)
		}
		return l
	case 9, 10:
		b, _ := g.next()
		m := make(map[string]any)
		for range int(b) % 5 {
			m[g.str()] = g.value(depth + 1)
		}
		return m
	case 11:
		b, _ := g.next()
		m := make(map[any]any)
		for i := range int(b) % 4 {
			var k any
			switch i {
			case 0:
				k = g.str()
			case 1:
				k = int(b)
			case 2:
				k = float64(b) / 4
			default:
				k = b&1 == 0
			}
			m[k] = g.value(depth + 1)
		}
		return m
	case 12:
		return []byte(g.str())
	case 13:
		b, _ := g.next()
		return uint64(math.MaxUint64) - uint64(b)
	case 14:
		b, _ := g.next()
		return float32(b) / 3
	default:
		b, _ := g.next()
		return time.Date(2000+int(b), time.Month(b%12+1), 1, int(b%24), 0, 0, int(b)*1000, time.UTC)
	}
}

var fuzzTags = []string{"", "", "", "!!str", "!!int", "!!float", "!!bool", "!!null", "!!binary", "!!timestamp", "!local", "!!map", "!!seq"}
var fuzzScalarStyles = []yaml.Style{0, 0, yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle, yaml.LiteralStyle, yaml.TaggedStyle, yaml.TaggedStyle | yaml.SingleQuotedStyle, yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle}

func (g *gen) node(depth int) *yaml.Node {
	op, ok := g.next()
	if !ok || depth > 6 {
		return &yaml.Node{Kind: yaml.ScalarNode, Value: g.str()}
	}
	tb, _ := g.next()
	tag := fuzzTags[int(tb)%len(fuzzTags)]
	switch op % 8 {
	case 0, 1, 2, 3, 4:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Style: fuzzScalarStyles[int(op>>3)%len(fuzzScalarStyles)], Value: g.str()}
	case 5:
		b, _ := g.next()
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: tag}
		if b&0x80 != 0 {
			n.Style = yaml.FlowStyle
		}
		for range int(b) % 5 {
			n.Content = append(n.Content, g.node(depth+1))
		}
		return n
	default:
		b, _ := g.next()
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: tag}
		if b&0x80 != 0 {
			n.Style = yaml.FlowStyle
		}
		for range int(b) % 5 {
			n.Content = append(n.Content, g.node(depth+1), g.node(depth+1))
		}
		return n
	}
}

// FuzzEmitMatchesGoYAML: for any Go value and any node tree of the shapes
// Halite writes, Encode (at every indent, compact or not) and FromValue
// give what go-yaml gives.
func FuzzEmitMatchesGoYAML(f *testing.F) {
	for i, s := range awkward {
		f.Add([]byte{byte(i), 0x09, 3, 1, byte(2 * i), 7, 2, 0x0c, byte(i)}, s, uint8(i%11), uint8(i))
	}
	f.Add([]byte{9, 4, 0, 7, 3, 0, 2, 8, 5, 0, 11, 3}, "a\x00b: c\x00- d\x00 e \x00f\ng", uint8(2), uint8(1))
	f.Add([]byte{7, 4, 8, 3, 2, 4, 9, 2, 10, 1, 0, 8, 2, 0, 0}, "x\x00yes\x00\n\n", uint8(4), uint8(0))
	f.Add([]byte{6, 0x81, 3, 4, 1, 0x85, 0, 2, 5, 3, 2, 0, 12, 7}, "key\x00value\x00'q'\x00\"d\"", uint8(3), uint8(1))
	f.Add([]byte{0x25, 8, 0x3d, 2, 1, 0x1e, 5, 0x16, 3}, "\ufeffbom\x00\u2028ls\x00tab\there", uint8(9), uint8(0))
	f.Fuzz(func(t *testing.T, shape []byte, text string, indent, flags uint8) {
		if len(shape) > 256 || len(text) > 4096 {
			return
		}
		strs := strings.Split(text, "\x00")
		o := Options{Indent: int(indent % 12), CompactSeq: flags&1 != 0}
		checkValue(t, (&gen{shape: shape, strs: strs}).value(0), o)
		checkNode(t, (&gen{shape: shape, strs: strs}).node(0), o)
	})
}
