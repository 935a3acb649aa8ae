#!/usr/bin/env bash
# tools/saltcompare.sh: the same highstate (tools/fleetsim -write-states:
# top.sls and 20 SLS files of test.* states, with SALTCOMPARE_FILES=1 a
# file.managed each too) applied to N devices (default 10) on loopback, by
#   1. Halite: bin/halite-master and N bin/halite-agent processes,
#      `halite '*' state.apply`;
#   2. Salt 3006: a salt-master and N salt-minion processes, run from the
#      Salt source (SALT_SRC, default: a checkout of the Salt mirror's
#      salt/ and scripts/) with Debian's Python 3 and Debian's packages of
#      Salt's requirements (apt-get install, below), `salt '*' state.apply`;
# and prints the wall time of each CLI call (start to exit, every device
# returned), medians over SALTCOMPARE_ROUNDS rounds after one warm-up, and
# the ratio. Everything listens on 127.0.0.1 only, on ports chosen free;
# the run is bounded (SALTCOMPARE_BUDGET seconds, default 600) and stops
# every process it started.
#
# Knobs: SALTCOMPARE_N (10), SALTCOMPARE_ROUNDS (5), SALTCOMPARE_FILES (0),
#        SALTCOMPARE_BUDGET (600), SALT_SRC, SALT_MIRROR, BIN (bin).
set -uo pipefail
cd "$(dirname "$0")/.."
N="${SALTCOMPARE_N:-10}"
ROUNDS="${SALTCOMPARE_ROUNDS:-5}"
FILES="${SALTCOMPARE_FILES:-0}"
BUDGET="${SALTCOMPARE_BUDGET:-600}"
BIN="$(cd "${BIN:-bin}" 2>/dev/null && pwd)" || { echo "saltcompare: no bin/ (make build)"; exit 1; }
MIRROR="${SALT_MIRROR:-/work/.mirror/m-czernek+opensuse-salt/repo}"
PY=/usr/bin/python3
ROOT="$(mktemp -d /tmp/hsc.XXXXXX)"
PIDS=()
START=$SECONDS
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for _ in 1 2 3 4 5; do
    local alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 1
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$ROOT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
left() { local l=$((BUDGET - (SECONDS - START))); ((l < 1)) && l=1; echo "$l"; }
freeport() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# median of numbers, one a line
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) exit; print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
# timed CMD...: seconds CMD took; its output in $ROOT/last.out
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  timeout "$(left)" "$@" >"$ROOT/last.out" 2>&1 || { echo "saltcompare: failed: $*" >&2; tail -20 "$ROOT/last.out" >&2; return 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}
# count_true FILE: state results true in a JSON output
count_true() { grep -o '"result": *true' "$1" | wc -l; }

PER=$((FILES == 1 ? 3 : 2))
WANT=$((N * 20 * PER))
SRV="$ROOT/srv"
go build -o "$ROOT/fleetsim" ./tools/fleetsim || exit 1
sf=(); ((FILES == 1)) && sf=(-state-files)
"$ROOT/fleetsim" -write-states "$SRV" "${sf[@]}" || exit 1
echo "saltcompare: $N devices, state.apply of top.sls + 20 SLS ($((20 * PER)) states each, $WANT in all), $ROUNDS rounds after 1 warm-up"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- Halite
HP=$(freeport)
mkdir -p "$ROOT/h/etc/master"
cat >"$ROOT/h/etc/master/master" <<EOF
root_dir: $ROOT/h/m
interface: 127.0.0.1
port: $HP
auto_accept: True
log_level: warning
log_file: ''
timeout: 60
file_roots:
  base:
    - $SRV
EOF
"$BIN/halite-master" -c "$ROOT/h/etc/master" >"$ROOT/h-master.log" 2>&1 &
PIDS+=($!); disown
for i in $(seq 0 $((N - 1))); do
  id=$(printf 'sim-%05d' "$i")
  mkdir -p "$ROOT/h/etc/$id"
  cat >"$ROOT/h/etc/$id/agent" <<EOF
id: $id
root_dir: $ROOT/h/$id
master: 127.0.0.1
master_port: $HP
acceptance_wait_time: 1
sock_dir: /s
log_level: warning
log_file: ''
grains:
  role: $( ((i % 2)) && echo gateway || echo camera)
  fleetsim_dir: $ROOT/h/files
EOF
  "$BIN/halite-agent" -c "$ROOT/h/etc/$id" >"$ROOT/h-$id.log" 2>&1 &
  PIDS+=($!); disown
done
up=0
for _ in $(seq 1 120); do
  up=$("$BIN/halite-run" -c "$ROOT/h/etc/master" manage.up --out json 2>/dev/null | grep -c '"sim-')
  ((up >= N)) && break
  sleep 1
done
((up >= N)) || { echo "saltcompare: only $up of $N halite agents up"; exit 1; }
ht=()
for r in $(seq 0 "$ROUNDS"); do
  t=$(timed "$BIN/halite" -c "$ROOT/h/etc/master" -t 60 '*' state.apply --out json) || exit 1
  got=$(count_true "$ROOT/last.out")
  ((got == WANT)) || { echo "saltcompare: halite round $r: $got of $WANT states true"; head -c 2000 "$ROOT/last.out"; exit 1; }
  ((r > 0)) && ht+=("$t")
  echo "halite round $r: ${t} s"
done
hmed=$(printf '%s\n' "${ht[@]}" | median)
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
sleep 2
PIDS=()

