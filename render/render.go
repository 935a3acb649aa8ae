package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"

	"github.com/halite-fleet/halite/render/sls"
)

// Error is a failed rendering, with file and line.
type Error = sls.Error

// Entry is one top-level ID of a rendered file.
type Entry = sls.Entry

const maxDepth = sls.MaxDepth

// Options configure a Renderer.
type Options struct {
	// Funcs are the functions the "salt" object offers to templates, by
	// Salt name ("pillar.get"); each is a Go func. Templates call them as
	// salt['pillar.get']('k') or salt.pillar.get('k').
	Funcs map[string]any
}

// Renderer renders SLS files. It is safe for concurrent use; parsed
// templates are cached by file name and reparsed when the source changes.
type Renderer struct {
	env  *exec.Environment
	cfg  *config.Config
	salt map[string]any

	mu    sync.RWMutex
	cache map[string]*cached
}

type cached struct {
	src string
	tpl *exec.Template
}

// New returns a Renderer with its own Jinja environment: gonja's builtins
// plus Salt's json, tojson, yaml, yaml_encode and yaml_dquote filters.
func New(opts Options) *Renderer {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	for _, name := range safeMakers {
		if f, ok := filters.Get(name); ok {
			filters.Replace(name, dataStaysData(f))
		}
	}
	for name, f := range map[string]exec.FilterFunction{
		"json":        filterJSON,
		"tojson":      filterJSON,
		"json_encode": filterJSON,
		"yaml":        filterYAML,
		"yaml_encode": filterYAML,
		"yaml_dquote": filterYAMLDquote,
	} {
		filters.Replace(name, f)
		if !filters.Exists(name) {
			filters.Register(name, f)
		}
	}
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	r := &Renderer{
		env: &exec.Environment{
			Context:           ctx,
			Filters:           filters,
			Tests:             builtins.Tests,
			ControlStructures: controlStructures(),
			Methods:           builtins.Methods,
		},
		cfg:   config.New(),
		salt:  saltObject(opts.Funcs),
		cache: map[string]*cached{},
	}
	return r
}

// controlStructures are gonja's, plus outputTag.
func controlStructures() *exec.ControlStructureSet {
	m := map[string]parser.ControlStructureParser{outputTag: outputParser}
	for _, name := range []string{"autoescape", "block", "extends", "filter", "for", "from", "if", "import",
		"include", "macro", "raw", "set", "with", "do", "break", "continue", "trans", "call"} {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			m[name] = p
		}
		if p, ok := m["from"]; ok && name == "from" {
			m[name] = fromParser(p)
		}
	}
	return exec.NewControlStructureSet(m)
}

// saltObject offers each function under its dotted name and under its
// module, so both salt['mod.fun'] and salt.mod.fun work.
func saltObject(funcs map[string]any) map[string]any {
	out := make(map[string]any, 2*len(funcs))
	for name, f := range funcs {
		out[name] = f
		mod, fun, ok := strings.Cut(name, ".")
		if !ok {
			continue
		}
		m, _ := out[mod].(map[string]any)
		if m == nil {
			m = map[string]any{}
			out[mod] = m
		}
		m[fun] = f
	}
	return out
}

// Jinja renders src, the contents of the file called name, with vars (plus
// "salt"). Includes and imports are read relative to the file's directory.
// Interpolated values are put in as their text.
func (r *Renderer) Jinja(name string, src []byte, vars map[string]any) (string, error) {
	text, slots, err := r.jinja(name, src, vars)
	if err != nil {
		return "", err
	}
	if text, err = slots.Text(text); err != nil {
		return "", &Error{File: name, Stage: "jinja", Err: err}
	}
	return text, nil
}

