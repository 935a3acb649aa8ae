package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Interpolations are data. Every {{ expr }} of a template (the file, and
// what it includes, imports or extends) is read as {% _halite_out expr %}:
// the control structure outputTag, which writes a value that is not
// marked safe as a token of the rendering's slots instead of its text.
// The YAML stage then gives the values back, each inside the one scalar
// that holds its token, so a value cannot add keys, items, anchors or
// documents, whatever newlines, colons, braces or dashes it holds.
//
// A value marked safe is written as text: it is structure the template
// asks for. Safe values come from Salt's structural filters (json, tojson,
// json_encode, yaml, yaml_encode, yaml_dquote), whose output quotes every
// string, and from the template's own renderings (a macro's output,
// caller(), a {% set %} block), whose interpolations are tokens already.
// gonja filters that would mark data safe (escape, join, indent, safe, ...)
// keep it data (dataStaysData).

// outputTag is the control structure every {{ }} becomes.
const outputTag = "_halite_out"

// slotsKey holds the rendering's *slots in the template context; no
// template identifier can spell it.
const slotsKey = "\x00slots"

// rewriteOutputs turns each {{ expr }} of src into {% _halite_out expr %},
// keeping whitespace control ({{- -}}) and every line where it is, so
// errors keep their line numbers. Text in {% raw %} is left alone; a
// source the lexer refuses is returned as it is, for the parser to report.
func rewriteOutputs(src string, cfg *config.Config) string {
	src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n")
	if !strings.Contains(src, cfg.VariableStartString) {
		return src
	}
	s := tokens.LexAll(src, cfg)
	var b strings.Builder
	b.Grow(len(src) + 64)
	last := 0
	for ; !s.End(); s.Next() {
		t := s.Current()
		switch t.Type {
		case tokens.Error:
			return src
		case tokens.VariableBegin:
			if t.Pos < last || t.Pos+len(t.Val) > len(src) {
				return src
			}
			b.WriteString(src[last:t.Pos])
			b.WriteString(cfg.BlockStartString)
			b.WriteString(t.Val[len(cfg.VariableStartString):]) // "-" or "+"
			b.WriteString(" " + outputTag + " ")
			last = t.Pos + len(t.Val)
		case tokens.VariableEnd:
			if t.Pos < last || t.Pos+len(t.Val) > len(src) {
				return src
			}
			b.WriteString(src[last:t.Pos])
			b.WriteString(" ")
			b.WriteString(t.Val[:len(t.Val)-len(cfg.VariableEndString)])
			b.WriteString(cfg.BlockEndString)
			last = t.Pos + len(t.Val)
		}
	}
	b.WriteString(src[last:])
	return b.String()
}

// slotLoader rewrites every template it reads with rewriteOutputs, so
// included, imported and extended files get the same treatment.
type slotLoader struct {
	inner loaders.Loader
	cfg   *config.Config
}

func (l slotLoader) Read(path string) (io.Reader, error) {
	r, err := l.inner.Read(path)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return strings.NewReader(rewriteOutputs(string(b), l.cfg)), nil
}

func (l slotLoader) Resolve(path string) (string, error) { return l.inner.Resolve(path) }

func (l slotLoader) Inherit(from string) (loaders.Loader, error) {
	in, err := l.inner.Inherit(from)
	if err != nil {
		return nil, err
	}
	return slotLoader{inner: in, cfg: l.cfg}, nil
}

// outputString names an outputStructure in gonja's errors; cleanErr
// drops the wrapping that names it.
const outputString = "{{ }}"

// outputStructure is one {{ expr [if cond [else alt]] }}.
type outputStructure struct {
	location          *tokens.Token
	expr, cond, other nodes.Expression
}

func (o *outputStructure) Position() *tokens.Token { return o.location }

func (o *outputStructure) String() string {
	return outputString
}

func outputParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	o := &outputStructure{location: args.Current()}
	if o.location == nil || o.location.Line == 0 {
		o.location = p.Current()
	}
	// Errors name the place as gonja's own {{ }} parser does.
	fail := func(err error) (nodes.ControlStructure, error) {
		if strings.Contains(err.Error(), "(Line: ") {
			return nil, err
		}
		at := args.Current()
		if at == nil || at.Line == 0 {
			at = o.location
		}
		return nil, p.Error(err.Error(), at)
	}
	expr, err := args.ParseExpression()
	if err != nil {
		return fail(err)
	}
	if expr == nil {
		return fail(fmt.Errorf("Expected an expression."))
	}
	o.expr = expr
	if o.cond, o.other, err = args.ParseCondition(); err != nil {
		return fail(err)
	}
	if !args.End() {
		return fail(fmt.Errorf("Unexpected token %q.", args.Current().Val))
	}
	return o, nil
}

// Execute evaluates the expression as gonja's {{ }} does, then writes a
// safe value's text, or else a token for the value.
func (o *outputStructure) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	var value *exec.Value
	if o.cond != nil {
		c := r.Eval(o.cond)
		if c.IsError() {
			return fmt.Errorf("unable to render condition at line %d: %s: %w", o.cond.Position().Line, o.cond, c)
		}
		switch {
		case !c.IsNil() && c.IsTrue():
			value = r.Eval(o.expr)
		case o.other != nil:
			value = r.Eval(o.other)
		default:
			return nil
		}
	} else {
		value = r.Eval(o.expr)
	}
	if value.IsError() {
		return fmt.Errorf("unable to render expression at line %d: %s: %w", o.expr.Position().Line, o.expr, value)
	}
	if value.Safe {
		_, err := io.WriteString(r.Output, value.String())
		return err
	}
	s, _ := r.Environment.Context.Get(slotsKey)
	slots, ok := s.(*slots)
	if !ok {
		return fmt.Errorf("line %d: interpolation outside a rendering", o.location.Line)
	}
	v := plain(value.Interface(), 0)
	if _, isStr := v.(string); !isStr {
		p, ok := plainData(v, 0)
		if !ok {
			return fmt.Errorf("line %d: value nested deeper than %d", o.location.Line, maxDepth)
		}
		v = p
	}
	_, err := io.WriteString(r.Output, slots.Add(v, value.String()))
	return err
}

// dataStaysData wraps a gonja filter so that it cannot mark data safe:
// its result is safe only if its input was (a macro's output stays
// structure through |indent, an event's value stays data through |join).
func dataStaysData(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		was := in.Safe
		out := f(e, in, params)
		in.Safe = was // gonja's safe filter marks its input itself
		if out.Safe && !was {
			return &exec.Value{Val: out.Val}
		}
		return out
	}
}

// safeMakers are gonja's filters that return a safe value; structural
// filters of Salt's are registered by New in their place or beside them.
var safeMakers = []string{"escape", "e", "forceescape", "indent", "join", "pprint", "urlize", "safe", "xmlattr", "wordwrap", "truncate", "center", "format", "replace", "trim", "striptags", "string", "default", "d", "first", "last", "urlencode"}
