package state

// file.replace, file.line, file.append: salt/states/file.py and
// salt/modules/file.py replace, line (_set_line and its helpers), append,
// search. Python regular expressions run on Go's RE2: the common syntax is
// the same; look-around and backreferences in patterns are refused with a
// comment saying so.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/state"
)

func init() {
	Register("file.replace", Mod{Run: fileReplace, Doc: "Maintain an edit in a file."})
	Register("file.line", Mod{Run: fileLine, Doc: "Line-focused editing of a file."})
	Register("file.append", Mod{Run: fileAppend, Doc: "Ensure that some text appears at the end of a file."})
}

// Python's re flag values.
const (
	reIgnoreCase = 2
	reLocale     = 4
	reMultiline  = 8
	reDotAll     = 16
	reUnicode    = 32
	reVerbose    = 64
	reASCII      = 256
)

// reFlags is salt/modules/file.py _get_flags: an int, a name or a list of
// names ("IGNORECASE", "MULTILINE", ...).
func reFlags(v any, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	names := map[string]int{"I": reIgnoreCase, "IGNORECASE": reIgnoreCase, "L": reLocale, "LOCALE": reLocale,
		"M": reMultiline, "MULTILINE": reMultiline, "S": reDotAll, "DOTALL": reDotAll, "U": reUnicode,
		"UNICODE": reUnicode, "X": reVerbose, "VERBOSE": reVerbose, "A": reASCII, "ASCII": reASCII}
	switch x := v.(type) {
	case int, int64, uint64, float64:
		n, _ := strconv.Atoi(pyStr(x))
		return n, nil
	case string:
		v = []any{x}
	}
	l, ok := v.([]any)
	if !ok {
		return 0, fmt.Errorf("Invalid re flag given: %s", pyStr(v))
	}
	f := 0
	for _, it := range l {
		n, ok := names[strings.ToUpper(pyStr(it))]
		if !ok {
			return 0, fmt.Errorf("Invalid re flag given: %s", pyStr(it))
		}
		f |= n
	}
	return f, nil
}

// pyRegexp compiles a Python pattern with Python's flags for RE2.
func pyRegexp(pattern string, flags int) (*regexp.Regexp, error) {
	if flags&reVerbose != 0 {
		return nil, fmt.Errorf("the VERBOSE regular expression flag is not supported on this agent")
	}
	p := strings.ReplaceAll(pattern, `\Z`, `\z`)
	var pre string
	if flags&reIgnoreCase != 0 {
		pre += "i"
	}
	if flags&reMultiline != 0 {
		pre += "m"
	}
	if flags&reDotAll != 0 {
		pre += "s"
	}
	if pre != "" {
		p = "(?" + pre + ")" + p
	}
	// Salt's documented idiom for a line end that may be CRLF; RE2 has no
	// look-ahead, and "$" already ends the line for LF files.
	p = strings.ReplaceAll(p, `($|(?=\r\n))`, `($)`)
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("%v: '%s' (this agent runs Go's RE2 regular expressions: no look-around or backreferences in patterns)", err, pattern)
	}
	return re, nil
}

// pyRepl turns a Python replacement template (\1, \g<1>, \g<name>, \n,
// \\) into a Go Expand template.
func pyRepl(repl string) string {
	var b strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c == '$' {
			b.WriteString("$$")
			continue
		}
		if c != '\\' || i+1 >= len(repl) {
			b.WriteByte(c)
			continue
		}
		n := repl[i+1]
		switch {
		case n >= '0' && n <= '9':
			j := i + 2
			if j < len(repl) && repl[j] >= '0' && repl[j] <= '9' {
				j++
			}
			b.WriteString("${" + repl[i+1:j] + "}")
			i = j - 1
		case n == 'g' && i+2 < len(repl) && repl[i+2] == '<':
			end := strings.IndexByte(repl[i+3:], '>')
			if end < 0 {
				b.WriteString(`\g`)
				i++
				continue
			}
			b.WriteString("${" + repl[i+3:i+3+end] + "}")
			i = i + 3 + end
		case n == 'n':
			b.WriteByte('\n')
			i++
		case n == 't':
			b.WriteByte('\t')
			i++
		case n == 'r':
			b.WriteByte('\r')
			i++
		case n == '\\':
			b.WriteByte('\\')
			i++
		default:
			b.WriteByte('\\')
		}
	}
	return b.String()
}

