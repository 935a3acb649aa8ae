package render

import (
	"fmt"
	"io"

	gonjacs "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// fromImport is Jinja's {% from 'file' import name [as alias], ... %}
// as Salt formulas use it: a name may be a macro or a variable the file
// sets at its top level ({% set nginx = ... %} in a map.jinja). gonja's
// own imports macros only. The imported file runs with the importing
// template's variables (Salt puts grains, pillar, salt, ... in the Jinja
// globals, salt/utils/templates.py render_jinja_tmpl), its output is
// dropped.
type fromImport struct {
	*gonjacs.FromImportControlStructure
}

func fromParser(gonjaFrom parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := gonjaFrom(p, args)
		if err != nil {
			return nil, err
		}
		f, ok := cs.(*gonjacs.FromImportControlStructure)
		if !ok {
			return cs, nil
		}
		return fromImport{f}, nil
	}
}

func (f fromImport) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	name := r.Eval(f.FilenameExpression)
	if name.IsError() {
		return fmt.Errorf("unable to evaluate filename: %w", name)
	}
	filename, err := r.Loader.Resolve(name.String())
	if err != nil {
		return fmt.Errorf("failed to resolve filename: %s", err)
	}
	loader, err := r.Loader.Inherit(filename)
	if err != nil {
		return fmt.Errorf("failed to inherit loader from '%s': %s", filename, err)
	}
	tpl, err := exec.NewTemplate(filename, r.Config, loader, r.Environment)
	if err != nil {
		return fmt.Errorf("unable to load template '%s': %s", filename, err)
	}
	ctx := r.Environment.Context.Inherit()
	sub := exec.NewRenderer(&exec.Environment{
		Context:           ctx,
		Filters:           r.Environment.Filters,
		Tests:             r.Environment.Tests,
		ControlStructures: r.Environment.ControlStructures,
		Methods:           r.Environment.Methods,
	}, io.Discard, r.Config, loader, tpl)
	if err := sub.Execute(); err != nil {
		return fmt.Errorf("template '%s': %w", filename, err)
	}
	set := exec.EmptyContext().Update(ctx) // what the file set itself
	macros := tpl.Macros()
	for alias, n := range f.As {
		if v, ok := set.Get(n); ok {
			r.Environment.Context.Set(alias, v)
			continue
		}
		if node, ok := macros[n]; ok {
			fn, err := exec.MacroNodeToFunc(node, sub)
			if err != nil {
				return fmt.Errorf("unable to import macro '%s': %w", n, err)
			}
			r.Environment.Context.Set(alias, fn)
			continue
		}
		return fmt.Errorf("cannot import name '%s' from '%s'", n, name.String())
	}
	return nil
}
