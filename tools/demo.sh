#!/usr/bin/env bash
# make demo: a master and three agents on loopback under a temporary
# root_dir, keys accepted, a few jobs and live events, then everything
# stopped. Nothing to install: it uses the binaries `make build` put in bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/bin"
ROOT="$(mktemp -d -t halite-demo.XXXXXX)"
PORT=$((20000 + RANDOM % 20000))
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$ROOT"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '\033[36m$ %s\033[0m\n' "$*"; "$@"; }
# wait_for CMD...: retry a command until it succeeds (at most 20 s).
wait_for() {
  for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for: $*" >&2; return 1
}

mkdir -p "$ROOT/etc/master" 
cat > "$ROOT/etc/master/master" <<CONF
root_dir: $ROOT/master
interface: 127.0.0.1
port: $PORT
log_file: $ROOT/master/master.log
timeout: 10
CONF
for i in 1 2 3; do
  mkdir -p "$ROOT/etc/cam$i"
  cat > "$ROOT/etc/cam$i/agent" <<CONF
id: cam$i
root_dir: $ROOT/cam$i
master: 127.0.0.1
master_port: $PORT
acceptance_wait_time: 1
log_file: $ROOT/cam$i/agent.log
grains:
  site: demo
  model: cam-$((i % 2 + 1))
CONF
done
M=(-c "$ROOT/etc/master")

say "Starting a master on udp/127.0.0.1:$PORT (root_dir $ROOT/master)"
"$BIN/halite-master" "${M[@]}" -l warning 2>"$ROOT/master.err" & PIDS+=($!)
wait_for test -S "$ROOT/master/var/run/halite/master/master.sock"

say "Starting three agents"
for i in 1 2 3; do "$BIN/halite-agent" -c "$ROOT/etc/cam$i" -l error 2>"$ROOT/cam$i.err" & PIDS+=($!); done
wait_for bash -c "'$BIN/halite-key' ${M[*]} -l pre --out json | grep -q cam3"

say "Their keys wait for acceptance, as with salt-key"
run "$BIN/halite-key" "${M[@]}" -L
run "$BIN/halite-key" "${M[@]}" -A -y
wait_for bash -c "[ \$('$BIN/halite-run' ${M[*]} manage.up --out json | grep -o cam | wc -l) = 3 ]"

# Live events are recorded in the background, shown after the jobs.
"$BIN/halite-run" "${M[@]}" state.event 'tagmatch=salt/job/*' count=6 >"$ROOT/events.txt" & EVPID=$!
sleep 0.3

say "Remote execution"
run "$BIN/halite" "${M[@]}" '*' test.ping
run "$BIN/halite" "${M[@]}" '*' grains.item os model
run "$BIN/halite" "${M[@]}" -L cam1,cam3 cmd.run 'echo hello from $(hostname) && uname -sm'
JID=$("$BIN/halite" "${M[@]}" --async 'cam2' test.echo 'looked up later' | awk '{print $NF}')
echo "async job: $JID"
wait_for bash -c "'$BIN/halite-run' ${M[*]} jobs.lookup_jid $JID --out json | grep -q cam2"
run "$BIN/halite-run" "${M[@]}" jobs.lookup_jid "$JID"
wait "$EVPID" 2>/dev/null || true

say "The first live events of those jobs, as halite-run state.event printed them"
cut -c1-160 "$ROOT/events.txt"

say "An event fired on a device reaches the master's bus"
"$BIN/halite-run" "${M[@]}" state.event 'tagmatch=demo/*' count=1 & EVPID=$!
sleep 0.3
run "$BIN/halite-call" -c "$ROOT/etc/cam1" event.send demo/door '{"open": true}'
wait "$EVPID"

say "Status"
run "$BIN/halite-run" "${M[@]}" manage.status
say "Done: stopping the master and agents"
