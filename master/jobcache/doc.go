// Package jobcache is the master's embedded job cache (Salt's
// master_job_cache, "local_cache" in Salt): the load of every job the master
// published and every return it received, kept keep_jobs hours and read by
// the jobs runners (jobs.list_jobs, jobs.lookup_jid, jobs.print_job). It sits
// under master/: the publisher calls SaveLoad, the return path SaveReturn,
// the runners the getters, and a timer in the master CleanOld.
//
// The store is one go.etcd.io/bbolt file (e.g. cachedir/jobs.db) with three
// buckets:
//
//	loads    jid               -> Load, CBOR (protocol.Marshal)
//	returns  jid + "/" + id    -> protocol.ReturnBody, CBOR
//	staged   sequence number   -> returns committed together, not yet in returns
//
// A commit appends its returns to bucket staged as a record (several of
// at most 1 MiB for large returns), and every 8,192 returns they move to
// bucket returns in key order in one transaction (staged.go says why; the
// readers read both buckets).
//
// Job ids are Salt's 20-digit UTC timestamps (%Y%m%d%H%M%S%f), so the byte
// order of the keys is time order: the returns of a job are one prefix scan,
// the newest jobs are at the end of "loads", and everything older than a
// cut-off is a scan from the start of each bucket that stops at the cut-off
// jid. Purged pages go to bbolt's freelist and are reused by later writes, so
// the file stops growing once it holds keep_jobs worth of jobs (bbolt never
// shrinks a file).
//
// Every bbolt commit is fsynced (about 1.8 ms on the reference machine), so
// SaveReturn groups concurrent calls into one commit: the first caller
// commits what is queued, callers arriving meanwhile queue up and the first
// of them commits the next group when the running commit ends. Unlike
// bbolt's DB.Batch this adds no timer delay to a lone return, and it starts
// no goroutine.
package jobcache