// subn is re.subn(pattern, repl, data, count): the result and the number
// of replacements.
func subn(re *regexp.Regexp, tmpl string, data []byte, count int) ([]byte, int) {
	n := -1
	if count > 0 {
		n = count
	}
	ms := re.FindAllSubmatchIndex(data, n)
	if len(ms) == 0 {
		return data, 0
	}
	out := make([]byte, 0, len(data))
	last := 0
	for _, m := range ms {
		out = append(out, data[last:m[0]]...)
		out = re.Expand(out, []byte(tmpl), data, m)
		last = m[1]
	}
	out = append(out, data[last:]...)
	return out, len(ms)
}

// bytesSplitLinesKeep is bytes.splitlines(True) (\n, \r\n and \r).
func bytesSplitLinesKeep(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			out = append(out, s)
			break
		}
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// checkFile is salt/states/file.py _check_file.
func checkFile(name string) string {
	if !filepath.IsAbs(name) {
		return ("Specified file " + name + " is not an absolute path")
	}
	if !lexists(name) || (isLink(name) && !isRegular(name) && !isDir(name)) {
		return (name + ": file not found")
	}
	return ""
}

func fileReplace(_ context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	if name == "" {
		return failS(ret, "Must provide name to file.replace")
	}
	if msg := checkFile(name); msg != "" {
		if argBool(ch, "ignore_if_missing", false) && strings.Contains(msg, "file not found") {
			ret.Comment = "No changes needed to be made"
			return ret
		}
		return failS(ret, msg)
	}
	changes, err := replaceIn(c, name)
	if err != nil {
		return failS(ret, err.Error())
	}
	if changes != nil {
		ret.Changes["diff"] = changes
		if c.Test {
			ret.Result = state.None
			ret.Comment = "Changes would have been made"
		} else {
			ret.Comment = "Changes were made"
		}
		return ret
	}
	ret.Comment = "No changes needed to be made"
	return ret
}

