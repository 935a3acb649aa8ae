package output

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// This file is Salt 3006's highstate outputter (salt/output/highstate.py):
// per minion the state blocks in __run_num__ order, then "Summary for
// <id>". Where Salt's outputter raises KeyError, AttributeError or
// TypeError on data it does not expect, Salt's display_output falls back to
// nested (salt/output/__init__.py try_printout), and so does this one;
// where Salt would crash with a traceback (IndexError on a state key
// without "_|-"), this one falls back to nested too.
//
// Two deliberate differences: text from the minions (ids, names, comments,
// string returns) has ESC replaced by '?' everywhere, where Salt does it only
// for minion ids and compile errors, so that no return can drive the
// terminal; and colours use the nested outputter's ANSI sequences ("\x1b[32m"
// where Salt writes "\x1b[0;32m", which looks the same).

// ANSI colours the highstate outputter uses besides nested's.
const (
	colorRed      = "\x1b[31m"
	colorLightRed = "\x1b[1;31m"
)

// StateOptions are Salt's options of the highstate outputter, set in the
// master configuration for halite and in the agent's for halite-call, and
// overridden by --state-output, --state-verbose and --output-diff.
type StateOptions struct {
	// Output is state_output: full (the default), terse, mixed, changes or
	// filter, each optionally with _id (the ID shown instead of the name).
	// Salt lower-cases it; an unknown value prints as full.
	Output string
	// Verbose is state_verbose (default true): false hides the states that
	// succeeded without changes.
	Verbose bool
	// Diff is state_output_diff (--output-diff): hide the states that
	// succeeded without changes, whatever Verbose says.
	Diff bool
	// Profile is state_output_profile (default true): the Started and
	// Duration lines and the total run time.
	Profile bool
	// Pct is state_output_pct: "Success %" and "Failure %" in the summary.
	Pct bool
	// CompressIDs is state_compress_ids: the states of one ID, SLS and
	// result (a "names" list) shown as one, "ID (count)".
	CompressIDs bool
	// Tabular is state_tabular set to True: terse lines aligned in columns.
	// (Salt also takes a format string there; Halite does not.)
	Tabular bool
	// Exclude and Terse are, for state_output filter, the results (as
	// "True", "False", "None") whose states are hidden or shown terse:
	// the exclude= and terse= arguments of the job, else
	// state_output_exclude and state_output_terse. A string is split at
	// commas, as Salt does; nil is none.
	Exclude, Terse any
}

// DefaultStateOptions are Salt's defaults: full output, verbose, with the
// profile lines.
func DefaultStateOptions() StateOptions {
	return StateOptions{Output: "full", Verbose: true, Profile: true}
}

// stateFunctions are the execution functions whose returns Salt prints
// with the highstate outputter: salt/modules/state.py __outputter__.
var stateFunctions = map[string]bool{
	"state.sls": true, "state.sls_id": true, "state.pkg": true, "state.top": true,
	"state.single": true, "state.highstate": true, "state.template": true,
	"state.template_str": true, "state.apply": true, "state.test": true,
	"state.request": true, "state.check_request": true, "state.run_request": true,
}

// FunctionOutputter is the outputter Salt prints fun's return with when no
// --out is given: highstate for the state functions that run states
// (state.apply, sls, highstate, single, test, ...), nested for every other,
// state.show_* and state.running included.
func FunctionOutputter(fun string) string {
	if stateFunctions[fun] {
		return "highstate"
	}
	return "nested"
}

// ReturnOutputter is the outputter for one return of fun, as Salt picks it
// (get_printout in salt/output/__init__.py): --out when given (out != "",
// and not "highstate", which Salt reads as "the function's own"); else the
// function's, except that a failed job whose return is a string (the
// function raised, or is not available) prints nested, as the minion then
// sets out to nested (salt/minion.py _thread_return).
func ReturnOutputter(out, fun string, ret any, ok bool) string {
	if out != "" && out != "highstate" {
		return out
	}
	if _, isString := ret.(string); isString && !ok {
		return "nested"
	}
	return FunctionOutputter(fun)
}

// errFallback says the data is not what the highstate outputter reads:
// Salt falls back to nested.
var errFallback = errors.New("not a highstate return")

