package yamlemit

import (
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The emitter is go-yaml's port of libyaml's emitter (emitterc.go) cut to
// what Halite writes: one implicit document, no anchors, aliases,
// comments, directives or folded scalars, tags only as "!" or "!!" and a
// suffix that needs no escapes, canonical mode off and lines never folded
// (go-yaml's encoder leaves the width at -1, unlimited). The
// functions keep libyaml's names and order so the two can be read side by
// side; the state stack is gone because a tree is walked recursively, and
// the one question libyaml asks of it ("is the parent a block sequence
// item?") is passed down as inBlockSeq.

type emitter struct {
	out        []byte
	bestIndent int
	compactSeq bool

	indent     int
	indents    []int
	flowLevel  int
	column     int
	whitespace bool // the last character written was white space
	indention  bool // only indentation is written on this line so far

	mappingContext   bool
	simpleKeyContext bool
}

// scalarAnalysis is libyaml's scalar_data: where a scalar may be written
// plain, quoted or as a block.
type scalarAnalysis struct {
	multiline           bool
	flowPlainAllowed    bool
	blockPlainAllowed   bool
	singleQuotedAllowed bool
	blockAllowed        bool
}

func newEmitter(indent int, compactSeq bool) *emitter {
	if indent < 2 || indent > 9 {
		indent = 2
	}
	return &emitter{
		bestIndent: indent,
		compactSeq: compactSeq,
		indent:     -1,
		whitespace: true,
		indention:  true,
	}
}

// document writes ev as the one document of the stream: no "---", and a
// line break at the end (yaml_emitter_emit_document_end).
func (e *emitter) document(ev *event) {
	e.node(ev, false, false, false)
	e.writeIndent()
}

// node is yaml_emitter_emit_node.
func (e *emitter) node(ev *event, mapping, simpleKey, inBlockSeq bool) {
	e.mappingContext = mapping
	e.simpleKeyContext = simpleKey
	switch ev.kind {
	case yaml.ScalarNode:
		e.scalar(ev, inBlockSeq)
	case yaml.SequenceNode:
		e.processTag(ev.tag)
		if e.flowLevel > 0 || ev.flow || len(ev.content) == 0 {
			ev.inFlow = true
			e.flowSequence(ev, inBlockSeq)
		} else {
			e.blockSequence(ev, inBlockSeq)
		}
	case yaml.MappingNode:
		e.processTag(ev.tag)
		if e.flowLevel > 0 || ev.flow || len(ev.content) == 0 {
			ev.inFlow = true
			e.flowMapping(ev, inBlockSeq)
		} else {
			e.blockMapping(ev, inBlockSeq)
		}
	}
}

// increaseIndent is yaml_emitter_increase_indent_compact (indentless is
// never asked for).
func (e *emitter) increaseIndent(flow, compactSeq, inBlockSeq bool) {
	e.indents = append(e.indents, e.indent)
	switch {
	case e.indent < 0:
		if flow {
			e.indent = e.bestIndent
		} else {
			e.indent = 0
		}
	case inBlockSeq:
		// The first indent inside a sequence just skips the "- ".
		e.indent += 2
	default:
		e.indent = e.bestIndent * ((e.indent + e.bestIndent) / e.bestIndent)
		if compactSeq {
			e.indent -= 2
		}
	}
}

func (e *emitter) popIndent() {
	e.indent = e.indents[len(e.indents)-1]
	e.indents = e.indents[:len(e.indents)-1]
}

// flowSequence is yaml_emitter_emit_flow_sequence_item.
func (e *emitter) flowSequence(ev *event, inBlockSeq bool) {
	e.writeIndicator("[", true, true, false)
	e.increaseIndent(true, false, inBlockSeq)
	e.flowLevel++
	for i, item := range ev.content {
		if i > 0 {
			e.writeIndicator(",", false, false, false)
		}
		if e.column == 0 {
			e.writeIndent()
		}
		e.node(item, false, false, false)
	}
	e.flowLevel--
	e.popIndent()
	if e.column == 0 {
		e.writeIndent()
	}
	e.writeIndicator("]", false, false, false)
}

// flowMapping is yaml_emitter_emit_flow_mapping_key and _value.
func (e *emitter) flowMapping(ev *event, inBlockSeq bool) {
	e.writeIndicator("{", true, true, false)
	e.increaseIndent(true, false, inBlockSeq)
	e.flowLevel++
	for i := 0; i+1 < len(ev.content); i += 2 {
		if i > 0 {
			e.writeIndicator(",", false, false, false)
		}
		if e.column == 0 {
			e.writeIndent()
		}
		k, v := ev.content[i], ev.content[i+1]
		if simpleKey(k) {
			e.node(k, true, true, false)
			e.writeIndicator(":", false, false, false)
		} else {
			e.writeIndicator("?", true, false, false)
			e.node(k, true, false, false)
			e.writeIndicator(":", true, false, false)
		}
		e.node(v, true, false, false)
	}
	e.flowLevel--
	e.popIndent()
	e.writeIndicator("}", false, false, false)
}

// blockSequence is yaml_emitter_emit_block_sequence_item.
func (e *emitter) blockSequence(ev *event, inBlockSeq bool) {
	compact := e.mappingContext && (e.column == 0 || !e.indention) && e.compactSeq
	e.increaseIndent(false, compact, inBlockSeq)
	for _, item := range ev.content {
		e.writeIndent()
		e.writeIndicator("-", true, false, true)
		e.node(item, false, false, true)
	}
	e.popIndent()
}

// blockMapping is yaml_emitter_emit_block_mapping_key and _value.
func (e *emitter) blockMapping(ev *event, inBlockSeq bool) {
	e.increaseIndent(false, false, inBlockSeq)
	for i := 0; i+1 < len(ev.content); i += 2 {
		e.writeIndent()
		k, v := ev.content[i], ev.content[i+1]
		if simpleKey(k) {
			e.node(k, true, true, false)
			e.writeIndicator(":", false, false, false)
		} else {
			e.writeIndicator("?", true, false, true)
			e.node(k, true, false, false)
			e.writeIndent()
			e.writeIndicator(":", true, false, true)
		}
		e.node(v, true, false, false)
	}
	e.popIndent()
}

// simpleKey is yaml_emitter_check_simple_key: a key on one line, 128
// bytes at most with its tag, or an empty collection.
func simpleKey(ev *event) bool {
	n := len(ev.tag) // its handle and suffix
	switch ev.kind {
	case yaml.ScalarNode:
		if analyzeScalar(ev.value).multiline {
			return false
		}
		n += len(ev.value)
	case yaml.SequenceNode, yaml.MappingNode:
		if len(ev.content) != 0 {
			return false
		}
	default:
		return false
	}
	return n <= 128
}

// scalar is yaml_emitter_emit_scalar.
func (e *emitter) scalar(ev *event, inBlockSeq bool) {
	a := analyzeScalar(ev.value)
	style := e.selectScalarStyle(ev, a)
	ev.chosen = style
	e.processTag(ev.tag)
	e.increaseIndent(true, false, inBlockSeq)
	switch style {
	case plainStyle:
		e.writePlain(ev.value)
	case singleStyle:
		e.writeSingleQuoted(ev.value)
	case doubleStyle:
		e.writeDoubleQuoted(ev.value)
	case literalStyle:
		e.writeLiteral(ev.value)
	}
	e.popIndent()
}

// selectScalarStyle is yaml_emitter_select_scalar_style.
func (e *emitter) selectScalarStyle(ev *event, a scalarAnalysis) scalarStyle {
	style := ev.style
	if e.simpleKeyContext && a.multiline {
		style = doubleStyle
	}
	if style == plainStyle {
		if e.flowLevel > 0 && !a.flowPlainAllowed || e.flowLevel == 0 && !a.blockPlainAllowed {
			style = singleStyle
		}
		if ev.value == "" && (e.flowLevel > 0 || e.simpleKeyContext) {
			style = singleStyle
		}
	}
	if style == singleStyle && !a.singleQuotedAllowed {
		style = doubleStyle
	}
	if style == literalStyle && (!a.blockAllowed || e.flowLevel > 0 || e.simpleKeyContext) {
		style = doubleStyle
	}
	return style
}

// processTag is yaml_emitter_process_tag for a tag checkTag let through:
// a handle ("!" or "!!") and a suffix that needs no escapes, which is how
// the short form is spelled.
func (e *emitter) processTag(tag string) {
	if tag == "" {
		return
	}
	if !e.whitespace {
		e.put(' ')
	}
	e.writeAll(tag)
	e.whitespace = false
	e.indention = false
}

// analyzeScalar is yaml_emitter_analyze_scalar.
func analyzeScalar(value string) scalarAnalysis {
	if value == "" {
		return scalarAnalysis{blockPlainAllowed: true, singleQuotedAllowed: true}
	}
	var (
		blockIndicators, flowIndicators, lineBreaks, specialCharacters, tabCharacters    bool
		leadingSpace, leadingBreak, trailingSpace, trailingBreak, breakSpace, spaceBreak bool
		previousSpace, previousBreak                                                     bool
	)
	if len(value) >= 3 && (value[:3] == "---" || value[:3] == "...") {
		blockIndicators = true
		flowIndicators = true
	}
	precededByWhitespace := true
	for i, w := 0, 0; i < len(value); i += w {
		w = width(value[i])
		followedByWhitespace := i+w >= len(value) || isBlank(value, i+w)
		if i == 0 {
			switch value[i] {
			case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
				flowIndicators = true
				blockIndicators = true
			case '?', ':':
				flowIndicators = true
				if followedByWhitespace {
					blockIndicators = true
				}
			case '-':
				if followedByWhitespace {
					flowIndicators = true
					blockIndicators = true
				}
			}
		} else {
			switch value[i] {
			case ',', '?', '[', ']', '{', '}':
				flowIndicators = true
			case ':':
				flowIndicators = true
				if followedByWhitespace {
					blockIndicators = true
				}
			case '#':
				if precededByWhitespace {
					flowIndicators = true
					blockIndicators = true
				}
			}
		}
		if value[i] == '\t' {
			tabCharacters = true
		} else if !isPrintable(value, i) {
			specialCharacters = true
		}
		switch {
		case value[i] == ' ':
			if i == 0 {
				leadingSpace = true
			}
			if i+w == len(value) {
				trailingSpace = true
			}
			if previousBreak {
				breakSpace = true
			}
			previousSpace = true
			previousBreak = false
		case isBreak(value, i):
			lineBreaks = true
			if i == 0 {
				leadingBreak = true
			}
			if i+w == len(value) {
				trailingBreak = true
			}
			if previousSpace {
				spaceBreak = true
			}
			previousSpace = false
			previousBreak = true
		default:
			previousSpace = false
			previousBreak = false
		}
		precededByWhitespace = isBlankz(value, i)
	}
	a := scalarAnalysis{
		multiline:           lineBreaks,
		flowPlainAllowed:    true,
		blockPlainAllowed:   true,
		singleQuotedAllowed: true,
		blockAllowed:        true,
	}
	if leadingSpace || leadingBreak || trailingSpace || trailingBreak {
		a.flowPlainAllowed = false
		a.blockPlainAllowed = false
	}
	if trailingSpace {
		a.blockAllowed = false
	}
	if breakSpace || spaceBreak || tabCharacters || specialCharacters {
		a.flowPlainAllowed = false
		a.blockPlainAllowed = false
		a.singleQuotedAllowed = false
	}
	if spaceBreak || specialCharacters {
		a.blockAllowed = false
	}
	if lineBreaks {
		a.flowPlainAllowed = false
		a.blockPlainAllowed = false
	}
	if flowIndicators {
		a.flowPlainAllowed = false
	}
	if blockIndicators {
		a.blockPlainAllowed = false
	}
	return a
}

// writeIndent is yaml_emitter_write_indent.
func (e *emitter) writeIndent() {
	indent := max(e.indent, 0)
	if !e.indention || e.column > indent || (e.column == indent && !e.whitespace) {
		e.putBreak()
	}
	for e.column < indent {
		e.put(' ')
	}
	e.whitespace = true
}

// writeIndicator is yaml_emitter_write_indicator.
func (e *emitter) writeIndicator(indicator string, needWhitespace, isWhitespace, isIndention bool) {
	if needWhitespace && !e.whitespace {
		e.put(' ')
	}
	e.writeAll(indicator)
	e.whitespace = isWhitespace
	e.indention = e.indention && isIndention
}

// writePlain is yaml_emitter_write_plain_scalar for a scalar the
// analysis let through plain, which has no line break.
func (e *emitter) writePlain(value string) {
	if value != "" && !e.whitespace {
		e.put(' ')
	}
	e.writeAll(value)
	if value != "" {
		e.whitespace = false
	}
	e.indention = false
}

// writeSingleQuoted is yaml_emitter_write_single_quoted_scalar.
func (e *emitter) writeSingleQuoted(value string) {
	e.writeIndicator("'", true, false, false)
	breaks := false
	for i := 0; i < len(value); {
		switch {
		case value[i] == ' ':
			e.write(value, &i)
		case isBreak(value, i):
			if !breaks && value[i] == '\n' {
				e.putBreak()
			}
			e.writeBreak(value, &i)
			breaks = true
		default:
			if breaks {
				e.writeIndent()
			}
			if value[i] == '\'' {
				e.put('\'')
			}
			e.write(value, &i)
			e.indention = false
			breaks = false
		}
	}
	e.writeIndicator("'", false, false, false)
	e.whitespace = false
	e.indention = false
}

// writeDoubleQuoted is yaml_emitter_write_double_quoted_scalar. Like
// go-yaml it escapes every character of a value that starts with a byte
// order mark (its is_bom looks at the value's first bytes, not the
// character's).
func (e *emitter) writeDoubleQuoted(value string) {
	const hex = "0123456789ABCDEF"
	e.writeIndicator("\"", true, false, false)
	bom := len(value) >= 3 && value[:3] == "\xEF\xBB\xBF"
	for i := 0; i < len(value); {
		if !(bom || !isPrintable(value, i) || isBreak(value, i) || value[i] == '"' || value[i] == '\\') {
			e.write(value, &i)
			continue
		}
		r, w := decodeRune(value, i)
		i += w
		e.put('\\')
		const from, to = "\x00\a\b\t\n\v\f\r\x1b\"\\\u0085\u00a0\u2028\u2029", "0abtnvfre\"\\N_LP"
		if k := strings.IndexRune(from, r); k >= 0 {
			e.put(to[utf8.RuneCountInString(from[:k])])
			continue
		}
		n := 8
		switch {
		case r <= 0xFF:
			e.put('x')
			n = 2
		case r <= 0xFFFF:
			e.put('u')
			n = 4
		default:
			e.put('U')
		}
		for k := (n - 1) * 4; k >= 0; k -= 4 {
			e.put(hex[(r>>uint(k))&0x0F])
		}
	}
	e.writeIndicator("\"", false, false, false)
	e.whitespace = false
	e.indention = false
}

// decodeRune is libyaml's: the rune from the lead byte's width, whatever
// the continuation bytes hold.
func decodeRune(s string, i int) (rune, int) {
	o := s[i]
	var w int
	var r rune
	switch {
	case o&0x80 == 0x00:
		w, r = 1, rune(o&0x7F)
	case o&0xE0 == 0xC0:
		w, r = 2, rune(o&0x1F)
	case o&0xF0 == 0xE0:
		w, r = 3, rune(o&0x0F)
	case o&0xF8 == 0xF0:
		w, r = 4, rune(o&0x07)
	}
	for k := 1; k < w; k++ {
		r = r<<6 + rune(s[i+k])&0x3F
	}
	return r, w
}

// literalHint is a literal block's indentation indicator: how far its
// lines are indented past the node that holds it. go-yaml writes the
// encoder's indent there, which is that distance for a mapping's value at
// the top but not inside a sequence ("- " indents by 2) or in a mapping
// inside one, so at indent 4 it wrote "- |4-" over lines indented by 2:
// its own parser then failed ("did not find expected '-' indicator") or,
// for "\n#", read "" — a grains or beacons file Halite wrote would not load
// again. Here the indicator is the real distance; where the two agree (every
// indent of 2, and the top of the document) the bytes are go-yaml's.
func (e *emitter) literalHint() int {
	if len(e.indents) == 0 || e.indents[len(e.indents)-1] < 0 {
		return e.bestIndent
	}
	return e.indent - e.indents[len(e.indents)-1]
}

// writeLiteral is yaml_emitter_write_literal_scalar with
// yaml_emitter_write_block_scalar_hints, less go-yaml's wrong indentation
// indicator inside sequences (literalHint).
func (e *emitter) writeLiteral(value string) {
	e.writeIndicator("|", true, false, false)
	if value != "" && (value[0] == ' ' || isBreak(value, 0)) {
		e.writeIndicator(string(rune('0'+e.literalHint())), false, false, false)
	}
	chomp := byte(0)
	if value == "" {
		chomp = '-'
	} else {
		i := len(value) - 1
		for value[i]&0xC0 == 0x80 {
			i--
		}
		switch {
		case !isBreak(value, i):
			chomp = '-'
		case i == 0:
			chomp = '+'
		default:
			i--
			for value[i]&0xC0 == 0x80 {
				i--
			}
			if isBreak(value, i) {
				chomp = '+'
			}
		}
	}
	if chomp != 0 {
		e.writeIndicator(string(chomp), false, false, false)
	}
	e.putBreak()
	e.whitespace = true
	breaks := true
	for i := 0; i < len(value); {
		if isBreak(value, i) {
			e.writeBreak(value, &i)
			breaks = true
			continue
		}
		if breaks {
			e.writeIndent()
		}
		e.write(value, &i)
		e.indention = false
		breaks = false
	}
}

// put writes one ASCII character.
func (e *emitter) put(c byte) {
	e.out = append(e.out, c)
	e.column++
}

func (e *emitter) putBreak() {
	e.out = append(e.out, '\n')
	e.column = 0
	e.indention = true
}

// write copies the character at s[*i], one column wide.
func (e *emitter) write(s string, i *int) {
	w := width(s[*i])
	e.out = append(e.out, s[*i:*i+w]...)
	e.column++
	*i += w
}

func (e *emitter) writeAll(s string) {
	for i := 0; i < len(s); {
		e.write(s, &i)
	}
}

// writeBreak copies the line break at s[*i]: LF as a line break, CR, NEL,
// LS and PS as they are.
func (e *emitter) writeBreak(s string, i *int) {
	if s[*i] == '\n' {
		e.putBreak()
		*i++
		return
	}
	e.write(s, i)
	e.column = 0
	e.indention = true
}

func width(b byte) int {
	switch {
	case b&0x80 == 0x00:
		return 1
	case b&0xE0 == 0xC0:
		return 2
	case b&0xF0 == 0xE0:
		return 3
	case b&0xF8 == 0xF0:
		return 4
	}
	return 0
}

// isPrintable is libyaml's is_printable: LF, printable ASCII and the
// two- and three-byte characters YAML allows unescaped; never a
// four-byte character.
func isPrintable(b string, i int) bool {
	c := b[i]
	return c == 0x0A ||
		c >= 0x20 && c <= 0x7E ||
		c == 0xC2 && b[i+1] >= 0xA0 ||
		c > 0xC2 && c < 0xED ||
		c == 0xED && b[i+1] < 0xA0 ||
		c == 0xEE ||
		c == 0xEF && !(b[i+1] == 0xBB && b[i+2] == 0xBF) && !(b[i+1] == 0xBF && (b[i+2] == 0xBE || b[i+2] == 0xBF))
}

func isBlank(b string, i int) bool {
	return b[i] == ' ' || b[i] == '\t'
}

// isBreak: LF, CR, NEL, LS, PS.
func isBreak(b string, i int) bool {
	return b[i] == '\r' || b[i] == '\n' ||
		b[i] == 0xC2 && b[i+1] == 0x85 ||
		b[i] == 0xE2 && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9)
}

func isBlankz(b string, i int) bool {
	return isBlank(b, i) || isBreak(b, i) || b[i] == 0
}