# ---- Salt
SRC="${SALT_SRC:-$ROOT/salt-src}"
why=""
if [[ ! -d "$SRC/salt" ]]; then
  if [[ -d "$MIRROR" ]]; then
    # The mirror is a bare repository with some large blobs absent:
    # check out only salt/ and scripts/, through an index of our own.
    mkdir -p "$SRC"
    GIT_INDEX_FILE="$ROOT/salt.idx" git --git-dir="$MIRROR" read-tree --prefix=salt/ HEAD:salt &&
      GIT_INDEX_FILE="$ROOT/salt.idx" git --git-dir="$MIRROR" read-tree --prefix=scripts/ HEAD:scripts &&
      GIT_INDEX_FILE="$ROOT/salt.idx" git --git-dir="$MIRROR" --work-tree="$SRC" checkout-index -a ||
      why="cannot check out the Salt source from $MIRROR"
    # Not a git checkout: the version comes from _version.txt (the
    # mirror's branch is openSUSE/release/3006.0).
    [[ -z "$why" ]] && echo "3006.0" >"$SRC/salt/_version.txt"
  else
    why="no Salt source: set SALT_SRC or SALT_MIRROR"
  fi
fi
DEBS="python3-zmq python3-msgpack python3-yaml python3-jinja2 python3-markupsafe python3-requests python3-pycryptodome python3-distro python3-psutil python3-packaging python3-jmespath python3-distutils"
if [[ -z "$why" ]] && ! $PY -c 'import zmq, msgpack, yaml, jinja2, requests, Cryptodome, distro, psutil, packaging, jmespath, distutils' 2>/dev/null; then
  # PyPI is not reachable here; Debian's packages are.
  timeout "$(left)" apt-get install -y --no-install-recommends $DEBS >"$ROOT/apt.log" 2>&1 ||
    why="apt-get install of Salt's requirements failed (see $ROOT/apt.log)"
fi
# looseversion (a Salt 3006 requirement) is not packaged in Debian 12: it
# is a copy of distutils' LooseVersion, which Python 3.11 still has.
mkdir -p "$ROOT/shim"
cat >"$ROOT/shim/looseversion.py" <<'EOF'
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from distutils.version import LooseVersion
EOF
export PYTHONPATH="$SRC:$ROOT/shim"
if [[ -z "$why" ]]; then
  ver=$($PY "$SRC/scripts/salt-call" --version 2>&1) || why="salt-call --version failed: $ver"
fi
if [[ -n "$why" ]]; then
  echo "| devices | halite '*' state.apply p50 | salt '*' state.apply p50 | salt / halite |"
  echo "|---:|---:|---:|---:|"
  echo "| $N | ${hmed} s | not run: $why | — |"
  exit 1
fi
echo "salt: $ver (from $SRC, Python $($PY -c 'import sys; print(sys.version.split()[0])'))"
PUB=$(freeport)
RET=$(freeport)
mkdir -p "$ROOT/s/etc/master"
cat >"$ROOT/s/etc/master/master" <<EOF
root_dir: $ROOT/s/m
interface: 127.0.0.1
publish_port: $PUB
ret_port: $RET
auto_accept: True
user: $(id -un)
log_file: $ROOT/s/master.log
log_level_logfile: warning
file_roots:
  base:
    - $SRV
EOF
SALT=("$PY" "$SRC/scripts")
$PY "$SRC/scripts/salt-master" -c "$ROOT/s/etc/master" -l warning >"$ROOT/s-master.out" 2>&1 &
PIDS+=($!); disown
for i in $(seq 0 $((N - 1))); do
  id=$(printf 'sim-%05d' "$i")
  mkdir -p "$ROOT/s/etc/$id"
  cat >"$ROOT/s/etc/$id/minion" <<EOF
id: $id
root_dir: $ROOT/s/$id
master: 127.0.0.1
master_port: $RET
publish_port: $PUB
user: $(id -un)
log_file: $ROOT/s/$id.log
log_level_logfile: warning
acceptance_wait_time: 1
grains:
  role: $( ((i % 2)) && echo gateway || echo camera)
  fleetsim_dir: $ROOT/s/files
EOF
  $PY "$SRC/scripts/salt-minion" -c "$ROOT/s/etc/$id" -l warning >"$ROOT/s-$id.out" 2>&1 &
  PIDS+=($!); disown
done
up=0
for _ in $(seq 1 180); do
  up=$(timeout 30 $PY "$SRC/scripts/salt" -c "$ROOT/s/etc/master" -t 5 '*' test.ping --out txt 2>/dev/null | grep -c ': True')
  ((up >= N)) && break
  sleep 2
done
((up >= N)) || { echo "saltcompare: only $up of $N salt minions answer"; tail -5 "$ROOT"/s-*.out "$ROOT/s/master.log"; exit 1; }
st=()
for r in $(seq 0 "$ROUNDS"); do
  t=$(timed $PY "$SRC/scripts/salt" -c "$ROOT/s/etc/master" -t 60 '*' state.apply --out json --static) || exit 1
  got=$(count_true "$ROOT/last.out")
  ((got == WANT)) || { echo "saltcompare: salt round $r: $got of $WANT states true"; head -c 2000 "$ROOT/last.out"; exit 1; }
  ((r > 0)) && st+=("$t")
  echo "salt round $r: ${t} s"
done
smed=$(printf '%s\n' "${st[@]}" | median)
echo
echo "| devices | states each | halite '*' state.apply p50 | salt '*' state.apply p50 | salt / halite |"
echo "|---:|---:|---:|---:|---:|"
echo "| $N | $((20 * PER)) | ${hmed} s | ${smed} s | $(awk -v a="$smed" -v b="$hmed" 'BEGIN { printf "%.1f×", a / b }') |"
echo "(wall time of the CLI from start to exit, every device returned; load average $(cut -d' ' -f1-3 /proc/loadavg))"