func renderHighstate(v any, opts Options) (string, error) {
	st := DefaultStateOptions()
	if opts.State != nil {
		st = *opts.State
	}
	h := &highstate{opts: st, color: opts.Color}
	text, err := h.output(v, 1)
	if err != nil {
		return renderNested(v, Options{Color: opts.Color})
	}
	return text, nil
}

type highstate struct {
	opts  StateOptions
	color bool
}

// c returns the colour code when colouring, else "".
func (h *highstate) c(code string) string {
	if h.color {
		return code
	}
	return ""
}

func (h *highstate) endc() string { return h.c(colorReset) }

// output is highstate.output: it unwraps the envelopes of orchestrate and
// lookup_jid data, then formats each host.
func (h *highstate) output(data any, level int) (string, error) {
	if d, ok := data.(*dict); ok {
		if v, ok := d.get("return"); ok {
			data = v
		}
	}
	if d, ok := data.(*dict); ok {
		if v, ok := d.get("data"); ok {
			data = v
		}
	}
	if d, ok := data.(*dict); ok && len(d.keys) == 1 {
		if inner, ok := d.vals[0].(*dict); ok && inner.has("jid") && inner.has("fun") {
			r, ok := inner.get("return")
			if !ok {
				r = &dict{}
			}
			rd, ok := r.(*dict)
			if !ok {
				return "", errFallback
			}
			if v, ok := rd.get("data"); ok {
				data = v
			}
		}
	}
	switch x := data.(type) {
	case string:
		return x, nil
	case nil:
		return "None", nil
	case *dict:
		return h.hosts(x, level)
	}
	// An int (or bool) is returned as is by Salt and its rstrip fails;
	// anything else has no keys().
	return "", errFallback
}

