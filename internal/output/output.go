package output

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
)

// Options adjust an outputter, as Salt's --out-indent and --force-color /
// --no-color do.
type Options struct {
	// Color turns on ANSI colours in the nested outputter (Salt's default
	// theme: keys cyan, strings green, numbers, booleans and None yellow).
	// The CLI decides, usually from whether stdout is a terminal.
	Color bool
	// Indent is Salt's output_indent (--out-indent). For json: 0 means
	// Salt's default of 4, a positive number that many spaces, a negative
	// number one line per value. For yaml: 0 means PyYAML's block style,
	// a positive number that indent with sequences indented under their
	// key, a negative number flow style. For nested: the base indent
	// (Salt's nested_indent). Ignored by the others.
	Indent int
}

// renderer renders a normalised value to text; Format trims the text's
// trailing white space and ends it with one newline, as Salt's
// display_output does.
type renderer func(v any, opts Options) (string, error)

var outputters = map[string]renderer{
	"nested": renderNested,
	"json":   renderJSON,
	"yaml":   renderYAML,
	"txt":    renderTxt,
	"raw":    renderRaw,
	"quiet":  func(any, Options) (string, error) { return "", nil },
}

// aliases maps other names Salt accepts to an outputter.
var aliases = map[string]string{
	"text": "txt",
}

func lookup(name string) (renderer, bool) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	r, ok := outputters[name]
	return r, ok
}

// Valid reports whether name is an outputter Format knows, including Salt's
// alias "text" for "txt".
func Valid(name string) bool {
	_, ok := lookup(name)
	return ok
}

// Names returns the outputters' names, sorted.
func Names() []string {
	names := make([]string, 0, len(outputters))
	for n := range outputters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Format writes data with the named outputter:
//
//   - nested: Salt's default outputter, indented "key:" lines with values
//     below them, "----------" before nested dicts, "- item" for lists;
//   - json: like Salt's json_out, indented 4 and with keys sorted;
//   - yaml: block style, like Salt's yaml_out;
//   - txt: for a dict, "key: value" a line (each line of a multi-line
//     string on its own line), as salt-call --out=txt prints command output;
//   - raw: Python's str() of the data, as Salt's raw outputter;
//   - quiet: nothing.
//
// Output that is not empty ends with one newline. data is what CBOR
// decoding gives (nil, bool, integers, float64, string, []byte, []any,
// map[string]any); any other map, slice, array or pointer to them is
// rendered through reflection.
func Format(w io.Writer, name string, data any, opts Options) error {
	render, ok := lookup(name)
	if !ok {
		return fmt.Errorf("format %q: unknown outputter (want one of %s)", name, strings.Join(Names(), ", "))
	}
	v, err := normalize(data)
	if err != nil {
		return fmt.Errorf("format %s: %w", name, err)
	}
	text, err := render(v, opts)
	if err != nil {
		return fmt.Errorf("format %s: %w", name, err)
	}
	text = strings.TrimRightFunc(text, unicode.IsSpace)
	if text == "" {
		return nil
	}
	if _, err := io.WriteString(w, text+"\n"); err != nil {
		return fmt.Errorf("format %s: write: %w", name, err)
	}
	return nil
}

// CLIOptions are the options for --out format with --out-indent indent:
// the indent applies to json only, as Salt's output_indent does, and colour
// to nested only.
func CLIOptions(format string, indent int, color bool) Options {
	o := Options{Color: color && format == "nested"}
	if format == "json" {
		o.Indent = indent
	}
	return o
}
