package yamlbound

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Limits on what aliases may add, beyond a document's own nodes and text.
// Anchors that reuse a block of defaults a few dozen times stay far below
// them; a nested alias bomb of 270 bytes reaches them at its third level.
const (
	MaxAliasNodes = 100_000
	MaxAliasBytes = 4 << 20
)

// Error is a document whose aliases expand past the limits (or refer to
// themselves). Line is the 1-based line of the alias that crossed them.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// size is an expanded subtree: its nodes and the bytes of its scalars.
type size struct{ nodes, bytes int64 }

// saturate keeps sizes of nested bombs from overflowing.
const saturate = 1 << 50

func (s size) add(o size) size {
	return size{min(s.nodes+o.nodes, saturate), min(s.bytes+o.bytes, saturate)}
}

type checker struct {
	// expanded sizes of anchored nodes; busy marks one being measured, so
	// an alias inside its own anchor is refused rather than followed.
	memo  map[*yaml.Node]size
	busy  map[*yaml.Node]bool
	added size
	err   *Error
}

// Check returns an *Error if expanding n's aliases would add more than
// MaxAliasNodes nodes or MaxAliasBytes bytes of scalars to it, or if an
// alias refers to a node that contains it. It allocates only for
// documents that have aliases.
func Check(n *yaml.Node) error {
	if n == nil {
		return nil
	}
	var c checker
	c.walk(n)
	if c.err != nil {
		return c.err
	}
	return nil
}

// walk visits the document's own tree once; at each alias it adds what
// expanding it brings beyond the alias node itself.
func (c *checker) walk(n *yaml.Node) {
	if c.err != nil {
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return
		}
		s := c.expanded(n.Alias, n.Line)
		c.added = c.added.add(size{s.nodes - 1, s.bytes})
		if c.err == nil && (c.added.nodes > MaxAliasNodes || c.added.bytes > MaxAliasBytes) {
			c.err = &Error{Line: n.Line, Msg: fmt.Sprintf("aliases expand to more than %d nodes or %d bytes (alias *%s)", MaxAliasNodes, MaxAliasBytes, n.Value)}
		}
		return
	}
	for _, ch := range n.Content {
		c.walk(ch)
	}
}

// expanded is n's size with every alias inside it followed.
func (c *checker) expanded(n *yaml.Node, line int) size {
	if c.err != nil {
		return size{}
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return size{1, 0}
		}
		return c.expanded(n.Alias, n.Line)
	}
	if n.Anchor != "" {
		if s, ok := c.memo[n]; ok {
			return s
		}
		if c.busy[n] {
			c.err = &Error{Line: line, Msg: fmt.Sprintf("alias refers to anchor &%s that contains it", n.Anchor)}
			return size{}
		}
		if c.busy == nil {
			c.busy = make(map[*yaml.Node]bool)
			c.memo = make(map[*yaml.Node]size)
		}
		c.busy[n] = true
	}
	s := size{1, int64(len(n.Value))}
	for _, ch := range n.Content {
		s = s.add(c.expanded(ch, ch.Line))
	}
	if n.Anchor != "" {
		delete(c.busy, n)
		c.memo[n] = s
	}
	return s
}

// Unmarshal decodes data as yaml.Unmarshal does, after checking its
// aliases with Check. An empty document leaves v as it is.
func Unmarshal(data []byte, v any) error {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return err
	}
	if err := Check(&n); err != nil {
		return err
	}
	if n.Kind == 0 {
		return nil
	}
	return n.Decode(v)
}