// jinja renders src with each interpolated value as a token of slots.
func (r *Renderer) jinja(name string, src []byte, vars map[string]any) (string, *slots, error) {
	tpl, err := r.template(name, src)
	if err != nil {
		return "", nil, err
	}
	slots := newSlots()
	data := make(map[string]any, len(vars)+2)
	for k, v := range vars {
		data[k] = v
	}
	data["salt"] = r.salt
	data[slotsKey] = slots
	out, err := tpl.ExecuteToString(exec.NewContext(data))
	if err != nil {
		return "", nil, &Error{File: name, Line: jinjaErrLine(err), Stage: "jinja", Err: cleanErr(err)}
	}
	return out, slots, nil
}

// SLS renders a reactor (or other) SLS file with Salt's reactor context,
// tag and data, and reads the result into its top-level entries. It also
// returns the rendered text with the values put in, for debug logs.
//
// Only the template's text gives the YAML its structure: each value
// interpolated with {{ }} lands inside one scalar (see slots), unless
// the template asks for structure with |yaml, |json (and their aliases).
func (r *Renderer) SLS(name string, src []byte, tag string, data map[string]any) (string, []sls.Entry, error) {
	raw, slots, err := r.jinja(name, src, map[string]any{"tag": tag, "data": data})
	if err != nil {
		return "", nil, err
	}
	entries, err := sls.ParseYAMLValues(name, raw, slots)
	if err != nil {
		return raw, nil, err
	}
	text, err := slots.Text(raw)
	if err != nil {
		return raw, nil, &Error{File: name, Stage: "yaml", Err: err}
	}
	return text, entries, nil
}

// Forget drops name's cached template.
func (r *Renderer) Forget(name string) {
	r.mu.Lock()
	delete(r.cache, name)
	r.mu.Unlock()
}

func (r *Renderer) template(name string, src []byte) (*exec.Template, error) {
	r.mu.RLock()
	c := r.cache[name]
	r.mu.RUnlock()
	if c != nil && c.src == string(src) {
		return c.tpl, nil
	}
	dir := ""
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		if fi, err := os.Stat(name[:i]); err == nil && fi.IsDir() {
			dir = name[:i]
		}
	}
	fsl, err := loaders.NewFileSystemLoader(dir)
	if err != nil {
		return nil, &Error{File: name, Stage: "jinja", Err: err}
	}
	id := "\x00" + name
	l, err := loaders.NewShiftedLoader(id, bytes.NewReader(src), fsl)
	if err != nil {
		return nil, &Error{File: name, Stage: "jinja", Err: err}
	}
	tpl, err := parseTemplate(id, r.cfg, slotLoader{inner: l, cfg: r.cfg}, r.env)
	if err != nil {
		line := jinjaErrLine(err)
		if line == 0 {
			line = lastTokenLine(string(src), r.cfg)
		}
		return nil, &Error{File: name, Line: line, Stage: "jinja", Err: cleanErr(err)}
	}
	r.mu.Lock()
	r.cache[name] = &cached{src: string(src), tpl: tpl}
	r.mu.Unlock()
	return tpl, nil
}

// parseTemplate turns a gonja panic on hostile input into an error.
func parseTemplate(id string, cfg *config.Config, l loaders.Loader, env *exec.Environment) (tpl *exec.Template, err error) {
	defer func() {
		if p := recover(); p != nil {
			tpl, err = nil, fmt.Errorf("template parser crashed: %v", p)
		}
	}()
	return exec.NewTemplate(id, cfg, l, env)
}

var (
	lineRe      = regexp.MustCompile(`(?i)\bline:? (\d+)`)
	parseSrcRe  = regexp.MustCompile(`(?s)failed to parse template '.*': `)
	shiftedIDRe = regexp.MustCompile("\x00[^ ']*")
	// gonja's wrapping of an error of outputStructure.Execute.
	// gonja's wrapping of a function's error, and of a control
	// structure's.
	callRe       = regexp.MustCompile(`(call\(.*?\): )?invalid call to function '[^']*': `)
	structRe     = regexp.MustCompile(`[A-Za-z]+ControlStructure\(Line=\d+ Col=\d+\): `)
	execOutputRe = regexp.MustCompile(`Unable to execute controlStructure at line \d+: ` + regexp.QuoteMeta(outputString) + `: `)
)

