package reactor

import (
	"bytes"
	"fmt"

	"github.com/halite-fleet/halite/render/sls"
)

// PlainYAML is the renderer of builds without Jinja (the default agent):
// it reads a reactor file as YAML alone and refuses one that holds Jinja
// syntax, saying which build renders it.
type PlainYAML struct{}

// SLS parses src as YAML; tag and data are not used.
func (PlainYAML) SLS(name string, src []byte, tag string, data map[string]any) (string, []sls.Entry, error) {
	for _, delim := range []string{"{%", "{{", "{#"} {
		if i := bytes.Index(src, []byte(delim)); i >= 0 {
			line := bytes.Count(src[:i], []byte("\n")) + 1
			return "", nil, &sls.Error{File: name, Line: line, Stage: "jinja",
				Err: fmt.Errorf("this agent has no Jinja renderer (build it with -tags reactor); the file uses %q", delim)}
		}
	}
	entries, err := sls.ParseYAML(name, string(src))
	return string(src), entries, err
}
