// Package state holds Salt's state data shared by the master, which compiles
// SLS files, and the agent, which applies them: the low chunk (one state
// function with its arguments, as Salt's State.compile_high_data makes it),
// the return of one state (Ret, keyed by Tag), the high data compiler
// (include, extend, names, requisite _in forms, order) and the requisite
// checks that refuse cycles and missing IDs before anything runs.
//
// It renders nothing: the master gives it YAML already rendered through
// package render (Jinja, then YAML in key order); a masterless agent gives
// it plain YAML. It imports neither master nor agent.
//
// The compiler follows Salt 3006's salt/state.py step by step:
//
//	CompileMatches (state.highstate, state.sls)
//	  render_highstate: per env and SLS, render_state (Loader.Load),
//	    include (absolute, ".rel", "..rel", {env: sls}, globs with a
//	    Lister), _handle_extend, _handle_exclude, _handle_state_decls
//	    (short form, "mod.fun:" keys), _handle_iorder (state_auto_order),
//	    merge_included_states (conflicting IDs)
//	  reconcile_extend, verify_high        -> Errors, nothing runs
//	  requisite_in (_in forms, use, use_in, prereq), apply_exclude
//	  compile_high_data (names, name_order), order_chunks (Order)
//
// Errors are Salt's strings (Error.Msg) with the SLS file and line where
// the entry is known (Error.String).
//
// A Memo makes compiles that load the same entries (a Loader that caches
// its renderings, as the master does for the devices of one job) share
// the work of each file on its own: render_state's per-file stages, the
// auto orders from a given first number, and each ID's chunks. The shared
// high data and chunks are read only; the compiler copies what it
// changes (reconcile_extend's targets, Order's chunks).
//
// What the engine calls on the agent, on the ordered low state: Check or
// Problems (requisites that name no chunk, with Salt's "The following
// requisites were not found" comment, and cycles), Sequence (the order
// Salt's call_chunk runs chunks in: requisites first, depth first),
// Matches (which chunks a requisite reference names) and Listen (the
// mod_watch chunks of listen/listen_in, run at the end as Salt's
// call_listen does). The top file: MergeTops (top_file_merging_strategy),
// Top.Verify (verify_tops) and Top.Match (top_matches with a caller's
// matcher).
package state