func (h *highstate) hosts(data *dict, level int) (string, error) {
	var masters int
	for _, k := range data.keys {
		if s, ok := k.(string); ok && strings.HasSuffix(s, "_master") {
			masters++
		}
	}
	if data.has("retcode") && masters == 1 {
		data = data.without("retcode") // orchestrate's retcode
	}
	if h.opts.CompressIDs {
		data = compressIDs(data)
	}
	var out []string
	for i, k := range data.keys {
		s, _, err := h.formatHost(saltdata.Str(k), data.vals[i], level)
		if err != nil {
			return "", err
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n"), nil
}

// rkey is a state's result as a key of Salt's rcounts: Python's 1 and
// True, 0 and False are one key.
func rkey(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64, uint64, *big.Int, float64:
		if f, ok := num(x); ok {
			switch f {
			case 1:
				return "True"
			case 0:
				return "False"
			}
		}
	}
	return "other:" + saltdata.Repr(v)
}

// formatHost is highstate._format_host: the host's lines and whether
// anything changed.
func (h *highstate) formatHost(host string, data any, level int) (string, bool, error) {
	hcolor := h.c(colorGreen)
	var hstrs []string
	nchanges := 0
	endc := h.endc()
	switch x := data.(type) {
	case bool, int64, uint64, *big.Int:
		nchanges = 1
		hstrs = append(hstrs, hcolor+"    "+stripEscapes(saltdata.Str(x))+endc)
		hcolor = h.c(colorCyan)
	case string:
		// Data in this format is from saltmod.function: a change.
		nchanges = 1
		for _, l := range splitLines(x) {
			hstrs = append(hstrs, hcolor+"    "+stripEscapes(l)+endc)
		}
		hcolor = h.c(colorCyan)
	case list:
		hcolor = h.c(colorLightRed)
		hstrs = append(hstrs, "    "+hcolor+"Data failed to compile:"+endc)
		for _, e := range x {
			hstrs = append(hstrs, hcolor+"----------\n    "+stripEscapes(saltdata.Str(e))+endc)
		}
	case *dict:
		var err error
		hstrs, nchanges, hcolor, err = h.formatStates(host, x, hcolor, level)
		if err != nil {
			return "", false, err
		}
	}
	hstrs = slices.Insert(hstrs, 0, hcolor+stripEscapes(host)+":"+endc)
	return strings.Join(hstrs, "\n"), nchanges > 0, nil
}

// formatStates is the dict case of _format_host: the states, then the
// summary.
func (h *highstate) formatStates(host string, data *dict, hcolor string, level int) ([]string, int, string, error) {
	var hstrs []string
	endc := h.endc()
	// Verify that the needed data is present.
	tmp := &dict{}
	for i, k := range data.keys {
		info, ok := data.vals[i].(*dict)
		if !ok {
			continue
		}
		if k != "changes" && len(info.keys) > 0 && !info.has("__run_num__") {
			hstrs = slices.Insert(hstrs, 0,
				"The State execution failed to record the order in which all states were executed. The state return missing data is:",
				stripEscapes(pyPformat(info)))
		}
		if info.has("result") {
			tmp.keys = append(tmp.keys, k)
			tmp.vals = append(tmp.vals, info)
		}
	}
	order, err := runOrder(tmp)
	if err != nil {
		return nil, 0, "", err
	}
	rcounts := map[string]int{}
	var rorder []string // rcounts' keys in insertion order, for Python's sum
	count := func(k string, n int) {
		if _, ok := rcounts[k]; !ok {
			rorder = append(rorder, k)
		}
		rcounts[k] += n
	}
	var rdurations, pdurations []float64
	nchanges := 0
	for _, i := range order {
		tname := saltdata.Str(tmp.keys[i])
		ret := tmp.vals[i].(*dict)
		result, _ := ret.get("result")
		compressed := 1
		if h.opts.CompressIDs && strings.Contains(tname, "_|-state_compressed_") {
			parts := strings.Split(tname, "_|-")
			if len(parts) != 4 {
				return nil, 0, "", errFallback // Salt: ValueError, a traceback
			}
			if m := compressedCount.FindStringSubmatch(parts[1]); m != nil {
				compressed, _ = strconv.Atoi(m[1])
			}
		}
		count(rkey(result), compressed)
		dur, ok, err := durationOf(ret)
		if err != nil {
			return nil, 0, "", err
		}
		if ok {
			if ret.has("__parallel__") {
				pdurations = append(pdurations, dur)
			} else {
				rdurations = append(rdurations, dur)
			}
		}

		tcolor := h.c(colorGreen)
		changes, hasChanges := ret.get("changes")
		name, _ := ret.get("name")
		var schanged bool
		var ctext string
		if n, ok := name.(string); ok && (n == "state.orch" || n == "state.orchestrate" || n == "state.sls") {
			if !hasChanges {
				return nil, 0, "", errFallback
			}
			nested, err := h.output(changes, level+1)
			if err != nil {
				return nil, 0, "", err
			}
			pad := strings.Repeat(" ", 14*level)
			lines := strings.Split("\n"+nested, "\n")
			for j := range lines {
				lines[j] = pad + lines[j]
			}
			ctext = strings.Join(lines, "\n")
			schanged = true
			nchanges++
		} else {
			if !hasChanges {
				return nil, 0, "", errFallback // KeyError
			}
			schanged, ctext, err = h.formatChanges(changes)
			if err != nil {
				return nil, 0, "", err
			}
			if schanged && compressed > 1 {
				n := 1
				if cd, ok := changes.(*dict); ok {
					if cc, ok := cd.get("compressed changes"); ok {
						if l := pyLen(cc); l > 0 {
							n = l
						}
					}
				}
				nchanges += n
			} else if schanged {
				nchanges++
			}
		}
		ok = pyTruthy(result)
		if h.opts.Diff && ok && !schanged {
			continue
		}
		if !h.opts.Verbose && ok && !schanged {
			continue
		}
		if schanged {
			tcolor = h.c(colorCyan)
		}
		if result == false {
			hcolor, tcolor = h.c(colorRed), h.c(colorRed)
		}
		if result == nil {
			hcolor, tcolor = h.c(colorLightYellow), h.c(colorLightYellow)
		}
		stateOutput := strings.ToLower(h.opts.Output)
		comps := strings.Split(tname, "_|-")
		if len(comps) < 4 {
			return nil, 0, "", errFallback // Salt: IndexError, a traceback
		}
		for j := range comps {
			comps[j] = stripEscapes(comps[j])
		}
		if strings.HasSuffix(stateOutput, "_id") {
			comps[2] = comps[1] // the ID for the name (Salt #35137)
		}
		terse := false
		if strings.HasPrefix(stateOutput, "filter") {
			tl, err := filterList(h.opts.Terse)
			if err != nil {
				return nil, 0, "", err
			}
			el, err := filterList(h.opts.Exclude)
			if err != nil {
				return nil, 0, "", err
			}
			rs := saltdata.Str(result)
			if slices.Contains(tl, rs) {
				terse = true
			} else if slices.Contains(el, rs) {
				continue
			}
		} else {
			terse = strings.HasPrefix(stateOutput, "terse") ||
				strings.HasPrefix(stateOutput, "mixed") && result != false ||
				strings.HasPrefix(stateOutput, "changes") && ok && !schanged
		}
		if terse {
			msg, err := h.formatTerse(tcolor, comps, ret)
			if err != nil {
				return nil, 0, "", err
			}
			hstrs = append(hstrs, msg)
			continue
		}
		lines, err := h.fullState(tcolor, comps, ret, ctext)
		if err != nil {
			return nil, 0, "", err
		}
		hstrs = append(hstrs, lines...)
		if w, ok := ret.get("warnings"); ok {
			count("warnings", 1)
			text, err := joinWarnings(w)
			if err != nil {
				return nil, 0, "", err
			}
			hstrs = append(hstrs, "   "+h.c(colorLightRed)+" Warnings: "+
				strings.TrimLeft(wrapText(stripEscapes(text), 80, strings.Repeat(" ", 14)), pyWhitespace)+endc)
		}
	}
	hstrs = append(hstrs, h.summary(host, rcounts, rorder, nchanges, rdurations, pdurations)...)
	return hstrs, nchanges, hcolor, nil
}

var compressedCount = regexp.MustCompile(`\((\d+)\)$`)

// fullState is a state's block in full output.
func (h *highstate) fullState(tcolor string, comps []string, ret *dict, ctext string) ([]string, error) {
	endc := h.endc()
	result, _ := ret.get("result")
	c, ok := ret.get("comment")
	if !ok {
		return nil, errFallback // KeyError
	}
	comment, ok := c.(string)
	if !ok {
		comment = saltdata.Str(c)
	}
	comment = strings.ReplaceAll(strings.Trim(comment, pyWhitespace), "\n", "\n"+strings.Repeat(" ", 14))
	if d, ok := ret.get("data"); ok {
		switch x := d.(type) {
		case list:
			for _, item := range x {
				comment += " " + saltdata.Str(item)
			}
		case *dict:
			for i, k := range x.keys {
				comment += "\n\t\t" + saltdata.Str(k) + ": " + saltdata.Str(x.vals[i])
			}
		default:
			comment += " " + saltdata.Str(d)
		}
	}
	lines := []string{
		tcolor + "----------" + endc,
		"    " + tcolor + "      ID: " + comps[1] + endc,
		"    " + tcolor + "Function: " + comps[0] + "." + comps[3] + endc,
		"    " + tcolor + "  Result: " + saltdata.Str(result) + endc,
		"    " + tcolor + " Comment: " + stripEscapes(comment) + endc,
	}
	if start, ok := ret.get("start_time"); ok && h.opts.Profile {
		// setdefault("duration", ""), then " ms" after anything but "".
		d := ""
		if dur, ok := ret.get("duration"); ok && dur != "" {
			d = saltdata.Str(dur) + " ms"
		}
		lines = append(lines,
			"    "+tcolor+" Started: "+stripEscapes(saltdata.Str(start))+endc,
			"    "+tcolor+"Duration: "+stripEscapes(d)+endc)
	}
	if comps[1] != comps[2] {
		lines = slices.Insert(lines, 3, "    "+tcolor+"    Name: "+comps[2]+endc)
	}
	lines = append(lines, tcolor+"     Changes:   "+ctext+endc)
	return lines, nil
}

// formatTerse is highstate._format_terse: one line for a state.
func (h *highstate) formatTerse(tcolor string, comps []string, ret *dict) (string, error) {
	endc := h.endc()
	changes, _ := ret.get("changes")
	result, _ := ret.get("result")
	word := "Clean"
	if pyTruthy(changes) {
		word = "Changed"
	}
	if result == false {
		word = "Failed"
	} else if result == nil {
		word = "Differs"
	}
	var b strings.Builder
	if w, ok := ret.get("warnings"); ok {
		text, err := joinWarnings(w)
		if err != nil {
			return "", err
		}
		b.WriteString(h.c(colorLightRed) + "Warnings:\n" + stripEscapes(text) + endc)
		if h.opts.Tabular {
			b.WriteString("\n")
		}
	}
	start, hasStart := ret.get("start_time")
	profile := h.opts.Profile && hasStart
	var dur string
	if profile {
		d, ok := ret.get("duration")
		if !ok {
			return "", errFallback // KeyError in str.format
		}
		dur = stripEscapes(saltdata.Str(d))
	}
	if h.opts.Tabular {
		b.WriteString(tcolor)
		if profile {
			b.WriteString(stripEscapes(saltdata.Str(start)) + " [" + padLeft(dur, 7) + " ms] ")
		}
		b.WriteString(padLeft(comps[0], 10) + "." + padRight(comps[len(comps)-1], 10) + " " + padRight(word, 7) + "   Name: " + comps[2] + endc)
		return b.String(), nil
	}
	b.WriteString(" " + tcolor + " Name: " + comps[2] + " - Function: " + comps[0] + "." + comps[len(comps)-1] + " - Result: " + word)
	if profile {
		b.WriteString(" - Started: " + stripEscapes(saltdata.Str(start)) + " - Duration: " + dur + " ms")
	}
	b.WriteString(endc)
	return b.String(), nil
}

// formatChanges is highstate._format_changes.
func (h *highstate) formatChanges(changes any) (bool, string, error) {
	if !pyTruthy(changes) {
		return false, "", nil
	}
	d, ok := changes.(*dict)
	if !ok {
		return true, "Invalid Changes data: " + stripEscapes(saltdata.Str(changes)), nil
	}
	ret, _ := d.get("ret")
	out, _ := d.get("out")
	if ret != nil && out == "highstate" {
		rd, ok := ret.(*dict)
		if !ok {
			return false, "", errFallback // AttributeError: no items()
		}
		var b strings.Builder
		changed := false
		for i, k := range rd.keys {
			s, c, err := h.formatHost(saltdata.Str(k), rd.vals[i], 1)
			if err != nil {
				return false, "", err
			}
			b.WriteString("\n")
			for j, l := range splitLines(s) {
				if j > 0 {
					b.WriteString("\n")
				}
				b.WriteString(strings.Repeat(" ", 14) + l)
			}
			changed = changed || c
		}
		return changed, b.String(), nil
	}
	nested, _ := renderNested(changes, Options{Color: h.color, Indent: 14})
	return true, "\n" + strings.TrimRight(nested, pyWhitespace), nil
}

// summary is the "Summary for <host>" block.
func (h *highstate) summary(host string, rcounts map[string]int, rorder []string, nchanges int, rdurations, pdurations []float64) []string {
	endc := h.endc()
	countMax := 0
	total := 0
	for _, k := range rorder {
		countMax = max(countMax, len(strconv.Itoa(rcounts[k])))
		total += rcounts[k]
	}
	const labelMax = len("Succeeded")
	lineMax := labelMax + countMax + 2
	counts := func(label, count string) string {
		return label + ": " + padLeft(count, lineMax-(utf8.RuneCountInString(label)+2))
	}
	dashes := strings.Repeat("-", lineMax)
	out := []string{h.c(colorCyan) + "\nSummary for " + stripEscapes(host) + "\n" + dashes + endc}
	var stats []string
	if rcounts["None"] > 0 {
		stats = append(stats, h.c(colorLightYellow)+"unchanged="+strconv.Itoa(rcounts["None"])+endc)
	}
	if nchanges > 0 {
		stats = append(stats, h.c(colorGreen)+"changed="+strconv.Itoa(nchanges)+endc)
	}
	changestats := ""
	if len(stats) > 0 {
		changestats = " (" + strings.Join(stats, ", ") + ")"
	}
	succeeded := rcounts["True"] + rcounts["None"]
	out = append(out, h.c(colorGreen)+counts("Succeeded", strconv.Itoa(succeeded))+endc+changestats)
	failed := rcounts["False"]
	fcolor := h.c(colorCyan)
	if failed > 0 {
		fcolor = h.c(colorRed)
	}
	out = append(out, fcolor+counts("Failed", strconv.Itoa(failed))+endc)
	run := total - rcounts["warnings"]
	if h.opts.Pct && run != 0 {
		out = append(out,
			h.c(colorGreen)+counts("Success %", pyRound2(float64(succeeded)/float64(run)*100))+endc,
			fcolor+counts("Failure %", pyRound2(float64(failed)/float64(run)*100))+endc)
	}
	if w := rcounts["warnings"]; w > 0 {
		out = append(out, h.c(colorLightRed)+counts("Warnings", strconv.Itoa(w))+endc)
	}
	out = append(out, h.c(colorCyan)+dashes+"\nTotal states run: "+padLeft(strconv.Itoa(run), lineMax-7)+endc)
	if h.opts.Profile {
		sum := 0.0
		for _, d := range rdurations {
			sum += d
		}
		if len(pdurations) > 0 {
			sum += slices.Max(pdurations)
		}
		unit := "ms"
		if sum > 999 {
			sum /= 1000
			unit = "s"
		}
		out = append(out, h.c(colorCyan)+"Total run time: "+padLeft(strconv.FormatFloat(sum, 'f', 3, 64), lineMax-5)+" "+unit+endc)
	}
	return out
}

// runOrder is the order Salt prints the states in: sorted (stably) by
// __run_num__, 0 when absent. Values Python cannot compare with each other
// (None, or numbers beside strings) are Salt's TypeError.
func runOrder(d *dict) ([]int, error) {
	idx := make([]int, len(d.keys))
	keys := make([]any, len(d.keys))
	strs, nums := 0, 0
	for i := range d.keys {
		idx[i] = i
		v, ok := d.vals[i].(*dict).get("__run_num__")
		if !ok {
			v = int64(0)
		}
		switch v.(type) {
		case string:
			strs++
		case bool, int64, uint64, *big.Int, float64:
			nums++
		}
		keys[i] = v
	}
	if len(keys) > 1 && strs+nums != len(keys) || strs > 0 && nums > 0 {
		return nil, errFallback
	}
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := idx[i], idx[j]
		if strs > 0 {
			return keys[a].(string) < keys[b].(string)
		}
		return compareNumbers(boolNum(keys[a]), boolNum(keys[b])) < 0
	})
	return idx, nil
}