// replaceIn is salt/modules/file.py replace with dry_run=test; it returns
// the diff (or true without show_changes) when something changed, nil when
// not.
func replaceIn(c *Call, name string) (any, error) {
	ch := c.Chunk
	path, err := filepath.EvalSymlinks(name)
	if err != nil {
		return nil, fmt.Errorf("File not found: %s", name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("Unable to open file '%s'. Exception: %s", path, strerror(err))
	}
	if !isText(data) {
		return nil, fmt.Errorf("Cannot perform string replacements on a binary file: %s", path)
	}
	appendNF, prependNF := argBool(ch, "append_if_not_found", false), argBool(ch, "prepend_if_not_found", false)
	if appendNF && prependNF {
		return nil, fmt.Errorf("Only one of append and prepend_if_not_found is permitted")
	}
	flags, err := reFlags(ch["flags"], reMultiline)
	if err != nil {
		return nil, err
	}
	pattern := argStr(ch, "pattern")
	if _, ok := arg(ch, "pattern"); !ok {
		return nil, fmt.Errorf("pattern is required")
	}
	re, err := pyRegexp(pattern, flags)
	if err != nil {
		return nil, err
	}
	count, err := argInt(ch, "count", 0)
	if err != nil {
		return nil, err
	}
	repl := argStr(ch, "repl")
	tmpl := pyRepl(repl)
	if argBool(ch, "backslash_literal", false) {
		tmpl = strings.ReplaceAll(repl, "$", "$$")
	}
	notFound := argStr(ch, "not_found_content")
	content := repl
	if notFound != "" && (prependNF || appendNF) {
		content = notFound
	}
	result, nrepl := subn(re, tmpl, data, count)
	found := nrepl > 0
	hasChanges := found && pattern != repl
	if prependNF || appendNF {
		cre, err := pyRegexp("^"+regexp.QuoteMeta(content)+`(?:$|\r$)`, flags)
		if err == nil && cre.Match(data) {
			found = true
		}
	}
	orig := bytesSplitLinesKeep(string(data))
	newLines := bytesSplitLinesKeep(string(result))
	if strings.Join(orig, "") == strings.Join(newLines, "") {
		hasChanges = false
	}
	if !found && (appendNF || prependNF) {
		nf := notFound
		if nf == "" {
			nf = repl
		}
		if prependNF {
			newLines = append([]string{nf + "\n"}, newLines...)
		} else {
			if n := len(newLines); n > 0 && !strings.HasSuffix(newLines[n-1], "\n") {
				newLines[n-1] += "\n"
			}
			newLines = append(newLines, nf+"\n")
		}
		hasChanges = true
	}
	if hasChanges && !c.Test {
		if bk := pyStr(ch["backup"]); ch["backup"] == nil || truthy(ch["backup"]) {
			if ch["backup"] == nil {
				bk = ".bak"
			}
			if err := copyFile(path, path+bk); err != nil {
				return nil, fmt.Errorf("Unable to move the temp file '%s' to the backup file '%s'. Exception: %s", path, path+bk, strerror(err))
			}
		}
		if err := writeAtomic(path, []byte(strings.Join(newLines, "")), 0, "", ""); err != nil {
			return nil, fmt.Errorf("Unable to write file '%s'. Exception: %s", path, strerror(err))
		}
	}
	diff := strings.Join(unifiedDiff(orig, newLines), "")
	if argBool(ch, "show_changes", true) {
		if diff == "" {
			return nil, nil
		}
		return diff, nil
	}
	if diff == "" || !hasChanges {
		return nil, nil
	}
	return true, nil
}

// copyFile copies src to dst with src's mode (shutil.copy2, for backups).
func copyFile(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Chmod(dst, fi.Mode().Perm())
}

// getEOL is _get_eol: the line's ending ("\r\n", "\n", "\r") or "".
func getEOL(l string) string {
	switch {
	case strings.HasSuffix(l, "\r\n"):
		return "\r\n"
	case strings.HasSuffix(l, "\n"):
		return "\n"
	case strings.HasSuffix(l, "\r"):
		return "\r"
	}
	return ""
}

func setLineEOL(src, l string) string {
	e := getEOL(src)
	if e == "" {
		e = "\n"
	}
	return strings.TrimRight(l, " \t\r\n\v\f") + e
}

func setLineIndent(src, l string, indent bool) string {
	if !indent {
		return l
	}
	i := 0
	for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	return src[:i] + strings.TrimLeft(l, " \t\r\n\v\f")
}

// regexToStatic is _regex_to_static: the lines the expression finds (as a
// DOTALL regex, or as a plain substring). nil when src or expr is empty.
func regexToStatic(src []string, expr *string) ([]string, error) {
	if len(src) == 0 || expr == nil || *expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile("(?s)" + *expr)
	if err != nil {
		return nil, fmt.Errorf("%v: '%s'", err, *expr)
	}
	out := []string{}
	for _, l := range src {
		if re.MatchString(l) || strings.Contains(l, *expr) {
			out = append(out, l)
		}
	}
	return out, nil
}

func assertOccurrence(probe []string, target string) error {
	var msg string
	switch {
	case len(probe) > 1:
		msg = "more than"
	case len(probe) < 1:
		msg = "less than"
	}
	if msg != "" {
		return fmt.Errorf(`Found %s expected occurrences in "%s" expression`, msg, target)
	}
	return nil
}

func indexOf(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}

// pyIndex is Python's lines[i] with a negative index from the end.
func pyIndex(lines []string, i int) string {
	if i < 0 {
		i += len(lines)
	}
	if i < 0 || i >= len(lines) {
		return ""
	}
	return lines[i]
}

func insertAt(lines []string, i int, s string) []string {
	lines = append(lines, "")
	copy(lines[i+1:], lines[i:])
	lines[i] = s
	return lines
}

// setLine is salt/modules/file.py _set_line (nil pointers: argument not
// given).
func setLine(lines []string, content *string, match *string, mode, location string, before, after *string, indent bool) ([]string, error) {
	switch mode {
	case "insert", "ensure", "delete", "replace":
	case "":
		return nil, fmt.Errorf("Mode was not defined. How to process the file?")
	default:
		return nil, fmt.Errorf("Unknown mode: %s", mode)
	}
	if mode != "delete" && content == nil {
		return nil, fmt.Errorf("Content can only be empty if mode is delete")
	}
	if (match == nil || *match == "") && before == nil && after == nil {
		match = content
	}
	af, err := regexToStatic(lines, after)
	if err != nil {
		return nil, err
	}
	bf, err := regexToStatic(lines, before)
	if err != nil {
		return nil, err
	}
	mf, err := regexToStatic(lines, match)
	if err != nil {
		return nil, err
	}
	cont := ""
	if content != nil {
		cont = *content
	}
	// Salt compares the neighbour line with content after dropping only
	// the line end, so a line it indented itself does not match on the
	// next run and is inserted again (not idempotent); with indent the
	// leading blanks are dropped too, the rest is Salt's comparison.
	trimEOL := func(s string) string {
		s = strings.TrimRight(s, "\r\n")
		if indent {
			s = strings.TrimLeft(s, " \t")
		}
		return s
	}
	switch {
	case len(lines) == 0 && (mode == "delete" || mode == "replace"):
		return []string{}, nil
	case mode == "delete" && len(mf) > 0:
		out := lines[:0:0]
		for _, l := range lines {
			if l != mf[0] {
				out = append(out, l)
			}
		}
		return out, nil
	case mode == "replace" && len(mf) > 0:
		i := indexOf(lines, mf[0])
		lines[i] = setLineIndent(lines[i], cont, indent)
		return lines, nil
	case mode == "insert":
		if before == nil && after == nil && location == "" {
			return nil, fmt.Errorf(`On insert either "location" or "before/after" conditions are required.`)
		}
		if location != "" {
			switch location {
			case "end":
				if len(lines) > 0 {
					lines = append(lines, setLineIndent(lines[len(lines)-1], cont, indent))
				} else {
					lines = append(lines, cont)
				}
			case "start":
				if len(lines) > 0 {
					lines = insertAt(lines, 0, setLineEOL(lines[0], cont))
				} else {
					lines = []string{cont + "\n"}
				}
			}
			return lines, nil
		}
		switch {
		case len(bf) > 0 && len(af) > 0:
			if err := assertOccurrence(bf, "before"); err != nil {
				return nil, err
			}
			if err := assertOccurrence(af, "after"); err != nil {
				return nil, err
			}
			last := indexOf(lines, bf[0])
			lines = insertAt(lines, last, setLineIndent(lines[last], cont, indent))
		case len(af) > 0:
			if err := assertOccurrence(af, "after"); err != nil {
				return nil, err
			}
			i := indexOf(lines, af[0])
			if i+1 >= len(lines) || trimEOL(lines[i+1]) != trimEOL(cont) {
				lines = insertAt(lines, i+1, setLineIndent(lines[i], cont, indent))
			}
		case len(bf) > 0:
			if err := assertOccurrence(bf, "before"); err != nil {
				return nil, err
			}
			i := indexOf(lines, bf[0])
			if trimEOL(pyIndex(lines, i-1)) != trimEOL(cont) {
				lines = insertAt(lines, i, setLineIndent(lines[i], cont, indent))
			}
		default:
			return nil, fmt.Errorf("Neither before or after was found in file")
		}
	case mode == "ensure":
		switch {
		case len(bf) > 0 && len(af) > 0:
			if err := assertOccurrence(af, "after"); err != nil {
				return nil, err
			}
			if err := assertOccurrence(bf, "before"); err != nil {
				return nil, err
			}
			ai, bi := indexOf(lines, af[0]), indexOf(lines, bf[0])
			there := false
			for _, l := range lines {
				if strings.TrimLeft(l, " \t\r\n\v\f") == cont {
					there = true
				}
			}
			if !there {
				switch {
				case ai+1 == bi:
					lines = insertAt(lines, ai+1, setLineIndent(lines[ai], cont, indent))
				case ai+2 == bi:
					lines[ai+1] = setLineIndent(lines[ai], cont, indent)
				default:
					return nil, fmt.Errorf(`Found more than one line between boundaries "before" and "after".`)
				}
			}
		case len(bf) > 0:
			if err := assertOccurrence(bf, "before"); err != nil {
				return nil, err
			}
			bi := indexOf(lines, bf[0])
			if bi == 0 || trimEOL(lines[bi-1]) != trimEOL(cont) {
				lines = insertAt(lines, bi, setLineIndent(pyIndex(lines, bi-1), cont, indent))
			}
		case len(af) > 0:
			if err := assertOccurrence(af, "after"); err != nil {
				return nil, err
			}
			ai := indexOf(lines, af[0])
			if ai+1 >= len(lines) || trimEOL(lines[ai+1]) != trimEOL(cont) {
				lines = insertAt(lines, ai+1, setLineIndent(lines[ai], cont, indent))
			}
		default:
			return nil, fmt.Errorf("Wrong conditions? Unable to ensure line without knowing where to put it before and/or after.")
		}
	}
	return lines, nil
}

// optStr is a string argument that may be absent (nil).
func optStr(ch state.Chunk, k string) *string {
	v, ok := arg(ch, k)
	if !ok {
		return nil
	}
	s := pyStr(v)
	return &s
}

func fileLine(ctx context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.True, Changes: map[string]any{}}
	if name == "" {
		return failS(ret, "Must provide name to file.line")
	}
	// Salt: managed(name, create=create, user=user, group=group,
	// mode=file_mode, replace=False); its return is not used.
	sub := state.Chunk{"create": argBool(ch, "create", false), "replace": false}
	for k, to := range map[string]string{"user": "user", "group": "group", "file_mode": "mode"} {
		if v, ok := arg(ch, k); ok {
			sub[to] = v
		}
	}
	managed(ctx, &Call{Chunk: sub, Name: name, Test: c.Test, Host: c.Host})
	if msg := checkFile(name); msg != "" {
		return failS(ret, msg)
	}
	mode := strings.ToLower(argStr(ch, "mode"))
	if mode == "" {
		return failS(ret, "Mode was not defined. How to process the file?")
	}
	content := optStr(ch, "content")
	if mode != "delete" && content == nil {
		return failS(ret, "Content can only be empty if mode is ['delete']")
	}
	changes, err := lineIn(c, name, mode, content)
	if err != nil {
		return failS(ret, err.Error())
	}
	if changes != nil {
		ret.Changes["diff"] = changes
		if c.Test {
			ret.Result = state.None
			ret.Comment = "Changes would be made"
		} else {
			ret.Comment = "Changes were made"
		}
		return ret
	}
	ret.Comment = "No changes needed to be made"
	return ret
}

