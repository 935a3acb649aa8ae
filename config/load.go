package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/internal/yamlbound"
)

// role describes one kind of configuration: its file name and its options.
type role[T any] struct {
	name    string                // "master" or "agent": file and drop-in directory name
	other   string                // the other role's name, for warnings
	alt     string                // the Salt name of the main file, read when name is absent ("minion")
	options map[string]*option[T] // the option table: every option the role knows
	foreign map[string]bool       // options of the other role only
}

// loc is where an option was set.
type loc struct {
	file string
	line int
}

// loaded is what load read besides the typed fields.
type loaded struct {
	raw map[string]any // every option as loaded
	at  map[string]loc // where each option was last set

	warned map[string]bool // options with no effect already warned about
}

// files returns the files to read in order: dir/NAME if present, then
// dir/NAME.d/*.conf in lexical order. A role with an alt name (the agent,
// whose Salt name is minion) reads dir/ALT and then dir/ALT.d/*.conf and
// dir/NAME.d/*.conf when dir/NAME is absent, so that -c /etc/salt works.
func (r *role[T]) files(dir string) ([]string, error) {
	main := filepath.Join(dir, r.name)
	dropDirs := []string{main + ".d"}
	if r.alt != "" && !exists(main) {
		main = filepath.Join(dir, r.alt)
		dropDirs = []string{main + ".d", dropDirs[0]}
	}
	var files []string
	switch _, err := os.Stat(main); {
	case err == nil:
		files = append(files, main)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, &Error{File: main, Msg: fmt.Sprintf("read config: %v", unwrapPath(err)), err: err}
	}
	for _, d := range dropDirs {
		drop, err := dropIns(d)
		if err != nil {
			return nil, err
		}
		files = append(files, drop...)
	}
	return files, nil
}

// dropIns returns dir/*.conf in lexical order; none if dir is absent.
func dropIns(dropDir string) ([]string, error) {
	entries, err := os.ReadDir(dropDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, &Error{File: dropDir, Msg: fmt.Sprintf("read config directory: %v", unwrapPath(err)), err: err}
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".conf") && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	files := make([]string, 0, len(names))
	for _, n := range names {
		files = append(files, filepath.Join(dropDir, n))
	}
	return files, nil
}

