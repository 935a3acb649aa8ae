package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Pillar holds the master's pillar options (salt/config/__init__.py
// DEFAULT_MASTER_OPTS), read by master/pillar.
type Pillar struct {
	// Pillarenv, when set, is the only pillar environment read.
	Pillarenv string `yaml:"pillarenv"`
	// PillarSourceMergingStrategy is smart, recurse, overwrite, none or
	// aggregate.
	PillarSourceMergingStrategy string `yaml:"pillar_source_merging_strategy"`
	// PillarMergeLists joins lists when pillar sources merge.
	PillarMergeLists bool `yaml:"pillar_merge_lists"`
	// ExtPillar is ext_pillar: a list of one-key mappings {name: config}.
	ExtPillar []any `yaml:"ext_pillar"`
	// ExtPillarFirst compiles the external pillars before the SLS, which
	// then see them as pillar.
	ExtPillarFirst bool `yaml:"ext_pillar_first"`
	// PillarIncludesOverrideSLS lets included SLS override the including
	// file's values.
	PillarIncludesOverrideSLS bool `yaml:"pillar_includes_override_sls"`
	// PillarSafeRenderError keeps rendering errors' text out of the
	// devices' _errors (it is in the master's log).
	PillarSafeRenderError bool `yaml:"pillar_safe_render_error"`
	// PillarCacheTTL is how many seconds a device's compiled pillar is
	// kept before its next need compiles it again; 0: until something it
	// read changes.
	PillarCacheTTL int `yaml:"pillar_cache_ttl"`
}

// defaultPillar is Salt 3006's.
func defaultPillar() Pillar {
	return Pillar{PillarSourceMergingStrategy: "smart", PillarSafeRenderError: true, PillarCacheTTL: 3600}
}

// ExtPillarNames are the ext_pillar interfaces the master has
// (master/pillar.ExtNames).
var ExtPillarNames = []string{"cmd_json", "cmd_yaml", "file_tree", "postgres"}

func pillarOptions[T any](f func(*T) *Pillar) []option[T] {
	return []option[T]{
		optStr("pillarenv", func(t *T) *string { return &f(t).Pillarenv }, "read only this pillar environment's top file and SLS; unset: every environment's"),
		optOneOf("pillar_source_merging_strategy", func(t *T) *string { return &f(t).PillarSourceMergingStrategy }, []string{"smart", "recurse", "overwrite", "none", "aggregate"}, "how pillar sources merge: smart/recurse (key by key), overwrite (top-level keys replaced whole), none (base's top file only), aggregate (yamlex's, without its tags: top-level keys replaced)"),
		optBool("pillar_merge_lists", func(t *T) *bool { return &f(t).PillarMergeLists }, "join lists (without duplicates) when pillar sources merge, instead of replacing them"),
		optFunc("ext_pillar", "list of one-key mappings", func(t *T, v value) error { return v.extPillar(&f(t).ExtPillar) }, func(t *T) any { return f(t).ExtPillar }, "external pillars in order: cmd_json, cmd_yaml (a command, %s the device id), file_tree ({root_dir: ...}), postgres (queries; connection from the postgres: mapping)"),
		optBool("ext_pillar_first", func(t *T) *bool { return &f(t).ExtPillarFirst }, "compile the external pillars first; pillar SLS then see them as pillar"),
		optBool("pillar_includes_override_sls", func(t *T) *bool { return &f(t).PillarIncludesOverrideSLS }, "an included pillar SLS overrides the including file's values"),
		optBool("pillar_safe_render_error", func(t *T) *bool { return &f(t).PillarSafeRenderError }, "a pillar rendering error's text (file, line, reason) goes to the master's log only, the device's _errors says to look there"),
		optCount("pillar_cache_ttl", func(t *T) *int { return &f(t).PillarCacheTTL }, "seconds a device's compiled pillar is kept on the master before its next use compiles it again (it is compiled again at once when its files or grains change); 0: no limit"),
	}
}

// extPillar reads ext_pillar: a list of one-key mappings {interface:
// config}. A name Halite has no interface for loads (as in Salt, the
// master logs it and the pillar's _errors say so).
func (v value) extPillar(dst *[]any) error {
	n := v.node()
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("expected a list of one-key mappings {interface: config}, got %s", describe(n))
	}
	out := make([]any, 0, len(n.Content))
	for _, c := range n.Content {
		c = resolve(c)
		if c.Kind != yaml.MappingNode || len(c.Content) != 2 {
			return &atLine{c.Line, fmt.Sprintf("expected a list of one-key mappings {interface: config}, got a list holding %s", describeEntry(c))}
		}
		var one map[string]any
		if err := (value{n: c}).anyMap(&one); err != nil {
			return err
		}
		for name, conf := range one {
			if err := checkExtPillar(name, conf); err != nil {
				return &atLine{c.Line, err.Error()}
			}
		}
		out = append(out, one)
	}
	*dst = out
	return nil
}

// checkExtPillar checks the shape of the config of the interfaces
// Halite has.
func checkExtPillar(name string, conf any) error {
	switch name {
	case "cmd_json", "cmd_yaml":
		if s, ok := conf.(string); !ok || s == "" {
			return fmt.Errorf("%s: expected a command (a string), got %v", name, conf)
		}
	case "file_tree":
		m, ok := conf.(map[string]any)
		if !ok {
			return fmt.Errorf("file_tree: expected a mapping with root_dir, got %v", conf)
		}
		if s, _ := m["root_dir"].(string); s == "" {
			return fmt.Errorf("file_tree: root_dir is required")
		}
	case "postgres":
		switch conf.(type) {
		case []any, map[string]any, string:
		default:
			return fmt.Errorf("postgres: expected queries (a list or a mapping), got %v", conf)
		}
	}
	return nil
}
