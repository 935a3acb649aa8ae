// Package localcache is the local_cache returner: the master's embedded
// job cache (master/jobcache) behind the returner interface, so that
// master_job_cache: local_cache (the default) and ret.* runners on it work
// like any other job cache. It registers itself as "local_cache".
//
// It is master-only (it needs the master's bbolt cache), so it lives under
// master/ rather than beside the returner backends in returners/.
package localcache
