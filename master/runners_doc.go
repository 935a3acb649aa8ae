package master

// runnerDocs is each runner's documentation, which doc.runner returns and
// halite-run -d prints (Salt prints its runners' docstrings). Every runner
// has one (TestRunnerDocs).
var runnerDocs = map[string]string{
	"firmware.rollout": `Update the agents a target matches to another build, batch by
batch: each batch runs firmware.update (the build comes from firmware_dir)
and waits for every device to report updated, rolled_back or failed (or
timeout=SECONDS, default 600); once more than max_failures devices failed,
the rollout stops before the next batch. batch and max_failures are a
percentage of the devices to update or a count (defaults 10% and 2%).
Devices on the version already are skipped. Each batch fires
halite/firmware/rollout/<jid>/batch.

    halite-run firmware.rollout 'cam-*' version=1.4.0 batch=10% max_failures=2%`,
	"pillar.show_pillar": `Return the pillar of a minion, compiled afresh from pillar_roots and
ext_pillar with the grains the master holds for it (nothing is kept;
rendering errors are given in full under _errors). pillarenv=ENV reads
that environment only.

    halite-run pillar.show_pillar web1
    halite-run pillar.show_pillar web1 pillarenv=dev`,
	"pillar.items": `Return the pillar of a minion, as pillar.show_pillar.

    halite-run pillar.items web1`,
	"pillar.show_top": `Return the merged pillar top data as a minion's compile reads it
({env: {target: [match, sls...]}}), or the errors reading it. Without a
minion, the first connected one.

    halite-run pillar.show_top web1`,
	"discovery.list": `List the devices the relays found on their sites (a relay's
discovery: section), by relay: MAC, addresses, vendor, the ONVIF, mDNS and
SSDP facts, first and last seen, and managed (a Halite agent with an
accepted key answers from it). relay=GLOB keeps those relays;
unmanaged=True the devices no agent answers from; vendor=, mac=, ip=,
model=, manufacturer=, hardware=, name= keep the devices whose field
matches the glob.

    halite-run discovery.list relay=site-* unmanaged=True --out json
    halite-run discovery.list model='DS-2CD*'`,
	"proxy.add": `Add a run-time proxy minion at a relay (capability 15) for a device
the relay's discovery found: relay=, id=, proxytype= (ssh, onvif, http),
mac= or ip= (the device as the relay's discovery inventory holds it; the
proxy minion talks to that address only), and username=,
password_pillar= (under the relay pillar's proxy: key), port=, url= (it
must name the device's address), health_path=, timeout=,
accept_new_host_key=, grains=. The relay keeps it across restarts; its
key comes pending, "proxied by" the relay. A reaction may call it:
runner.proxy.add.

    halite-run proxy.add relay=site1 id=cam7 proxytype=onvif mac=00:11:22:33:44:55 username=admin password_pillar=proxy:cam:password`,
	"proxy.remove": `Remove a run-time proxy minion from its relay (relay=, id=): its
session ends and the relay forgets it; its key stays on the master
(halite-key -d to delete it). Entries of the relay's proxy: config are
removed there.

    halite-run proxy.remove relay=site1 id=cam7`,
	"proxy.list": `List the proxy minions of the connected relays (of capability 15), by
relay: id, proxytype, host or url, dynamic (added at run time), state
(down, pending, up). relay=GLOB keeps those relays.

    halite-run proxy.list relay=site*`,
	"jobs.list_jobs": `List the jobs of the job cache, by job id.
search_function=GLOB and search_target=GLOB keep the jobs whose function
or target match.

    halite-run jobs.list_jobs search_function='test.*'`,
	"jobs.lookup_jid": `Return what each minion returned for a job.

    halite-run jobs.lookup_jid 20240101120000123456`,
	"jobs.print_job": `Print a job's description, its minions and every return.

    halite-run jobs.print_job 20240101120000123456`,
	"jobs.list_job": `List a specific job given by its jid: its function, arguments,
target, user, start time, minions and every return ("Result").

    halite-run jobs.list_job 20240101120000123456`,
	"jobs.exit_success": `Check if a job has been executed and exit successfully: for each
minion of the job, whether it returned something true.

    halite-run jobs.exit_success 20240101120000123456`,
	"jobs.last_run": `Print the newest job (as jobs.print_job), or False when there is
none. function=GLOB and target=GLOB narrow the search.

    halite-run jobs.last_run
    halite-run jobs.last_run function='cmd.run' target=web1`,
	"jobs.active": `Return the jobs the connected minions are running now
(saltutil.running on each).

    halite-run jobs.active`,
	"manage.up": `Print a list of all of the minions that are up (connected).

    halite-run manage.up`,
	"manage.down": `Print a list of all the accepted minions that are down (not
connected). removekeys=True deletes their keys.

    halite-run manage.down
    halite-run manage.down removekeys=True`,
	"manage.status": `Print the status of all known minions: "up" and "down" lists.

    halite-run manage.status`,
	"manage.present": `Print a list of all minions that are up according to the master's
presence detection (no commands will be sent to minions).
show_ip=True maps each to the address it connects from; subset=CIDR
keeps the minions connecting from within that range.

    halite-run manage.present
    halite-run manage.present subset=10.0.0.0/8 show_ip=True`,
	"manage.alived": `Print a list of all minions that are up according to the master's
presence detection (no commands will be sent to minions); as
manage.present.

    halite-run manage.alived`,
	"manage.versions": `Check the version of active minions: runs test.version on every
minion and groups them under "Up to date", "Minion requires update",
"Minion newer than master" and "Minion offline", with the master's
version under "Master". timeout=SECONDS (or -t) bounds the wait.

    halite-run manage.versions`,
	"cache.grains": `Return cached grains of the targeted minions.

    halite-run cache.grains '*'
    halite-run cache.grains 'os:Debian' tgt_type=grain`,
	"salt.cmd": `Execute FUN with the given args and kwargs on the master itself, as
the master's user, with the agent's execution functions.

    halite-run salt.cmd test.ping
    halite-run salt.cmd test.arg 1 2 3 a=1`,
	"doc.runner": `Return all inline documentation for runner functions.

    halite-run doc.runner`,
	"event.send": `Fire an event on the master's event bus: event.send TAG [DATA], or
the keyword arguments as the data.

    halite-run event.send mytag '{"foo": "bar"}'
    halite-run event.send mytag foo=bar`,
	"state.event": `Watch the master's event bus and print each event as
"tag<TAB>json". tagmatch=GLOB narrows the events, count=N stops after N,
pretty=True indents the json.

    halite-run state.event tagmatch='salt/job/*' count=5`,
	"mine.get": `Get data from the mine: mine.get TGT FUN [TGT_TYPE].

    halite-run mine.get '*' network.ip_addrs`,
	"reactor.list": `List the reactor's rules: a list of {tag: [sls files]}.

    halite-run reactor.list`,
	"reactor.add": `Add a reactor rule: reactor.add TAG reactors=SLS_FILES.

    halite-run reactor.add 'salt/cloud/*/destroyed' reactors='/srv/reactor/destroy.sls'`,
	"reactor.delete": `Delete the reactor rules of a tag.

    halite-run reactor.delete 'salt/cloud/*/destroyed'`,
	"ret.get_jid": `Return what each minion returned for a job, from a returner:
ret.get_jid RETURNER JID.

    halite-run ret.get_jid redis 20240101120000123456`,
	"ret.get_fun": `Return each minion's latest return of a function, from a returner:
ret.get_fun RETURNER FUN.

    halite-run ret.get_fun redis test.ping`,
	"ret.get_jids": `Return the job ids a returner holds: ret.get_jids RETURNER.

    halite-run ret.get_jids redis`,
	"ret.get_minions": `Return the minions a returner holds returns of: ret.get_minions
RETURNER.

    halite-run ret.get_minions redis`,
	"returners.status": `Show each returner's queue: queued, dead letters, delivered,
failures, retrying and the last error.

    halite-run returners.status`,
	"returners.requeue_dead": `Put a returner's dead letters back on its queue.

    halite-run returners.requeue_dead redis`,
	"returners.dead_letters": `List a returner's dead letters.

    halite-run returners.dead_letters redis`,
	"state.orchestrate": `Run an orchestration from the master: the SLS (from file_roots, saltenv,
default base) is rendered and compiled as the states of the master minion,
then run on the master in order, with requisites and failhard. Its steps
are salt.state (tgt, tgt_type, sls or highstate, batch, batch_wait,
batch_max_fail, failhard, fail_minions, allow_fail, subset, test, pillar,
expect_minions, timeout), salt.function (tgt, name, arg, kwarg, batch, ...),
salt.runner, salt.wheel, salt.wait_for_event and test.*. test=True asks
every step what it would do; pillar={...} is merged into the pillar the SLS
renders with. The result prints with the highstate outputter; the exit
status is 1 when a step failed.

    halite-run state.orchestrate orch.deploy
    halite-run state.orchestrate orch.deploy saltenv=prod test=True pillar='{"version": "1.2"}'`,
	"state.orch": `Same as state.orchestrate.`,
	"state.sls":  `Same as state.orchestrate.`,
}
