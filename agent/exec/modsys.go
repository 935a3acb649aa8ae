package exec

import "context"

// modsysModule is the sys functions of modsys.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modsysModule = module{name: "sys", funcs: []function{
	{
		name:    "list_functions",
		varargs: true,
		doc: `List the functions of the agent's modules, sorted. Arguments select
modules or, with *, globs of function names.

CLI Example:

    halite '*' sys.list_functions
    halite '*' sys.list_functions sys test
    halite '*' sys.list_functions 'grains.*'`,
		run: func(_ context.Context, c *call) (any, error) {
			names, err := strArgs(c.rest)
			if err != nil {
				return nil, err
			}
			funs := selectFunctions(names)
			out := make([]any, len(funs))
			for i, f := range funs {
				out[i] = f
			}
			return out, nil
		},
	},
	{
		name:    "list_modules",
		varargs: true,
		doc: `List the agent's modules, sorted; arguments are globs of module names.

CLI Example:

    halite '*' sys.list_modules`,
		run: func(_ context.Context, c *call) (any, error) {
			pats, err := strArgs(c.rest)
			if err != nil {
				return nil, err
			}
			seen := map[string]bool{}
			for fun := range registry {
				seen[moduleOf(fun)] = true
			}
			out := []any{}
			for _, m := range sortedKeys(seen) {
				if len(pats) == 0 || matchAny(pats, m) {
					out = append(out, m)
				}
			}
			return out, nil
		},
	},
	{
		name:    "doc",
		varargs: true,
		doc: `Return the documentation of functions as a dict of name to doc: all
of them, or those of the modules, functions or globs given.

CLI Example:

    halite '*' sys.doc
    halite '*' sys.doc cmd
    halite '*' sys.doc test.ping 'grains.*'`,
		run: func(_ context.Context, c *call) (any, error) {
			names, err := strArgs(c.rest)
			if err != nil {
				return nil, err
			}
			return docs(names), nil
		},
	},
}}

func init() { register(modsysModule) }

func strArgs(args []any) ([]string, error) {
	out := make([]string, 0, len(args))
	for _, a := range args {
		s, ok := toString(a)
		if !ok {
			return nil, invalidf("names must be strings, not %v", a)
		}
		out = append(out, s)
	}
	return out, nil
}

func moduleOf(fun string) string {
	for i := 0; i < len(fun); i++ {
		if fun[i] == '.' {
			return fun[:i]
		}
	}
	return fun
}

func matchAny(pats []string, name string) bool {
	for _, p := range pats {
		if selects(p, name) || p == name {
			return true
		}
	}
	return false
}