func boolNum(v any) any {
	if b, ok := v.(bool); ok {
		if b {
			return int64(1)
		}
		return int64(0)
	}
	return v
}

// num is a number's value as a float64.
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	case float64:
		return x, true
	}
	return 0, false
}

// durationOf is float(ret.get("duration", 0)), and for a string that is
// not a number, the number before " ms"; a string that is neither is
// skipped (Salt logs it), anything else is Salt's TypeError.
func durationOf(ret *dict) (float64, bool, error) {
	v, ok := ret.get("duration")
	if !ok {
		return 0, true, nil
	}
	if f, ok := num(v); ok {
		return f, true, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, false, errFallback
	}
	if f, ok := pyFloat(s); ok {
		return f, true, nil
	}
	before, _, _ := strings.Cut(s, " ms")
	if f, ok := pyFloat(before); ok {
		return f, true, nil
	}
	return 0, false, nil
}

// pyFloat is Python's float() of a string.
func pyFloat(s string) (float64, bool) {
	s = strings.Trim(s, pyWhitespace)
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "infinity", "inf", "nan":
	default:
		if strings.ContainsAny(strings.ToLower(s), "xp_") {
			return 0, false // hex floats and underscores: not Python's
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true
}

// pyRound2 is str(round(f, 2)).
func pyRound2(f float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 2, 64), 64)
	return string(saltdata.AppendFloat(nil, r))
}

