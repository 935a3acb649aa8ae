package exec

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/grains"
)

func newPillarExecutor(t *testing.T, opts map[string]any, refresh func(bool) bool) *Executor {
	t.Helper()
	p := map[string]any{
		"pkg":      map[string]any{"apache": "httpd"},
		"abc::def": map[string]any{"ghi": "pipe"},
		"ports":    []any{int64(80), int64(443)},
		"role":     map[string]any{"n": map[string]any{"y": int64(2)}, "l": []any{"b"}},
		"secret":   "s3cret",
		"users":    []any{map[string]any{"name": "alice"}},
	}
	o := Options{ID: "cam-01", Grains: grains.New("cam-01", map[string]any{"os": "Linux"}, zap.NewNop()), Log: zap.NewNop(),
		Opts: opts, Pillar: func() map[string]any { return p }}
	if refresh != nil {
		o.RefreshPillar = func(_ context.Context, wait bool, _ time.Duration, _ bool) bool { return refresh(wait) }
	}
	return New(o)
}

// TestPillarFunctions pins pillar.* to salt/modules/pillar.py (get:
// traverse_dict_and_list with the delimiter, default "" unless
// pillar_raise_on_missing, merge through salt/utils/dictupdate.py update;
// item, raw, ls, obfuscate) and config.get's pillar store
// (salt/modules/config.py).
func TestPillarFunctions(t *testing.T) {
	e := newPillarExecutor(t, nil, nil)
	for _, tc := range []struct {
		fun    string
		args   []any
		kwargs map[string]any
		want   any
	}{
		{"pillar.get", []any{"pkg:apache"}, nil, "httpd"},
		{"pillar.get", []any{"nope"}, nil, ""},
		{"pillar.get", []any{"nope"}, map[string]any{"default": "x"}, "x"},
		{"pillar.get", []any{"abc::def|ghi"}, map[string]any{"delimiter": "|"}, "pipe"},
		{"pillar.get", []any{"ports:1"}, nil, int64(443)},
		{"pillar.get", []any{"users:name"}, nil, "alice"}, // a dict embedded in a list
		{"pillar.get", []any{"role"}, map[string]any{"merge": true, "default": map[string]any{"a": int64(1), "n": map[string]any{"x": int64(1)}, "l": []any{"a"}}},
			map[string]any{"a": int64(1), "n": map[string]any{"x": int64(1), "y": int64(2)}, "l": []any{"b"}}},
		{"pillar.get", []any{"role"}, map[string]any{"merge": true, "merge_nested_lists": true, "default": map[string]any{"l": []any{"a", "b"}}},
			map[string]any{"n": map[string]any{"y": int64(2)}, "l": []any{"a", "b"}}},
		{"pillar.get", []any{"ports"}, map[string]any{"merge": true, "default": []any{int64(22), int64(80)}}, []any{int64(22), int64(80), int64(443)}},
		{"pillar.get", []any{"secret"}, map[string]any{"merge": true, "default": map[string]any{}}, "s3cret"}, // types differ: no merge
		{"pillar.item", []any{"pkg:apache", "nope"}, nil, map[string]any{"pkg:apache": "httpd", "nope": ""}},
		{"pillar.item", []any{"nope"}, map[string]any{"default": "d"}, map[string]any{"nope": "d"}},
		{"pillar.raw", nil, map[string]any{"key": "secret"}, "s3cret"},
		{"pillar.raw", nil, map[string]any{"key": "nope"}, map[string]any{}},
		{"pillar.ls", nil, nil, []any{"abc::def", "pkg", "ports", "role", "secret", "users"}},
		{"pillar.keys", []any{"pkg"}, nil, []any{"apache"}},
		{"pillar.items", []any{"secret"}, nil, map[string]any{"secret": "s3cret"}},
		{"pillar.obfuscate", nil, nil, map[string]any{"abc::def": map[string]any{"ghi": "<str>"}, "pkg": map[string]any{"apache": "<str>"},
			"ports": []any{"<int>", "<int>"}, "role": map[string]any{"n": map[string]any{"y": "<int>"}, "l": []any{"<str>"}},
			"secret": "<str>", "users": []any{map[string]any{"name": "<str>"}}}},
		{"config.get", []any{"pkg:apache"}, nil, "httpd"},
		{"saltutil.refresh_pillar", nil, nil, true},
	} {
		res := run(t, e, tc.fun, tc.args, tc.kwargs)
		if !res.Success {
			t.Errorf("%s %v %v failed: %v", tc.fun, tc.args, tc.kwargs, res.Return)
			continue
		}
		if d := cmp.Diff(tc.want, res.Return); d != "" {
			t.Errorf("%s %v %v (-want +got):\n%s", tc.fun, tc.args, tc.kwargs, d)
		}
	}
	res := run(t, e, "pillar.items", nil, map[string]any{"pillar": map[string]any{"extra": "x", "pkg": map[string]any{"nginx": "nginx"}}})
	got, _ := res.Return.(map[string]any)
	if got["extra"] != "x" || cmp.Diff(map[string]any{"apache": "httpd", "nginx": "nginx"}, got["pkg"]) != "" {
		t.Errorf("pillar.items pillar=: %v", res.Return)
	}
	if again := run(t, e, "pillar.get", []any{"pkg"}, nil).Return; cmp.Diff(map[string]any{"apache": "httpd"}, again) != "" {
		t.Errorf("pillar.items pillar= changed the pillar in memory: %v", again)
	}
	strict := newPillarExecutor(t, map[string]any{"pillar_raise_on_missing": true}, nil)
	if res := run(t, strict, "pillar.get", []any{"nope"}, nil); res.Success {
		t.Errorf("pillar_raise_on_missing: %v, want an error", res.Return)
	}
	if res := run(t, e, "pillar.keys", []any{"secret"}, nil); res.Success {
		t.Errorf("pillar.keys of a string: %v, want an error", res.Return)
	}
	var waited bool
	r := newPillarExecutor(t, nil, func(wait bool) bool { waited = wait; return true })
	if res := run(t, r, "saltutil.refresh_pillar", nil, map[string]any{"wait": true}); res.Return != true || !waited {
		t.Errorf("saltutil.refresh_pillar wait=True: %v (waited %v)", res.Return, waited)
	}
	// halite-call --local: no pillar.
	bare := New(Options{ID: "x", Log: zap.NewNop(), Grains: grains.New("x", nil, zap.NewNop())})
	if res := run(t, bare, "pillar.items", nil, nil); cmp.Diff(map[string]any{}, res.Return) != "" {
		t.Errorf("pillar.items without a pillar: %v", res.Return)
	}
}
