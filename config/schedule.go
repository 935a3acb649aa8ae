package config

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// schedule reads the schedule: option, a mapping of job name to options,
// into dst, over what earlier files set (Salt merges the schedule of
// minion.d/_schedule.conf with the minion file's), and records in at the
// file and line of each job, for the scheduler's errors. The jobs
// themselves are checked by package schedule (the agent's and the master's), which knows the functions.
func (v value) schedule(dst *map[string]any, at *map[string]string) error {
	n := v.node()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of job names to their options, got %s", describe(n))
	}
	if *dst == nil {
		*dst = make(map[string]any)
	}
	if *at == nil {
		*at = make(map[string]string)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: expected a job name, got %s", k.Line, describe(k))
		}
		a, err := toAny(n.Content[i+1])
		if err != nil {
			return fmt.Errorf("job %s: %w", k.Value, err)
		}
		(*dst)[k.Value] = a
		(*at)[k.Value] = v.file + ":" + strconv.Itoa(k.Line)
	}
	return nil
}

// mineFunctions reads mine_functions: a mapping of function (or alias) to
// its arguments, or a list of function names (no arguments).
func (v value) mineFunctions(dst *map[string]any) error {
	n := v.node()
	switch n.Kind {
	case yaml.MappingNode:
		return v.anyMap(dst)
	case yaml.SequenceNode:
		var names []string
		if err := v.strList(&names, false); err != nil {
			return err
		}
		m := make(map[string]any, len(names))
		for _, s := range names {
			m[s] = []any{}
		}
		*dst = m
		return nil
	}
	return fmt.Errorf("expected a mapping of functions to their arguments, got %s", describe(n))
}
