// Command halite-key manages the master's agent keys, like salt-key:
//
//	halite-key -L | -l STATE | -a GLOB | -A | -r GLOB | -R | -d GLOB | -D | -f GLOB | -F [-y] [--out json]
//
// Its output is salt-key's, with two additions: a pending key that came
// through a relay is marked with it ("d1 (via r1)"; with --out, a "relays"
// map of id to relay beside Salt's lists), and -L lists key files whose
// names are not valid agent ids (kept from before the id rule; the master
// refuses them) under "Invalid Keys" ("invalid" with --out). As salt-key,
// -a, -r and -d act on exactly the keys they showed before asking.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/complete"
	"github.com/halite-fleet/halite/internal/complete/fleet"
	"github.com/halite-fleet/halite/internal/output"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
)

type options struct {
	configDir  string
	action     string // list, list_state, accept, reject, delete, finger
	match      string
	yes        bool
	out        string
	inclRej    bool
	inclAcc    bool
	inclDen    bool
	quiet      bool
	genKeysDir string
}

// completion completes halite-key's flags and the ids their values name,
// from the key store through the master.
func completion(fs *pflag.FlagSet) complete.Spec {
	s := complete.Spec{Prog: "halite-key", Flags: fs, DirFlags: []string{"config-dir", "gen-keys-dir"}}
	s.Values = func(flag string, words []string) []string {
		dir := s.FlagValue(words, "config-dir", cli.DefaultConfigDir)
		switch flag {
		case "accept":
			return fleet.Keys(dir, "minions_pre", "minions_rejected", "minions_denied")
		case "reject":
			return fleet.Keys(dir, "minions_pre", "minions", "minions_denied")
		case "delete", "finger", "print":
			return fleet.Keys(dir)
		case "list":
			return []string{"accepted", "unaccepted", "pre", "rejected", "denied", "all"}
		}
		return complete.Common(flag)
	}
	return s
}

func main() { os.Exit(Main()) }

