package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestForeignNames keeps masterOnlyOptions, the agent's copy of the master
// option names it does not share, equal to the master's table.
func TestForeignNames(t *testing.T) {
	var want []string
	for name := range masterRole().options {
		if agentRole.options[name] == nil {
			want = append(want, name)
		}
	}
	sort.Strings(want)
	got := strings.Fields(masterOnlyOptions)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("masterOnlyOptions (-want +got):\n%s\nwant:\n%s", diff, wrapWords(want))
	}
	for name := range agentRole.options {
		if masterRole().options[name] == nil && !masterRole().foreign[name] {
			t.Errorf("agent option %q is not known to the master as an agent option", name)
		}
	}
}

// wrapWords lays out words in lines of about 110 characters.
func wrapWords(words []string) string {
	var b strings.Builder
	n := 0
	for _, w := range words {
		if n > 0 && n+len(w) > 110 {
			b.WriteString("\n")
			n = 0
		} else if n > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// sampleValue returns a valid YAML value for o that differs from the
// default def, from the option's documented type.
func sampleValue[T any](t *testing.T, o *option[T], def *T) string {
	t.Helper()
	var d any
	if o.get != nil {
		d = o.get(def)
	}
	switch {
	case o.status == Refused:
		return "False"
	case o.set == nil:
		return "'some value'"
	case o.name == "publish_port":
		return "4505"
	}
	switch o.kind {
	case "string":
		return "/sample/" + o.name
	case "boolean":
		if d == true {
			return "False"
		}
		return "True"
	case "integer ≥ 0", "integer":
		return fmt.Sprint(d.(int) + 7)
	case "port":
		return "4999"
	case "log level":
		return "error"
	case "string or list of strings":
		if o.name == "master" {
			return "[m1, 'm2:4600']"
		}
		return "[a, b]"
	case "comma-separated string or list of strings":
		return "'a,b'"
	case "mapping of environment to directories":
		return "{base: [/x, /y]}"
	case "mapping":
		return "{k: v}"
	case "list":
		return "[{a: [b]}]"
	case "mapping, or list of one-key mappings":
		return "[{g1: 'L@a'}, {g2: 'G@os:x'}]"
	case "list of one-key mappings":
		return "[{cmd_json: 'echo {}'}]"
	case "agent id":
		return "sample-id"
	case "schedule: mapping of jobs":
		return "{ping: {function: test.ping, seconds: 60}}"
	case "mapping or list":
		return "{test.ping: []}"
	case "mapping (see below)":
		return "{port: 4600}"
	case "discovery mapping (see below)":
		return "{methods: [onvif]}"
	case "list of proxy minion mappings (see below)":
		return "[{id: gw1, proxytype: http, url: 'http://10.0.0.8/'}]"
	case "list of methods, or mapping of method to its options":
		return "[onvif]"
	case "bool or count":
		return "3"
	}
	var lo, hi int
	if _, err := fmt.Sscanf(o.kind, "integer %d to %d", &lo, &hi); err == nil {
		if d == lo {
			return fmt.Sprint(lo + 1)
		}
		return fmt.Sprint(lo)
	}
	if alts := strings.Split(o.kind, " | "); len(alts) > 1 {
		for _, a := range alts {
			if a != d {
				return a
			}
		}
	}
	t.Fatalf("option %s: no sample value for type %q", o.name, o.kind)
	return ""
}

// TestEveryOption sets each option of each table, alone, to a valid
// value: an implemented option must land in its field (the field differs
// from the default afterwards); any other must give exactly one warning
// naming the file, the line and the option.
func TestEveryOption(t *testing.T) {
	t.Run("master", func(t *testing.T) {
		everyOption(t, "master", masterRole().options, DefaultMaster, func(dir string, warn func(Warning)) (*Master, error) {
			return LoadMaster(dir, warn)
		})
	})
	t.Run("agent", func(t *testing.T) {
		everyOption(t, "agent", agentRole.options, DefaultAgent, func(dir string, warn func(Warning)) (*Agent, error) {
			return LoadAgent(dir, warn)
		})
	})
	t.Run("relay", func(t *testing.T) {
		for name, o := range relayOptions() {
			def := DefaultRelay()
			dir := writeDir(t, map[string]string{"agent": "relay:\n  " + name + ": " + sampleValue(t, o, def) + "\n"})
			a, err := LoadAgent(dir, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if reflect.DeepEqual(o.get(a.Relay), o.get(def)) {
				t.Errorf("relay option %s: field still holds the default %v", name, o.get(def))
			}
		}
	})
	t.Run("proxy", func(t *testing.T) {
		def := &Proxy{Timeout: 10, Line: 3}
		for name, o := range proxyOptions() {
			base := map[string]string{"id": "gw1", "proxytype": "http", "url": "'http://10.0.0.8/'"}
			if name == "proxytype" {
				base["proxytype"], base["host"], base["username"] = "onvif", "10.0.0.8", "u"
				delete(base, "url")
			}
			val := sampleValue(t, o, def)
			switch name {
			case "url":
				val = "'http://10.0.0.9/'"
			case "id":
				val = "gw2"
			}
			base[name] = val
			y := "relay:\n  proxy:\n    -"
			for k, v := range base {
				y += " " + k + ": " + v + "\n     "
			}
			dir := writeDir(t, map[string]string{"agent": y + "\n"})
			a, err := LoadAgent(dir, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if reflect.DeepEqual(o.get(&a.Relay.Proxies[0]), o.get(def)) {
				t.Errorf("proxy option %s: field still holds the default %v", name, o.get(def))
			}
		}
	})
	t.Run("discovery", func(t *testing.T) {
		for name, o := range discoveryOptions() {
			def := DefaultDiscovery()
			methods := "\n    methods: [mdns]"
			if name == "methods" {
				methods = ""
			}
			dir := writeDir(t, map[string]string{"agent": "relay:\n  discovery:\n    " + name + ": " + sampleValue(t, o, def) + methods + "\n"})
			a, err := LoadAgent(dir, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if reflect.DeepEqual(o.get(a.Relay.Discovery), o.get(def)) {
				t.Errorf("discovery option %s: field still holds the default %v", name, o.get(def))
			}
		}
	})
}

func everyOption[T any](t *testing.T, file string, tbl map[string]*option[T], def func() *T, load func(string, func(Warning)) (*T, error)) {
	t.Helper()
	for name, o := range tbl {
		val := sampleValue(t, o, def())
		// Line 2, after another option, so that the line is checked.
		dir := writeDir(t, map[string]string{file: "# the option is on line 2\n" + name + ": " + val + "\n"})
		warn, got := collect(dir)
		cfg, err := load(dir, warn)
		if err != nil {
			t.Errorf("%s: %s: %v", file, name, err)
			continue
		}
		if o.status == Implemented {
			if len(*got) != 0 {
				t.Errorf("%s: %s: %s: got warnings %q, want none", file, name, val, *got)
			}
			if o.get == nil {
				t.Errorf("%s: %s: implemented option has no field getter", file, name)
			} else if reflect.DeepEqual(o.get(cfg), o.get(def())) {
				t.Errorf("%s: %s: %s: field still holds the default %v", file, name, val, o.get(def()))
			}
			continue
		}
		prefix := fmt.Sprintf("%s:2: option %q ", file, name)
		if len(*got) != 1 || !strings.HasPrefix((*got)[0], prefix) {
			t.Errorf("%s: %s: got warnings %q, want one starting %q", file, name, *got, prefix)
		}
	}
}

// TestUnknownOptionWarnsOnce: an unknown option gives one warning naming
// file and line, in the main file and in a drop-in, for both daemons.
func TestUnknownOptionWarnsOnce(t *testing.T) {
	for _, role := range []string{"master", "agent"} {
		dir := writeDir(t, map[string]string{
			role:                  "log_level: info\nno_such_option: 1\n",
			role + ".d/10-x.conf": "\n\nalso_unknown: [1]\n",
		})
		warn, got := collect(dir)
		var err error
		if role == "master" {
			_, err = LoadMaster(dir, warn)
		} else {
			_, err = LoadAgent(dir, warn)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			role + `:2: unknown option "no_such_option"`,
			role + `.d/10-x.conf:3: unknown option "also_unknown"`,
		}
		if diff := cmp.Diff(want, *got); diff != "" {
			t.Errorf("%s warnings (-want +got):\n%s", role, diff)
		}
	}
}