// lineIn is salt/modules/file.py line; nil when nothing changed.
func lineIn(c *Call, name, mode string, content *string) (any, error) {
	ch := c.Chunk
	path, err := filepath.EvalSymlinks(name)
	if err != nil || !isRegular(path) {
		if argBool(ch, "quiet", false) {
			return nil, nil
		}
		return nil, fmt.Errorf(`File "%s" does not exists or is not a file.`, name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s", strerror(err))
	}
	if !isText(data) {
		return nil, fmt.Errorf("Cannot edit a binary file line by line: %s", path)
	}
	body := splitLinesKeep(string(data))
	if n := len(body); n > 0 && getEOL(body[n-1]) != "" {
		body = append(body, "")
	}
	if len(data) == 0 && (mode == "delete" || mode == "replace") {
		body = nil
	}
	match, before, after := optStr(ch, "match"), optStr(ch, "before"), optStr(ch, "after")
	body, err = setLine(body, content, match, mode, argStr(ch, "location"), before, after, argBool(ch, "indent", true))
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		for i, l := range body {
			if getEOL(l) == "" && i+1 < len(body) {
				prev := 1
				if i != 0 {
					prev = i - 1
				}
				body[i] = setLineEOL(body[prev], l)
			}
		}
		if body[len(body)-1] == "" {
			body = body[:len(body)-1]
		}
	}
	newData := strings.Join(body, "")
	if newData == string(data) {
		return nil, nil
	}
	if truthy(ch["backup"]) && !c.Test {
		bk := (path + "." + time.Now().Format("2006-01-02-15-04-05"))
		if err := copyFile(path, bk); err != nil {
			return nil, fmt.Errorf("Unable to create the backup file of %s. Exception: %s", path, strerror(err))
		}
	}
	var diff any = true
	if argBool(ch, "show_changes", true) {
		diff = strings.Join(unifiedDiff(bytesSplitLinesKeep(string(data)), body), "")
	}
	if !c.Test {
		if err := writeAtomic(path, []byte(newData), 0, "", ""); err != nil {
			return nil, fmt.Errorf("Unable to write file '%s'. Exception: %s", path, strerror(err))
		}
	}
	return diff, nil
}