// pyRound3 is round(f, 3).
func pyRound3(f float64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return r
}

// filterList is the list of results of state_output filter's exclude or
// terse: a string split at commas, a list's strings, a dict's string keys
// (what Python's "in" tests); anything else is Salt's TypeError.
func filterList(v any) ([]string, error) {
	var out []string
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Split(x, ","), nil
	case []string:
		return x, nil
	case []any:
		return filterList(list(x))
	case list:
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	case map[string]any:
		for k := range x {
			out = append(out, k)
		}
	case *dict:
		for _, k := range x.keys {
			if s, ok := k.(string); ok {
				out = append(out, s)
			}
		}
	default:
		return nil, errFallback
	}
	return out, nil
}

// joinWarnings is "\n".join(ret["warnings"]).
func joinWarnings(w any) (string, error) {
	switch x := w.(type) {
	case string:
		return strings.Join(strings.Split(x, ""), "\n"), nil
	case list:
		parts := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return "", errFallback
			}
			parts[i] = s
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", errFallback
}

// pyWhitespace is what Python's str.strip() removes (ASCII and the
// separators \x1c to \x1f; other Unicode spaces are rare in comments).
const pyWhitespace = " \t\n\r\v\f\x1c\x1d\x1e\x1f\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"

// wrapText is textwrap.fill(text, width, initial_indent=indent,
// subsequent_indent=indent) for Salt's warnings: white space becomes
// spaces, lines break between words, a word longer than a line is cut.
// (Python also breaks after hyphens; this does not.)
func wrapText(text string, width int, indent string) string {
	text = strings.ReplaceAll(text, "\t", "        ")
	words := strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(pyWhitespace, r) })
	var lines []string
	line := ""
	room := width - len(indent)
	for _, w := range words {
		for utf8.RuneCountInString(w) > room {
			if line != "" {
				if n := room - utf8.RuneCountInString(line) - 1; n > 0 {
					r := []rune(w)
					line += " " + string(r[:n])
					w = string(r[n:])
				}
				lines = append(lines, line)
				line = ""
				continue
			}
			r := []rune(w)
			lines = append(lines, string(r[:room]))
			w = string(r[room:])
		}
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= room:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	for i := range lines {
		lines[i] = indent + lines[i]
	}
	return strings.Join(lines, "\n")
}

