// Package pillar is the master's pillar compiler: Salt's Pillar class
// (salt/pillar/__init__.py) for Halite's master. For each device it reads
// the pillar top files of pillar_roots (every environment, or pillarenv's
// only), matches the device against their targets with package targets
// (the same matchers as the state top file), renders the matched SLS
// files with the device's grains through package render (Jinja, then
// YAML, the renderer of states), follows their includes, and merges
// them by pillar_source_merging_strategy and pillar_merge_lists (Salt's
// salt/utils/dictupdate.py, merge.go); then the external pillars
// (ext_pillar: cmd_json, cmd_yaml, file_tree, postgres, ext.go and
// sql.go) are merged over it. Errors are Salt's, in the pillar's
// _errors list, and in the master's log.
//
// The Compiler keeps each device's compiled pillar in memory (Salt's
// pillar_cache, per device): compiled on first need (For), again on
// Refresh (saltutil.refresh_pillar), when the device's grains change
// (the master hands a new grains map, or calls Invalidate), when a pillar
// file it read changes (each compile records the lookups it made with
// the SHA-256 of their answers; a kept pillar is checked against the
// file server's answers, at most a second old, before it is given:
// the file server's stamp cache makes that a stat, not a read), and
// after pillar_cache_ttl. A compile whose top or SLS files fail to render
// does not replace a device's pillar: the device keeps its previous one
// and the error, with file and line, goes to the log.
//
// The master uses it for pillar targets (-I, -J, I@, J@), for the state
// compiler's pillar (master/statecomp Options.Pillar), for the
// pillar.show_pillar, pillar.items and pillar.show_top runners, and to
// answer devices' pillar requests, sealed to each device.
package pillar
