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
	// IndentSet says output_indent (--out-indent) was given, as Indent;
	// Salt's outputters behave differently when it is absent.
	//   - json: absent, indent 4; 0, a line per item with no indent; a
	//     positive number, that indent; a negative number, one line.
	//   - yaml: absent or not negative, block style with PyYAML's indent
	//     (the number when between 2 and 9, else 2); negative, flow style.
	//   - pprint: not negative, pprint's indent; absent or negative, 1.
	// The nested outputter reads Indent, set or not, as its base indent
	// (Salt's nested_indent). The others ignore it.
	IndentSet bool
	Indent    int
	// State holds the highstate outputter's options (Salt's state_output,
	// state_verbose, ...); nil: Salt's defaults.
	State *StateOptions
}

// renderer renders a normalised value to text; Format trims the text's
// trailing white space and ends it with one newline, as Salt's
// display_output does.
type renderer func(v any, opts Options) (string, error)

var outputters = map[string]renderer{
	"nested":              renderNested,
	"json":                renderJSON,
	"yaml":                renderYAML,
	"txt":                 renderTxt,
	"raw":                 renderRaw,
	"quiet":               func(any, Options) (string, error) { return "", nil },
	"pprint":              renderPprint,
	"newline_values_only": renderNewlineValuesOnly,
	"highstate":           renderHighstate,
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
//   - json: like Salt's json_out, indented 4, keys in the data's order;
//   - yaml: block style, like Salt's yaml_out;
//   - txt: for a dict, "key: value" a line (each line of a multi-line
//     string on its own line), as salt-call --out=txt prints command output;
//   - raw: Python's str() of the data, as Salt's raw outputter;
//   - pprint: Python's pprint.pformat of the data (pprint_out);
//   - newline_values_only: each minion's value, or the items of a list
//     value, a line each (newline_values_only);
//   - highstate: the returns of state runs as Salt's highstate
//     outputter prints them (highstate.go), with opts.State;
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

// CLIOptions are the options for --out format with --out-indent indent
// (nil when not given): the indent applies to json, yaml and pprint, as
// Salt's output_indent does, and colour to nested and highstate only.
func CLIOptions(format string, indent *int, color bool) Options {
	o := Options{Color: color && (format == "nested" || format == "highstate")}
	switch format {
	case "json", "yaml", "pprint":
		if indent != nil {
			o.IndentSet, o.Indent = true, *indent
		}
	}
	return o
}

// Outputter returns the outputter to use for --out name: name itself when
// known, else "nested", with the error Salt logs on the console
// (salt/output/__init__.py get_printout) written to stderr. Salt says
// nothing for "grains", an outputter it once had.
func Outputter(name string, stderr io.Writer) string {
	if name == "" {
		return "nested"
	}
	if Valid(name) {
		if a, ok := aliases[name]; ok {
			return a
		}
		return name
	}
	if name != "grains" {
		fmt.Fprintf(stderr, "[ERROR   ] Invalid outputter %s specified, fall back to nested\n", name)
	}
	return "nested"
}
