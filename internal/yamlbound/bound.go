package yamlbound

import (
	"strconv"

	"go.yaml.in/yaml/v3"
)

// MaxAliasWeight bounds what aliases may add to a document beyond its
// own nodes: each node expanded weighs 1, plus 1 for every 32 bytes of
// its scalar text. Anchors that reuse a block of defaults a few dozen
// times stay far below it; a nested alias bomb of 270 bytes reaches it at
// its fifth level, a 100 KB scalar repeated past 30 times too.
const MaxAliasWeight = 100_000

// Error is a document whose aliases expand past MaxAliasWeight (or refer
// to a node that contains them). Line is the 1-based line of the alias.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// checker measures a document. memo holds the expanded weight of each
// anchored node measured, -1 while it is being measured.
type checker struct {
	memo  map[*yaml.Node]int64
	added int64
	err   *Error
}

// Check returns an *Error if expanding n's aliases would add more than
// MaxAliasWeight to it, or if an alias refers to a node that contains
// it. It is linear in the document's own size and allocates only for
// documents with aliases.
func Check(n *yaml.Node) error {
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
	if n == nil || c.err != nil {
		return
	}
	if n.Kind != yaml.AliasNode {
		for _, ch := range n.Content {
			c.walk(ch)
		}
		return
	}
	c.added += c.weight(n) - 1
	if c.err == nil && c.added > MaxAliasWeight {
		c.err = &Error{Line: n.Line, Msg: "aliases expand past " + strconv.Itoa(MaxAliasWeight) + " nodes (alias *" + n.Value + ")"}
	}
}

// weight is n's expanded weight, aliases followed; it saturates so that
// nested bombs do not overflow.
func (c *checker) weight(n *yaml.Node) int64 {
	line := n.Line
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if c.err != nil {
		return 0
	}
	if n.Anchor != "" {
		if c.memo == nil {
			c.memo = make(map[*yaml.Node]int64)
		}
		switch w, ok := c.memo[n]; {
		case ok && w < 0:
			c.err = &Error{Line: line, Msg: "alias refers to anchor &" + n.Anchor + " that contains it"}
			return 0
		case ok:
			return w
		}
		c.memo[n] = -1
	}
	w := 1 + int64(len(n.Value)/32)
	for _, ch := range n.Content {
		w = min(w+c.weight(ch), 1<<50)
	}
	if n.Anchor != "" {
		c.memo[n] = w
	}
	return w
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