// Main runs the command with os.Args and returns its exit status.
func Main() int {
	fs := pflag.NewFlagSet("halite-key [-c CONFIG_DIR] -L | -l STATE | -a GLOB | -A | -r GLOB | -R | -d GLOB | -D | -f GLOB | -F [-y] [--out json]", pflag.ContinueOnError)
	var o options
	fs.StringVarP(&o.configDir, "config-dir", "c", cli.DefaultConfigDir, "the master's configuration directory")
	listAll := fs.BoolP("list-all", "L", false, "list every key")
	listState := fs.StringP("list", "l", "", "list keys in a state: acc[epted], pre|un[accepted], rej[ected], den[ied], all")
	accept := fs.StringP("accept", "a", "", "accept the pending keys matching GLOB")
	acceptAll := fs.BoolP("accept-all", "A", false, "accept every pending key")
	reject := fs.StringP("reject", "r", "", "reject the pending keys matching GLOB")
	rejectAll := fs.BoolP("reject-all", "R", false, "reject every pending key")
	del := fs.StringP("delete", "d", "", "delete the keys matching GLOB, in any state")
	delAll := fs.BoolP("delete-all", "D", false, "delete every key")
	finger := fs.StringP("finger", "f", "", "print the fingerprints of the keys matching GLOB")
	fingerAll := fs.BoolP("finger-all", "F", false, "print every key's fingerprint")
	printKey := fs.StringP("print", "p", "", "print the public keys matching GLOB")
	printAll := fs.BoolP("print-all", "P", false, "print every public key")
	genKeys := fs.String("gen-keys", "", "write a new agent key pair, NAME.pem and NAME.pub (the agent's key format, for preseeding), in --gen-keys-dir, and exit")
	fs.StringVar(&o.genKeysDir, "gen-keys-dir", ".", "the directory --gen-keys writes to")
	fs.BoolVarP(&o.yes, "yes", "y", false, "answer yes to every question")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print no results (questions are still asked; errors still go to standard error)")
	fs.StringVar(&o.out, "out", "", "output format: json, yaml, nested, txt, raw (default: salt-key's text)")
	fs.BoolVar(&o.inclRej, "include-rejected", false, "accept: also accept rejected keys")
	fs.BoolVar(&o.inclAcc, "include-accepted", false, "reject: also reject accepted keys")
	fs.BoolVar(&o.inclDen, "include-denied", false, "accept or reject: also act on denied keys")
	includeAll := fs.Bool("include-all", false, "accept or reject keys in every state")
	vf := cli.AddVersionFlags(fs)
	complete.AddFlag(fs)
	if done, code := completion(fs).Handle(os.Args[1:], os.Stdout, os.Stderr); done {
		return code
	}
	err := cli.ParseFlags(fs, os.Args[1:])
	if err == nil {
		err = vf.Print("halite-key", os.Stdout)
	}
	if err == nil {
		n := 0
		set := func(cond bool, action, match string) {
			if cond {
				n++
				o.action, o.match = action, match
			}
		}
		set(*listAll, "list", "all")
		set(*listState != "", "list", *listState)
		set(*accept != "", "accept", *accept)
		set(*acceptAll, "accept", "*")
		set(*reject != "", "reject", *reject)
		set(*rejectAll, "reject", "*")
		set(*del != "", "delete", *del)
		set(*delAll, "delete", "*")
		set(*finger != "", "finger", *finger)
		set(*fingerAll, "finger", "*")
		set(*printKey != "", "print", *printKey)
		set(*printAll, "print", "*")
		set(*genKeys != "", "gen_keys", *genKeys)
		switch {
		case n > 1:
			err = cli.Usagef("give one action at a time")
		case n == 0:
			o.action, o.match = "list", "all" // salt-key alone lists every key
		}
		if fs.NArg() > 0 {
			err = cli.Usagef("unexpected argument %q", fs.Arg(0))
		}
		if *includeAll {
			o.inclRej, o.inclAcc, o.inclDen = true, true, true
		}
		if o.out != "" && !output.Valid(o.out) {
			err = cli.Usagef("unknown output format %q", o.out)
		}
	}
	if err == nil {
		ctx, stop := cli.SignalContext()
		err = run(ctx, o, os.Stdin, os.Stdout, os.Stderr)
		stop()
	}
	return cli.Exit("halite-key", err, fs, os.Stderr)
}

// Salt's headings for each key state, in salt-key's order.
var headings = []struct{ key, title string }{
	{"minions", "Accepted Keys:"},
	{"minions_denied", "Denied Keys:"},
	{"minions_pre", "Unaccepted Keys:"},
	{"minions_rejected", "Rejected Keys:"},
}

