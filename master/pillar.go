package master

import (
	"context"
	"runtime"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/pillar"
	"github.com/halite-fleet/halite/targets"
)

// newPillar is the master's pillar compiler over cfg's pillar options,
// reading the devices' grains from reg.
func newPillar(cfg *config.Master, reg *registry, log *zap.Logger) *pillar.Compiler {
	return pillar.New(pillar.Options{
		Roots: cfg.PillarRoots, Pillarenv: cfg.Pillarenv, Strategy: cfg.PillarSourceMergingStrategy,
		MergeLists: cfg.PillarMergeLists, ExtPillar: cfg.ExtPillar, ExtPillarFirst: cfg.ExtPillarFirst,
		IncludesOverrideSLS: cfg.PillarIncludesOverrideSLS, RenderErrorDetail: !cfg.PillarSafeRenderError,
		StateTop: cfg.StateTop.StateTop, CacheTTL: time.Duration(cfg.PillarCacheTTL) * time.Second,
		Nodegroups: cfg.Nodegroups, Opts: cfg.Raw, Grains: reg.grainsOf, Log: log,
	})
}

// pillarOf is device id's pillar for the state compiler (statecomp
// Options.Pillar): pillarFor's, compiled on first need (empty when
// pillarFor is nil). A failed compile gives Salt's shape of one, the
// messages under "_errors".
func (m *Master) pillarOf(id string) map[string]any {
	if m.pillarFor == nil {
		return map[string]any{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), pillarTimeout)
	defer cancel()
	p, err := m.pillarFor(ctx, id)
	if err != nil {
		m.log.Error("pillar", zap.String("id", id), zap.Error(err))
		return map[string]any{"_errors": []any{err.Error()}}
	}
	if p == nil {
		p = map[string]any{}
	}
	return p
}

// matchPillar is registry.match for a target that reads pillar: the
// candidates' pillars are compiled (those not kept yet, in parallel).
func (m *Master) matchPillar(ctx context.Context, mt *targets.Matcher, candidates []string) ([]string, error) {
	ps, err := m.pillar.ForMany(ctx, candidates, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]map[string]any, len(candidates))
	for i, id := range candidates {
		byID[id] = ps[i]
	}
	return m.minions.matchWith(mt, candidates, func(id string) map[string]any { return byID[id] }), nil
}

// pillarRunners are Salt's pillar runner (salt/runners/pillar.py):
// show_pillar (and pillar.items, its alias) and show_top.
func pillarRunners(m *Master) map[string]callFunc {
	return map[string]callFunc{
		"pillar.show_pillar": m.runShowPillar,
		"pillar.items":       m.runShowPillar,
		"pillar.show_top":    m.runShowTop,
	}
}

// runShowPillar is pillar.show_pillar [MINION] [pillarenv=ENV]: the
// device's pillar compiled afresh (rendering errors in full in _errors).
// Grains given as keywords are the device's for this compile, as Salt's.
func (m *Master) runShowPillar(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	id, err := a.str(0, "minion", false)
	if err != nil {
		return nil, err
	}
	if id == "" {
		id = "*"
	}
	penv, err := a.str(-1, "pillarenv", false)
	if err != nil {
		return nil, err
	}
	return m.pillar.Show(ctx, id, penv), nil
}

// runShowTop is pillar.show_top [MINION]: the merged pillar top data, or
// the errors reading it.
func (m *Master) runShowTop(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	id, err := a.str(0, "minion", false)
	if err != nil {
		return nil, err
	}
	if id == "" {
		ids := m.minions.connected()
		sort.Strings(ids)
		if len(ids) == 0 {
			return nil, badRequest("pillar.show_top: no minion given and none connected")
		}
		id = ids[0]
	}
	top, errs := m.pillar.ShowTop(ctx, id)
	if len(errs) > 0 {
		return errs, nil
	}
	return top, nil
}