// whitespaceSplitRegex is salt.utils.stringutils.build_whitespace_split_regex.
func whitespaceSplitRegex(text string) string {
	var b strings.Builder
	for _, line := range pySplitLines(text) {
		parts := shlexWhitespace(line)
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		b.WriteString(`(?:[\s]+)?` + strings.Join(parts, `(?:[\s]+)?`) + `(?:[\s]+)?`)
	}
	return "(?m)^" + b.String() + "$"
}

// shlexWhitespace is shlex.shlex(line) with whitespace_split and no
// commenters, in its non-POSIX mode (quotes kept), with Salt's choice of
// quote characters.
func shlexWhitespace(line string) []string {
	quotes := `'"`
	switch {
	case strings.Contains(line, `'\"`):
		quotes = ""
	case strings.Contains(line, "'"):
		quotes = `"`
	case strings.Contains(line, `"`):
		quotes = "'"
	}
	var out []string
	var cur strings.Builder
	var q byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case q != 0:
			cur.WriteByte(c)
			if c == q {
				q = 0
			}
		case strings.IndexByte(quotes, c) >= 0:
			q = c
			cur.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// pyLines is str.splitlines() for comparing files as file.append does.
func pyLines(b []byte) []string { return pySplitLines(string(b)) }

func fileAppend(ctx context.Context, c *Call) state.Ret {
	ch := c.Chunk
	name := expandUser(c.Name)
	ret := state.Ret{Name: name, Result: state.False, Changes: map[string]any{}}
	if name == "" {
		return failS(ret, "Must provide name to file.append")
	}
	var fromSources []string
	if ch["source"] != nil || ch["sources"] != nil {
		if ch["text"] != nil {
			return failS(ret, "'text' and 'source'/'sources' cannot be used together")
		}
		srcs := strList(ch["sources"])
		if ch["source"] != nil {
			srcs = append([]string{argStr(ch, "source")}, srcs...)
		}
		for _, s := range srcs {
			src, msg := resolveSource(ch, s, "")
			if msg != "" {
				return failS(ret, msg)
			}
			fromSources = append(fromSources, string(src.data))
		}
	}
	if argBool(ch, "makedirs", false) {
		dir := filepath.Dir(name)
		if c.Test {
			ret.Comment = ("Directory " + dir + " is set to be updated")
			ret.Result = state.None
		} else if !isDir(dir) {
			if _, err := makeDirs(dir, perms{}); err != nil {
				return failS(ret, "Unable to create "+dir+": "+strerror(err))
			}
		}
	}
	if msg := checkFile(name); msg != "" {
		if c.Test {
			// touch(name) under test
			return state.Ret{Name: name, Result: state.None, Changes: map[string]any{"new": name},
				Comment: ("File " + name + " is set to be created")}
		}
		if !isDir(filepath.Dir(name)) {
			return failS(ret, msg)
		}
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return failS(ret, msg)
		}
		f.Close()
	}
	text := strList(ch["text"])
	if fromSources != nil {
		text = fromSources
	} else if ch["text"] == nil {
		return failS(ret, "No text found to append. Nothing appended")
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return failS(ret, strerror(err))
	}
	slines := pyLines(data)
	var add []string
	for _, chunk := range text {
		var pat string
		if argBool(ch, "ignore_whitespace", true) {
			pat = whitespaceSplitRegex(chunk)
		} else {
			pat = "(?m)" + chunk
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return failS(ret, err.Error()+": '"+chunk+"'")
		}
		if re.Match(data) {
			continue
		}
		add = append(add, pySplitLines(chunk)...)
	}
	nlines := append(append([]string(nil), slines...), add...)
	diff := func(a, b []string) string {
		if !isText(data) {
			return "Replace binary file"
		}
		return strings.Join(unifiedDiff(a, b), "\n")
	}
	if c.Test {
		ret.Comment = ("File " + name + " is set to be updated")
		ret.Result = state.None
		if len(add) > 0 {
			ret.Changes["diff"] = diff(slines, nlines)
		} else {
			ret.Comment = ("File " + name + " is in correct state")
			ret.Result = state.True
		}
		return ret
	}
	if len(add) > 0 {
		var b strings.Builder
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
		for _, l := range add {
			b.WriteString(l + "\n")
		}
		if err := writeAtomic(name, []byte(b.String()), 0, "", ""); err != nil {
			return failS(ret, "Unable to append to "+name+": "+strerror(err))
		}
		ret.Comment = "Appended " + strconv.Itoa(len(add)) + " lines"
		after, _ := os.ReadFile(name)
		if na := pyLines(after); strings.Join(na, "\n") != strings.Join(slines, "\n") || len(na) != len(slines) {
			ret.Changes["diff"] = diff(slines, na)
		}
	} else {
		ret.Comment = ("File " + name + " is in correct state")
	}
	ret.Result = state.True
	return ret
}