func run(ctx context.Context, o options, stdin io.Reader, stdout, stderr io.Writer) error {
	if o.action == "gen_keys" {
		return genKeys(o.genKeysDir, o.match, stdout)
	}
	out := stdout // results; -q sends them nowhere (the question stays)
	if o.quiet {
		out = io.Discard
	}
	cfg, err := config.LoadMaster(o.configDir, func(config.Warning) {})
	if err != nil {
		return err
	}
	sock := cfg.SocketPath()
	wheel := func(fun string, arg ...any) (map[string]any, error) {
		res, err := api.Call(ctx, sock, &api.Request{Op: api.OpWheel, Fun: fun, Arg: arg})
		if err != nil {
			return nil, err
		}
		m, _ := res.(map[string]any)
		return m, nil
	}
	switch o.action {
	case "list":
		res, err := wheel("key.list", o.match)
		if err != nil {
			if api.IsCode(err, api.CodeBadRequest) {
				return cli.Usagef("%v", err)
			}
			return err
		}
		return printKeys(out, o.out, res)
	case "print":
		// The key outputter (salt/output/key.py): "id:  KEY" under each
		// state's heading; the key ends with a newline.
		res, err := wheel("key.print", o.match)
		if err != nil {
			return err
		}
		if o.out != "" {
			return output.Format(out, o.out, res, output.CLIOptions(o.out, nil, false))
		}
		relays, _ := res[keys.RelaysKey].(map[string]any)
		for _, h := range headings {
			ids, _ := res[h.key].(map[string]any)
			if len(ids) == 0 {
				continue
			}
			fmt.Fprintln(out, h.title)
			for _, id := range sortedKeys(ids) {
				fmt.Fprintf(out, "%s%s:  %v\n", id, viaSuffix(h.key, id, relays, " "), ids[id])
			}
		}
		return nil
	case "finger":
		res, err := wheel("key.finger", o.match)
		if err != nil {
			return err
		}
		local, err := wheel("key.finger_master")
		if err != nil {
			return err
		}
		if o.out != "" {
			res["local"] = local["local"]
			return output.Format(out, o.out, res, output.CLIOptions(o.out, nil, false))
		}
		if l, _ := local["local"].(map[string]any); len(l) > 0 && o.match == "*" {
			fmt.Fprintln(out, "Local Keys:")
			for _, k := range sortedKeys(l) {
				fmt.Fprintf(out, "%s:  %v\n", k, l[k])
			}
		}
		relays, _ := res[keys.RelaysKey].(map[string]any)
		for _, h := range headings {
			ids, _ := res[h.key].(map[string]any)
			if len(ids) == 0 {
				continue
			}
			fmt.Fprintln(out, h.title)
			for _, id := range sortedKeys(ids) {
				fmt.Fprintf(out, "%s:  %v%s\n", id, ids[id], viaSuffix(h.key, id, relays, "  "))
			}
		}
		return nil
	}

	// accept, reject, delete: show what will change, ask, then act.
	all, err := wheel("key.list_all")
	if err != nil {
		return err
	}
	var states []string
	switch o.action {
	case "accept":
		states = []string{"minions_pre"}
		if o.inclRej {
			states = append(states, "minions_rejected")
		}
		if o.inclDen {
			states = append(states, "minions_denied")
		}
	case "reject":
		states = []string{"minions_pre"}
		if o.inclAcc {
			states = append(states, "minions")
		}
		if o.inclDen {
			states = append(states, "minions_denied")
		}
	case "delete":
		states = []string{"minions", "minions_pre", "minions_rejected", "minions_denied"}
	}
	affected := map[string]any{}
	if r, ok := all[keys.RelaysKey]; ok {
		affected[keys.RelaysKey] = r
	}
	count := 0
	for _, st := range states {
		var ids []any
		lst, _ := all[st].([]any)
		for _, v := range lst {
			if id, _ := v.(string); keys.Matches(o.match, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			affected[st] = ids
			count += len(ids)
		}
	}
	if count == 0 {
		// Salt prints this on out and exits 0 (Key._print_no_match in
		// salt/key.py).
		fmt.Fprintf(out, "The key glob '%s' does not match any %s keys.\n", o.match, map[string]string{"accept": "unaccepted", "reject": "unaccepted", "delete": ""}[o.action])
		return nil
	}
	verb := map[string]string{"accept": "accepted", "reject": "rejected", "delete": "deleted"}[o.action]
	if !o.yes {
		fmt.Fprintf(stdout, "The following keys are going to be %s:\n", verb)
		printText(stdout, affected)
		fmt.Fprint(stdout, "Proceed? [n/Y] ")
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		ans := strings.ToLower(strings.TrimSpace(line))
		if ans != "" && ans != "y" && ans != "yes" {
			fmt.Fprintln(stdout, "Aborted; no key changed.")
			return nil
		}
		if ans == "" && line == "" {
			fmt.Fprintln(stdout)
			return fmt.Errorf("no answer on standard input; give -y to %s keys withstdout asking", o.action)
		}
	}
	// Act on the keys shown, by their exact ids, as salt-key does (Salt
	// 3006 salt/key.py KeyCLI.run passes match_dict): a key that came
	// after the question, matching the glob too, is left alone.
	shown := map[string]any{}
	for _, st := range states {
		if ids, ok := affected[st]; ok {
			shown[st] = ids
		}
	}
	var res map[string]any
	switch o.action {
	case "accept":
		res, err = wheel("key.accept_dict", shown, o.inclRej, o.inclDen)
	case "reject":
		res, err = wheel("key.reject_dict", shown, o.inclAcc, o.inclDen)
	case "delete":
		res, err = wheel("key.delete_dict", shown)
	}
	if err != nil {
		return err
	}
	if o.out != "" {
		return output.Format(out, o.out, res, output.CLIOptions(o.out, nil, false))
	}
	var ids []string
	for _, v := range res {
		lst, _ := v.([]any)
		for _, id := range lst {
			ids = append(ids, fmt.Sprint(id))
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(out, "Key for minion %s %s.\n", id, verb)
	}
	return nil
}

func printKeys(w io.Writer, out string, res map[string]any) error {
	if out != "" {
		for _, h := range headings {
			if _, ok := res[h.key]; !ok && len(res) == 4 {
				res[h.key] = []any{}
			}
		}
		return output.Format(w, out, res, output.CLIOptions(out, nil, false))
	}
	printText(w, res)
	return nil
}

// printText prints keys as salt-key does: a heading per state, one id a
// line; a pending id that came through a relay is followed by "(via R)",
// a proxy minion's by "(proxied by R)".
func printText(w io.Writer, res map[string]any) {
	relays, _ := res[keys.RelaysKey].(map[string]any)
	proxied, _ := res[keys.ProxiedKey].(map[string]any)
	for _, h := range headings {
		v, ok := res[h.key]
		if !ok {
			continue
		}
		fmt.Fprintln(w, h.title)
		lst, _ := v.([]any)
		for _, id := range lst {
			if r, ok := proxied[fmt.Sprint(id)]; ok {
				// A proxy minion: its key is held by the relay.
				fmt.Fprintf(w, "%v (proxied by %v)\n", id, r)
				continue
			}
			fmt.Fprintf(w, "%v%s\n", id, viaSuffix(h.key, fmt.Sprint(id), relays, " "))
		}
	}
	// Key files whose names are not valid ids: the master refuses them
	// and no command acts on them. Shown quoted, as directory/name, so
	// that odd characters are visible.
	if inv, _ := res[keys.InvalidKey].(map[string]any); len(inv) > 0 {
		fmt.Fprintln(w, "Invalid Keys (refused; remove these files under pki_dir by hand):")
		for _, dir := range sortedKeys(inv) {
			lst, _ := inv[dir].([]any)
			for _, name := range lst {
				fmt.Fprintf(w, "%q\n", dir+"/"+fmt.Sprint(name))
			}
		}
	}
}

// viaSuffix is what follows a pending id that came through a relay: sep
// and "(via RELAY)"; "" for any other.
func viaSuffix(state, id string, relays map[string]any, sep string) string {
	if state != keys.DirPending {
		return ""
	}
	if r, ok := relays[id]; ok {
		return sep + "(via " + fmt.Sprint(r) + ")"
	}
	return ""
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// genKeys is salt-key --gen-keys NAME [--gen-keys-dir DIR] (Key.gen_keys in
// salt/key.py): a new key pair in the agent's format, DIR/NAME.pem (0600)
// and DIR/NAME.pub, for preseeding: the .pub goes to the master's
// pki_dir/minions/ID, the .pem to the agent's pki_dir/minion.pem. It prints
// the new key's fingerprint. An existing NAME.pem is not overwritten.
func genKeys(dir, name string, stdout io.Writer) error {
	if name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return cli.Usagef("--gen-keys takes a file name without a directory, not %q", name)
	}
	id, created, err := protocol.LoadOrCreateIdentity(dir, name)
	if err != nil {
		return fmt.Errorf("gen keys: %w", err)
	}
	if !created {
		return fmt.Errorf("gen keys: %s already exists; not overwriting it", filepath.Join(dir, name+".pem"))
	}
	fmt.Fprintln(stdout, protocol.Fingerprint(id.Pub))
	return nil
}