// exists reports whether path exists; a path that cannot be checked counts
// as existing, so that reading it reports the problem.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// unwrapPath drops the *PathError wrapper, whose path Error already shows.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// load reads every file of the role in dir into dst, later files overriding
// earlier ones key by key, and returns every key as loaded and where.
func (r *role[T]) load(dir string, dst *T, warn func(Warning)) (*loaded, error) {
	if warn == nil {
		warn = func(Warning) {}
	}
	files, err := r.files(dir)
	if err != nil {
		return nil, err
	}
	l := &loaded{raw: make(map[string]any), at: make(map[string]loc), warned: make(map[string]bool)}
	for _, file := range files {
		if err := r.loadFile(file, dst, l, warn); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (r *role[T]) loadFile(file string, dst *T, l *loaded, warn func(Warning)) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return &Error{File: file, Msg: fmt.Sprintf("read config: %v", unwrapPath(err)), err: err}
	}
	top, err := parse(file, data)
	if err != nil || top == nil {
		return err
	}
	seen := make(map[string]int)
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := resolve(top.Content[i]), top.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("expected an option name, got %s", describe(k))}
		}
		key := k.Value
		o, known := r.options[key]
		effective := known && o.status == Implemented
		if first, dup := seen[key]; dup && effective {
			warn(Warning{File: file, Line: k.Line, Msg: fmt.Sprintf("option %q is set again (first at line %d); the last one wins", key, first)})
		}
		seen[key] = k.Line
		// An option with no effect is warned about once, at its first
		// line, however many times the files set it.
		w := warn
		if !effective {
			if l.warned[key] {
				w = func(Warning) {}
			}
			l.warned[key] = true
		}
		a, err := toAny(v)
		if err != nil {
			return &Error{File: file, Line: k.Line, Msg: fmt.Sprintf("%s: %v", key, err)}
		}
		l.raw[key] = a
		l.at[key] = loc{file, k.Line}
		if known {
			if o.set != nil && !isNull(v) { // "key:" with no value keeps the default
				if err := o.set(dst, value{n: v, file: file}); err != nil {
					return optionError(file, k.Line, key, err)
				}
			}
			switch o.status {
			case Ignored, Refused:
				w(Warning{File: file, Line: k.Line, Msg: fmt.Sprintf("option %q is a Salt option Halite does not use; it has no effect%s", key, because(o.doc))})
			case Elsewhere:
				w(Warning{File: file, Line: k.Line, Msg: fmt.Sprintf("option %q is not implemented in this build; it has no effect", key)})
			}
			continue
		}
		switch {
		case moduleOption(key):
			// Options of modules and returners (redis.host,
			// returner.pgjsonb.host, alternative.mysql.db, ...) are
			// read by the module named before the dot.
		case r.foreign[key]:
			w(Warning{File: file, Line: k.Line, Msg: fmt.Sprintf("option %q is %s option; the %s ignores it", key, article(r.other), r.name)})
		default:
			w(Warning{File: file, Line: k.Line, Msg: fmt.Sprintf("unknown option %q", key)})
		}
	}
	return nil
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// yamlLine matches the line yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse returns the top-level mapping of a configuration file, or nil for a
// file with no document or an empty one.
func parse(file string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(file, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &Error{File: file, Line: extra.Line, Msg: "expected one YAML document, found another"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(file, err)
	}
	var be *yamlbound.Error
	if err := yamlbound.Check(&doc); errors.As(err, &be) {
		return nil, &Error{File: file, Line: be.Line, Msg: "invalid YAML: " + be.Msg, err: err}
	}
	top := resolve(&doc)
	if isNull(top) {
		return nil, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, &Error{File: file, Line: top.Line, Msg: fmt.Sprintf("expected a mapping of option names to values, got %s", describe(top))}
	}
	return top, nil
}

// yamlParserProblems are the messages of yaml.v3's parser (as opposed to
// its scanner) errors. For these yaml.v3 reports a zero-based line (of the
// enclosing collection's start, or else of the problem), one less than the
// line a person counts; scanner errors are reported one-based.
var yamlParserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

func syntaxError(file string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if yamlParserProblems[msg] {
		line++ // zero-based, or absent for the first line
	}
	return &Error{File: file, Line: line, Msg: "invalid YAML: " + msg, err: err}
}

// setOf makes a set from space-separated words.
func setOf(lists ...string) map[string]bool {
	s := make(map[string]bool)
	for _, l := range lists {
		for _, w := range strings.Fields(l) {
			s[w] = true
		}
	}
	return s
}

// prependRoot relocates path under root as Salt's prepend_root_dir does: a
// path already under root is kept, any other path (absolute or relative)
// gets root prepended. An empty path stays empty.
func prependRoot(root, path string) string {
	if path == "" || root == "" {
		return path
	}
	root = filepath.Clean(root)
	if root == string(filepath.Separator) {
		if filepath.IsAbs(path) {
			return path
		}
		return filepath.Join(root, path)
	}
	if path == root || strings.HasPrefix(path, root+string(filepath.Separator)) {
		return path
	}
	return filepath.Join(root, path)
}

// isURI reports whether a log_file is a URI (file://, udp://, tcp://) that
// Salt leaves alone when relocating paths.
func isURI(s string) bool { return strings.Contains(s, "://") }

// absRoot makes root_dir absolute, relative to the working directory as in
// Salt.
func absRoot(root string) (string, error) {
	if root == "" {
		return string(filepath.Separator), nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("root_dir %q: %w", root, err)
	}
	return abs, nil
}

// moduleOption reports whether key is an option of a module or returner,
// as Salt spells them: "<module>.<option>", possibly nested further.
func moduleOption(key string) bool {
	mod, opt, ok := strings.Cut(key, ".")
	return ok && mod != "" && opt != ""
}

// because turns an option's note into the end of a warning.
func because(doc string) string {
	if doc == "" {
		return ""
	}
	return " (" + doc + ")"
}
