package state

import (
	"fmt"
	"strings"
)

// The unified diff file states put in changes.diff, in the format of
// Python's difflib.unified_diff as Salt calls it (salt/utils/stringutils.py
// get_diff: no file names, three lines of context, "-" lines of a change
// before its "+" lines). Lines are matched by Myers' O(ND) algorithm after
// the common head and tail are cut; past maxDiffEdits edits the rest is
// shown as one replaced block, so a huge rewrite costs bounded time and
// memory (difflib's SequenceMatcher may pair lines differently in rare
// cases; the hunks say the same change).

const maxDiffEdits = 1000

type opcode struct {
	tag            byte // 'e'qual, 'r'eplace, 'd'elete, 'i'nsert
	i1, i2, j1, j2 int
}

// splitLinesKeep splits after each "\n", keeping it (file.readlines()).
func splitLinesKeep(s string) []string {
	if s == "" {
		return nil
	}
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// matches returns the pairs of equal lines (a index, b index), in order.
func matches(a, b []string) [][2]int {
	var out [][2]int
	lo := 0
	for lo < len(a) && lo < len(b) && a[lo] == b[lo] {
		out = append(out, [2]int{lo, lo})
		lo++
	}
	ea, eb := len(a), len(b)
	var tail [][2]int
	for ea > lo && eb > lo && a[ea-1] == b[eb-1] {
		ea--
		eb--
		tail = append(tail, [2]int{ea, eb})
	}
	out = append(out, myers(a[lo:ea], b[lo:eb], lo, lo)...)
	for i := len(tail) - 1; i >= 0; i-- {
		out = append(out, tail[i])
	}
	return out
}

// myers is the forward greedy O(ND) search with the trace kept to walk
// back; offsets are added to the indexes it returns.
func myers(a, b []string, oa, ob int) [][2]int {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return nil
	}
	max := n + m
	if max > maxDiffEdits {
		max = maxDiffEdits
	}
	off := max + 1
	v := make([]int32, 2*max+3)
	var trace [][]int32
	found := -1
	for d := 0; d <= max; d++ {
		trace = append(trace, append([]int32(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				found = d
				break
			}
		}
		if found >= 0 {
			break
		}
	}
	if found < 0 {
		return nil // too different: one replaced block
	}
	var rev [][2]int
	x, y := n, m
	for d := found; d > 0; d-- {
		tv := trace[d] // v before step d, indexes k from -d-1
		get := func(k int) int { return int(tv[k+d+1]) }
		k := x - y
		var pk int
		if k == -d || (k != d && get(k-1) < get(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, [2]int{x + oa, y + ob})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, [2]int{x + oa, y + ob})
	}
	out := make([][2]int, len(rev))
	for i := range rev {
		out[i] = rev[len(rev)-1-i]
	}
	return out
}

// opcodes is SequenceMatcher.get_opcodes from the matched pairs.
func opcodes(a, b []string) []opcode {
	var ops []opcode
	i, j := 0, 0
	add := func(tag byte, i1, i2, j1, j2 int) {
		if n := len(ops); n > 0 && ops[n-1].tag == tag && tag == 'e' {
			ops[n-1].i2, ops[n-1].j2 = i2, j2
			return
		}
		ops = append(ops, opcode{tag, i1, i2, j1, j2})
	}
	flush := func(ai, bj int) {
		switch {
		case ai > i && bj > j:
			add('r', i, ai, j, bj)
		case ai > i:
			add('d', i, ai, j, j)
		case bj > j:
			add('i', i, i, j, bj)
		}
	}
	for _, p := range matches(a, b) {
		flush(p[0], p[1])
		add('e', p[0], p[0]+1, p[1], p[1]+1)
		i, j = p[0]+1, p[1]+1
	}
	flush(len(a), len(b))
	return ops
}

// groupedOpcodes is SequenceMatcher.get_grouped_opcodes(n).
func groupedOpcodes(ops []opcode, n int) [][]opcode {
	if len(ops) == 0 {
		ops = []opcode{{'e', 0, 1, 0, 1}}
	}
	ops = append([]opcode(nil), ops...)
	if c := &ops[0]; c.tag == 'e' {
		c.i1, c.j1 = maxInt(c.i1, c.i2-n), maxInt(c.j1, c.j2-n)
	}
	if c := &ops[len(ops)-1]; c.tag == 'e' {
		c.i2, c.j2 = minInt(c.i2, c.i1+n), minInt(c.j2, c.j1+n)
	}
	var groups [][]opcode
	var g []opcode
	for _, c := range ops {
		if c.tag == 'e' && c.i2-c.i1 > 2*n {
			g = append(g, opcode{'e', c.i1, minInt(c.i2, c.i1+n), c.j1, minInt(c.j2, c.j1+n)})
			groups = append(groups, g)
			g = nil
			c.i1, c.j1 = maxInt(c.i1, c.i2-n), maxInt(c.j1, c.j2-n)
		}
		g = append(g, c)
	}
	if len(g) > 0 && !(len(g) == 1 && g[0].tag == 'e') {
		groups = append(groups, g)
	}
	return groups
}

func formatRange(start, stop int) string {
	beginning, length := start+1, stop-start
	if length == 1 {
		return fmt.Sprint(beginning)
	}
	if length == 0 {
		beginning--
	}
	return fmt.Sprintf("%d,%d", beginning, length)
}

// unifiedDiff is difflib.unified_diff(a, b) with empty file names: the
// items it yields (headers and hunk lines end in "\n"; a line of a or b
// without one stays without).
func unifiedDiff(a, b []string) []string {
	var out []string
	for _, g := range groupedOpcodes(opcodes(a, b), 3) {
		if out == nil {
			out = append(out, "--- \n", "+++ \n")
		}
		first, last := g[0], g[len(g)-1]
		out = append(out, fmt.Sprintf("@@ -%s +%s @@\n", formatRange(first.i1, last.i2), formatRange(first.j1, last.j2)))
		for _, c := range g {
			if c.tag == 'e' {
				for _, l := range a[c.i1:c.i2] {
					out = append(out, " "+l)
				}
				continue
			}
			if c.tag == 'r' || c.tag == 'd' {
				for _, l := range a[c.i1:c.i2] {
					out = append(out, "-"+l)
				}
			}
			if c.tag == 'r' || c.tag == 'i' {
				for _, l := range b[c.j1:c.j2] {
					out = append(out, "+"+l)
				}
			}
		}
	}
	return out
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}
