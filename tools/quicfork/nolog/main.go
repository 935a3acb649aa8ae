// Command nolog takes quic-go's debug logging and qlog tracing out of 32-bit
// ARM and MIPS builds of the copy that tools/quicfork.sh makes, so that both
// compile away there. quic-go logs through an interface
// (internal/utils.Logger) that is only active with QUIC_GO_LOG_LEVEL set, and
// records qlog events when a Config.Tracer is set; its call sites build their
// arguments (and, under `if logger.Debug() {…}` or `if c.qlogger != nil {…}`,
// whole frame and packet dumps) in every binary, and the small-device agent's
// build, which does not inline, cannot prove them dead.
//
// nolog rewrites each non-test Go file under the directories it is given,
// except the files Halite's patches add (halite_*.go), to test the constants
// protocol.LogEnabled and protocol.QlogEnabled first (the patch
// 20-small-devices.patch declares them: false on arm, mips and mipsle unless
// built with -tags quicdebug, true elsewhere):
//
//   - a call X.Debug() whose receiver is a logger becomes
//     (protocol.LogEnabled && X.Debug());
//   - a statement X.Debugf(…), X.Infof(…) or X.Errorf(…) whose receiver is a
//     logger becomes if protocol.LogEnabled { X.Debugf(…) };
//   - a test X != nil (X == nil) where X is a qlog recorder or tracer (its
//     name ends in qlogger, qlogTrace or Tracer) becomes
//     (protocol.QlogEnabled && X != nil) ((!protocol.QlogEnabled || X == nil)).
//
// Where the constants are true nothing changes; where they are false the
// compiler drops the code, which still type-checks (its variables and
// imports stay used). A receiver is a logger when its expression ends in
// "logger" or "Logger" (c.logger, utils.DefaultLogger). nolog prints the sites
// it changed per file and in all.
//
// Usage: go run ./tools/quicfork/nolog DIR...
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// protocolPath is the package that declares LogEnabled and QlogEnabled.
const protocolPath = "github.com/quic-go/quic-go/internal/protocol"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nolog DIR...")
		os.Exit(2)
	}
	var total sites
	for _, dir := range os.Args[1:] {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			name := filepath.Base(path)
			if err != nil || d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
				strings.HasPrefix(name, "halite_") {
				return err
			}
			s, err := rewriteFile(path)
			total.logs += s.logs
			total.qlogs += s.qlogs
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "nolog:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("nolog: %d logging and %d qlog sites guarded\n", total.logs, total.qlogs)
}

type sites struct{ logs, qlogs int }

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

func rewriteFile(path string) (sites, error) {
	var n sites
	src, err := os.ReadFile(path)
	if err != nil {
		return n, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return n, err
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	text := func(e ast.Node) string { return string(src[off(e.Pos()):off(e.End())]) }
	pkg := "protocol."
	if f.Name.Name == "protocol" {
		pkg = ""
	}
	logOn, qlogOn := pkg+"LogEnabled", pkg+"QlogEnabled"
	var edits []edit
	var inspect func(ast.Node) bool
	inspect = func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.IfStmt:
			// if X.Debug() {…}: the body is guarded already.
			if call, ok := x.Cond.(*ast.CallExpr); ok && isLoggerCall(call, "Debug") && len(call.Args) == 0 && x.Init == nil {
				edits = append(edits, edit{off(call.Pos()), off(call.End()), logOn + " && " + text(call)})
				n.logs++
				if x.Else != nil {
					ast.Inspect(x.Else, inspect)
				}
				return false
			}
		case *ast.ExprStmt:
			if call, ok := x.X.(*ast.CallExpr); ok && isLoggerCall(call, "Debugf", "Infof", "Errorf") {
				edits = append(edits, edit{off(x.Pos()), off(x.End()), "if " + logOn + " { " + text(x) + " }"})
				n.logs++
				return false // nothing to rewrite inside a dead call
			}
		case *ast.CallExpr:
			if isLoggerCall(x, "Debug") && len(x.Args) == 0 {
				edits = append(edits, edit{off(x.Pos()), off(x.End()), "(" + logOn + " && " + text(x) + ")"})
				n.logs++
				return false
			}
		case *ast.BinaryExpr:
			if id, ok := x.Y.(*ast.Ident); ok && id.Name == "nil" && isQlog(x.X) {
				switch x.Op {
				case token.NEQ:
					edits = append(edits, edit{off(x.Pos()), off(x.End()), "(" + qlogOn + " && " + text(x) + ")"})
					n.qlogs++
					return false
				case token.EQL:
					edits = append(edits, edit{off(x.Pos()), off(x.End()), "(!" + qlogOn + " || " + text(x) + ")"})
					n.qlogs++
					return false
				}
			}
		}
		return true
	}
	ast.Inspect(f, inspect)
	if len(edits) == 0 {
		return n, nil
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), src...)
	for _, e := range edits {
		out = append(out[:e.start:e.start], append([]byte(e.text), out[e.end:]...)...)
	}
	if pkg != "" && !imports(f, protocolPath) {
		at := off(f.Name.End())
		out = append(out[:at:at], append([]byte("\n\nimport "+strconv.Quote(protocolPath)+"\n"), out[at:]...)...)
	}
	if out, err = format.Source(out); err != nil {
		return n, fmt.Errorf("%s after rewriting: %w", path, err)
	}
	if bytes.Equal(out, src) {
		return sites{}, nil
	}
	fmt.Printf("%s: %d logging, %d qlog\n", path, n.logs, n.qlogs)
	return n, os.WriteFile(path, out, 0o644)
}

// isLoggerCall reports whether call is recv.name(…) for one of names, with a
// receiver expression that ends in "logger" or "Logger".
func isLoggerCall(call *ast.CallExpr, names ...string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	found := false
	for _, name := range names {
		found = found || sel.Sel.Name == name
	}
	if !found {
		return false
	}
	last := lastName(sel.X)
	return strings.HasSuffix(last, "logger") || strings.HasSuffix(last, "Logger")
}

// isQlog reports whether x names a qlog recorder or tracer.
func isQlog(x ast.Expr) bool {
	switch lastName(x) {
	case "qlogger", "qlogTrace", "Tracer":
		return true
	}
	return false
}

// lastName is the identifier x ends in: c for c, logger for s.logger.
func lastName(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

func imports(f *ast.File, path string) bool {
	for _, s := range f.Imports {
		if p, err := strconv.Unquote(s.Path.Value); err == nil && p == path {
			return true
		}
	}
	return false
}