// lastTokenLine is the line of the last token gonja's lexer reads in src:
// where a parse error gonja gives no line for (an unclosed {{) is.
func lastTokenLine(src string, cfg *config.Config) (line int) {
	defer func() { recover() }()
	s := tokens.LexAll(src, cfg)
	for ; !s.End(); s.Next() {
		if t := s.Current(); t.Line > 0 {
			line = t.Line
		}
	}
	return line
}

func jinjaErrLine(err error) int {
	best := 0
	for _, m := range lineRe.FindAllStringSubmatch(err.Error(), -1) {
		if n, _ := strconv.Atoi(m[1]); n > best {
			best = n
		}
	}
	return best
}

// cleanErr drops the template source gonja puts in its parse errors.
func cleanErr(err error) error {
	s := parseSrcRe.ReplaceAllString(err.Error(), "")
	s = strings.ReplaceAll(s, `Unable to parse controlStructure "`+outputTag+`": `, "")
	s = execOutputRe.ReplaceAllString(s, "")
	s = callRe.ReplaceAllString(s, "")
	s = structRe.ReplaceAllString(s, "")
	s = shiftedIDRe.ReplaceAllString(s, "template")
	return fmt.Errorf("%s", s)
}

func filterJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var b strings.Builder
	if err := pyJSON(&b, in.Interface(), 0); err != nil {
		return exec.AsValue(fmt.Errorf("json filter: %w", err))
	}
	return exec.AsSafeValue(b.String())
}

func filterYAML(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	s, err := sls.MarshalFlowYAML(plain(in.Interface(), 0))
	if err != nil {
		return exec.AsValue(fmt.Errorf("yaml filter: %w", err))
	}
	return exec.AsSafeValue(s)
}

func filterYAMLDquote(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	return exec.AsSafeValue(quoteJSON(in.String()))
}

// plain turns gonja's values into plain Go maps, lists and scalars.
func plain(v any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	switch v := v.(type) {
	case *exec.Value:
		return plain(v.Interface(), depth+1)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = plain(x, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = plain(x, depth+1)
		}
		return out
	}
	return v
}

// quoteJSON quotes s as JSON does, and also escapes what a YAML reader
// would not keep as it is inside double quotes: C1 controls and DEL
// (refused by YAML), NEL (a line break to YAML, folded into a space) and
// byte order marks. The result is one line that YAML and JSON read as s.
func quoteJSON(s string) string {
	q, _ := json.Marshal(s)
	if !strings.ContainsFunc(string(q), yamlEscaped) {
		return string(q)
	}
	var b strings.Builder
	for _, r := range string(q) {
		if yamlEscaped(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func yamlEscaped(r rune) bool {
	return r >= 0x7f && r <= 0x9f || r == 0xfeff || r == 0xfffe || r == 0xffff
}

// pyJSON writes v as Python's json.dumps(v, sort_keys=True) does, which is
// what Salt's json filter gives: ", " and ": " separators, sorted keys.
func pyJSON(b *strings.Builder, v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case *exec.Value:
		return pyJSON(b, v.Interface(), depth+1)
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		b.WriteString(quoteJSON(v))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		fmt.Fprint(b, v)
	case float32:
		return pyJSON(b, float64(v), depth)
	case float64:
		switch {
		case math.IsNaN(v):
			b.WriteString("NaN")
		case math.IsInf(v, 0):
			if v > 0 {
				b.WriteString("Infinity")
			} else {
				b.WriteString("-Infinity")
			}
		case v == math.Trunc(v) && math.Abs(v) < 1e16:
			b.WriteString(strconv.FormatFloat(v, 'f', 1, 64))
		default:
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteJSON(k))
			b.WriteString(": ")
			if err := pyJSON(b, v[k], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := pyJSON(b, x, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []string:
		l := make([]any, len(v))
		for i, s := range v {
			l[i] = s
		}
		return pyJSON(b, l, depth)
	default:
		q, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(q)
	}
	return nil
}