func padLeft(s string, w int) string {
	if n := w - utf8.RuneCountInString(s); n > 0 {
		return strings.Repeat(" ", n) + s
	}
	return s
}

func padRight(s string, w int) string {
	if n := w - utf8.RuneCountInString(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

// pyTruthy is Python's bool() of a value.
func pyTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []byte:
		return len(x) > 0
	case list:
		return len(x) > 0
	case *dict:
		return len(x.keys) > 0
	}
	if f, ok := num(v); ok {
		return f != 0
	}
	return true
}

// pyLen is len() of a container, 0 for anything else.
func pyLen(v any) int {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x)
	case list:
		return len(x)
	case *dict:
		return len(x.keys)
	}
	return 0
}

// get returns the value of the string key k.
func (d *dict) get(k string) (any, bool) {
	for i, key := range d.keys {
		if s, ok := key.(string); ok && s == k {
			return d.vals[i], true
		}
	}
	return nil, false
}

func (d *dict) has(k string) bool {
	_, ok := d.get(k)
	return ok
}

// without returns a copy of d without the string key k.
func (d *dict) without(k string) *dict {
	out := &dict{ordered: d.ordered}
	for i, key := range d.keys {
		if s, ok := key.(string); ok && s == k {
			continue
		}
		out.keys = append(out.keys, key)
		out.vals = append(out.vals, d.vals[i])
	}
	return out
}

