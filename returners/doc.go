// Package returners sends job returns, job loads and events to the systems
// people already run, as Salt's returners do, without ever blocking the
// master's control path or losing a result.
//
// It sits between the master (which feeds it) and the backends (one
// subpackage each, registering itself by its Salt virtual name from init):
// redis, pgjsonb, mysql, rawfile_json, syslog, webhook, nats, mqtt, and
// local_cache, which is master-only and lives in master/jobcache/localcache. A Returner implements Salt's returner(ret); one that can stand in
// for the master job cache also implements JobCache (prep_jid, save_load,
// get_load, save_minions, get_jid, get_fun, get_jids, get_minions,
// clean_old_jobs) and one that takes events implements EventReturner
// (event_return).
//
// Every returner is fed through a Store: on the master a durable, bounded
// bbolt file under its cachedir (package returners/queue, kept apart so
// the agent links no bbolt); on a masterless agent a Spool of append-only
// files. A Worker drains it in order, retrying a
// backend that is down or slow with exponential backoff while the rest of
// the master goes on; a row a backend refuses for good (Permanent errors:
// too large, bad encoding) is moved to the queue's dead-letter area instead
// of blocking the rows behind it. What is queued survives a restart.
// Delivery is at least once, and backends use (jid, id) as the idempotency
// key so a retried insert does not duplicate a row.
//
// Options are read with Salt's names and precedence (see Options):
// "<virtualname>.<attr>" (or "returner.<virtualname>.<attr>" where Salt
// uses that), "<ret_config>.<virtualname>.<attr>" for --return_config, and
// ret_kwargs over both.
package returners
