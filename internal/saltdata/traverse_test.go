package saltdata

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTraverse pins Salt's traverse_dict_and_list (salt/utils/data.py,
// Salt 3006): a dict is indexed by the key, then by the key YAML-loaded
// (yamlify_arg: "1" becomes 1, "catches integer/float dict keys"); a list by
// an integer key through its embedded dicts first, then by position; by any
// other key through its first embedded dict that has it; a str or a number
// has no parts (TypeError: the default).
func TestTraverse(t *testing.T) {
	grains := map[string]any{
		"ip_interfaces": map[string]any{"eth0": []any{"10.0.0.5", "fe80::1"}},
		"os_family":     "Debian",
		"roles":         []string{"web", "db"},
		"env":           map[string]string{"site": "lyon"},
		"ports":         map[any]any{80: "http", int64(443): "https", uint64(8080): "alt", "22": "ssh-str", 22: "ssh-int"},
		"disks":         []any{map[string]any{"name": "sda"}, map[string]any{"size": 512}},
		"mixed":         []any{"zero", "one", map[any]any{int64(0): "embedded zero"}},
		"empty":         map[string]any{"": "blank key"},
		"nested":        map[string]any{"a": map[string]any{"b": map[string]any{"c": true}}},
	}
	tests := []struct {
		path, delim string
		want        any
		ok          bool
	}{
		{"os_family", "", "Debian", true},
		{"nested:a:b:c", "", true, true},
		{"nested|a|b", "|", map[string]any{"c": true}, true},
		{"ip_interfaces:eth0:0", "", "10.0.0.5", true},
		{"ip_interfaces:eth0:-1", ":", "fe80::1", true},
		{"ip_interfaces:eth0:-3", "", nil, false},
		{"ip_interfaces:eth0:2", "", nil, false},
		{"ip_interfaces:eth0:x", "", nil, false},
		{"roles:1", "", "db", true},
		{"roles:web", "", nil, false},
		{"env:site", "", "lyon", true}, // a map[string]string is a dict
		{"ports:80", "", "http", true}, // int key (YAML)
		{"ports:443", "", "https", true},
		{"ports:8080", "", "alt", true},   // uint64 key (CBOR)
		{"ports:22", "", "ssh-str", true}, // the str key is tried first
		{"ports:+80", "", "http", true},   // int("+80") and YAML's +80 are 80
		{"ports:http", "", nil, false},    // not an int: only the str key
		{"disks:size", "", 512, true},     // first embedded dict with the key
		{"disks:name", "", "sda", true},
		{"disks:model", "", nil, false},
		{"disks:1", "", map[string]any{"size": 512}, true},
		{"mixed:0", "", "embedded zero", true}, // embedded dicts first for an int key
		{"mixed:1", "", "one", true},
		{"os_family:0", "", nil, false}, // a str has no parts
		{"os_family:x", "", nil, false},
		{"empty:", "", "blank key", true},
		{"missing", "", nil, false},
		{"nested:a:b:c:d", "", nil, false},
	}
	for _, tt := range tests {
		got, ok := Traverse(grains, tt.path, tt.delim)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("Traverse(%q, %q): got %v, %v, want %v, %v", tt.path, tt.delim, got, ok, tt.want, tt.ok)
		}
		// Step over ParseKeys is the same walk, for callers that compile
		// the path once.
		var ptr any = grains
		sok := true
		for _, k := range ParseKeys(tt.path, tt.delim) {
			if ptr, sok = Step(ptr, k); !sok {
				break
			}
		}
		if sok != tt.ok || (sok && !cmp.Equal(ptr, tt.want)) {
			t.Errorf("Step over ParseKeys(%q, %q): got %v, %v, want %v, %v", tt.path, tt.delim, ptr, sok, tt.want, tt.ok)
		}
	}
	if got, ok := Traverse(nil, "a", ""); ok {
		t.Errorf("Traverse(nil, a): got %v, true, want not found", got)
	}
}

// TestTraverseAgentGrains is agent/grains' former Lookup table (grains.get,
// config.get, Starlark's grains), now answered by Traverse.
func TestTraverseAgentGrains(t *testing.T) {
	g := map[string]any{
		"os":            "Debian",
		"ip_interfaces": map[string]any{"eth0": []any{"10.0.0.2", "fe80::1"}},
		"roles":         []any{"camera", map[string]any{"zone": "north"}},
		"yaml":          map[any]any{"a": 1, int64(7): "seven"},
		"plain":         []string{"x", "y"},
		"a.b":           map[string]any{"c": true},
	}
	tests := []struct {
		key, delim string
		want       any
		wantOK     bool
	}{
		{"os", "", "Debian", true},
		{"ip_interfaces:eth0:0", "", "10.0.0.2", true},
		{"ip_interfaces:eth0:-1", ":", "fe80::1", true},
		{"ip_interfaces:eth0:2", ":", nil, false},
		{"ip_interfaces:eth1", ":", nil, false},
		{"roles:zone", ":", "north", true},
		{"roles:site", ":", nil, false},
		{"yaml:a", ":", 1, true},
		{"yaml:7", ":", "seven", true},
		{"plain:1", ":", "y", true},
		{"os:x", ":", nil, false},
		{"a.b.c", ".", nil, false},
		{"a.b|c", "|", true, true},
		{"missing", ":", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, ok := Traverse(g, tt.key, tt.delim)
			if ok != tt.wantOK || !cmp.Equal(got, tt.want) {
				t.Errorf("Traverse(%q, %q): got %v, %v, want %v, %v", tt.key, tt.delim, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