// set sets the string key k, appending it when new.
func (d *dict) set(k string, v any) {
	for i, key := range d.keys {
		if s, ok := key.(string); ok && s == k {
			d.vals[i] = v
			return
		}
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

func (d *dict) clone() *dict {
	return &dict{keys: slices.Clone(d.keys), vals: slices.Clone(d.vals), ordered: d.ordered}
}

// compressIDs is highstate._compress_ids (state_compress_ids): per host,
// the states of one module, ID, SLS and result become one, keyed
// "<mod>_|-<ID> (<count>)_|-state_compressed_<sls>_<ID>_<result>_|-<fun>",
// with the lowest __run_num__, the summed duration, the earliest start
// and the changes by name under "compressed changes". Data it cannot
// compress is returned as it is, as Salt does.
func compressIDs(data *dict) *dict {
	out := &dict{ordered: true}
	for i, hk := range data.keys {
		hostdata, ok := data.vals[i].(*dict)
		if !ok {
			return data
		}
		groupKey := func(tname string, info *dict) (string, bool) {
			id, ok1 := info.get("__id__")
			sls, ok2 := info.get("__sls__")
			res, ok3 := info.get("result")
			if !ok1 || !ok2 || !ok3 {
				return "", false
			}
			mod, _, _ := strings.Cut(tname, "_|-")
			return strings.Join([]string{mod, saltdata.Str(id), saltdata.Str(sls), saltdata.Str(res)}, "_"), true
		}
		counts := map[string]int{}
		for j, tk := range hostdata.keys {
			info, ok := hostdata.vals[j].(*dict)
			if !ok {
				return data
			}
			g, ok := groupKey(saltdata.Str(tk), info)
			if !ok {
				return data
			}
			counts[g]++
		}
		host := &dict{ordered: true}
		index := map[string]int{}
		for j, tk := range hostdata.keys {
			tname := saltdata.Str(tk)
			info := hostdata.vals[j].(*dict)
			g, _ := groupKey(tname, info)
			if counts[g] == 1 {
				host.set(tname, info)
				continue
			}
			comps := strings.Split(tname, "_|-")
			if len(comps) < 3 {
				return data // IndexError
			}
			id, _ := info.get("__id__")
			sls, _ := info.get("__sls__")
			res, _ := info.get("result")
			comps[2] = strings.Join([]string{"state_compressed", saltdata.Str(sls), saltdata.Str(id), saltdata.Str(res)}, "_")
			comps[1] = fmt.Sprintf("%s (%d)", saltdata.Str(id), counts[g])
			tname = strings.Join(comps, "_|-")
			at, seen := index[tname]
			if !seen {
				index[tname] = len(host.keys)
				host.set(tname, info.clone())
				continue
			}
			c := host.vals[at].(*dict)
			rn1, ok1 := info.get("__run_num__")
			rn2, ok2 := c.get("__run_num__")
			d1, ok3 := info.get("duration")
			d2, ok4 := c.get("duration")
			s1, ok5 := info.get("start_time")
			s2, ok6 := c.get("start_time")
			if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
				return data // KeyError
			}
			f1, okf1 := num(rn1)
			f2, okf2 := num(rn2)
			df1, okd1 := num(d1)
			df2, okd2 := num(d2)
			ss1, oks1 := s1.(string)
			ss2, oks2 := s2.(string)
			if !okf1 || !okf2 || !okd1 || !okd2 || !oks1 || !oks2 {
				return data // TypeError
			}
			if f1 < f2 {
				c.set("__run_num__", rn1)
			}
			c.set("duration", pyRound3(df1+df2))
			c.set("start_time", min(ss1, ss2))
			cname, _ := c.get("name")
			iname, _ := info.get("name")
			cch, _ := c.get("changes")
			ich, _ := info.get("changes")
			if pyTruthy(cch) && pyTruthy(ich) {
				cchd, ok := cch.(*dict)
				if !ok {
					return data // AttributeError: no get()
				}
				if cc, _ := cchd.get("compressed changes"); !pyTruthy(cc) {
					cchd = &dict{keys: []any{"compressed changes"},
						vals: []any{&dict{keys: []any{saltdata.Str(cname)}, vals: []any{cch}}}}
				} else {
					cchd = cchd.clone()
				}
				v, _ := cchd.get("compressed changes")
				ccd, ok := v.(*dict)
				if !ok {
					return data
				}
				ccd = ccd.clone()
				ccd.set(saltdata.Str(iname), ich)
				cchd.set("compressed changes", ccd)
				c.set("changes", cchd)
			} else if pyTruthy(ich) {
				c.set("changes", &dict{keys: []any{"compressed changes"},
					vals: []any{&dict{keys: []any{saltdata.Str(iname)}, vals: []any{ich}}}})
			}
		}
		out.keys = append(out.keys, hk)
		out.vals = append(out.vals, host)
	}
	return out
}
