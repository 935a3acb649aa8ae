// Package render turns Salt SLS files (reactor files first) into data: Jinja
// through github.com/nikolalohinski/gonja/v2 with an Environment of its own
// (Salt's json, yaml and tojson filters, a small set of "salt" quick
// functions, parsed templates cached), then YAML through go.yaml.in/yaml/v3
// as a yaml.Node so that the order of the top-level IDs is kept.
//
// It sits beside the event bus: the master's reactor and a masterless
// agent built with -tags reactor import it. The default agent build does
// not (gonja costs about 4 MiB); it reads plain-YAML files with ParseYAML
// alone.
//
// Event data given to a template is data: values are substituted, never
// parsed as templates, so braces or Jinja syntax inside an event do not run;
// nor parsed as YAML structure: each {{ expr }} is written as a token that
// stands inside one YAML scalar, and its value is put back after the YAML
// is parsed (slots.go, values.go), so only the template's own text gives
// the document its keys, items and anchors. A value alone in a plain
// scalar keeps Salt's typing (a number, bool, list or mapping is that
// value; a string is read as a YAML scalar alone); anywhere else it is
// text. Structure from data is asked for with |yaml, |json (and their
// aliases), whose output quotes every string on one line.
package render
