#!/usr/bin/env bash
# Makes sure the servers the returner tests talk to answer on 127.0.0.1:
# PostgreSQL 5432, Redis 6379, MariaDB 3306, NATS with JetStream 4222,
# Mosquitto 1883. Each one that does not answer is started with this
# machine kind's own command (docs: /work/.library/env/machines/go-svc.md),
# then waited for. Idempotent: a server that answers is left alone. Fails
# loudly, naming the server, when one does not come up.
set -uo pipefail

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

# up PORT: whether something accepts TCP connections on 127.0.0.1:PORT.
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_postgres() {
  local v
  v=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  [ -n "$v" ] || { echo "services: PostgreSQL is not installed (no /etc/postgresql)" >&2; return 1; }
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$v" main start
}
start_redis() {
  $SUDO mkdir -p /var/lib/redis /var/log/redis
  $SUDO redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
}
start_mariadb() {
  $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld 2>/dev/null
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
}
start_nats() {
  $SUDO mkdir -p /var/lib/nats-server
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
}
start_mosquitto() {
  $SUDO mosquitto -d -c /etc/mosquitto/mosquitto.conf
}

# ready NAME: the server does its job, not just accept connections.
ready() {
  case $1 in
    postgres) pg_isready -q -h 127.0.0.1 -p 5432 ;;
    redis) [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ] ;;
    mariadb) mariadb -uroot -h127.0.0.1 -P3306 -e 'select 1' >/dev/null 2>&1 ;;
    *) true ;;
  esac
}

failed=()
for s in postgres:5432 redis:6379 mariadb:3306 nats:4222 mosquitto:1883; do
  name=${s%%:*} port=${s##*:}
  if up "$port" && ready "$name"; then
    continue
  fi
  if ! up "$port"; then
    echo "services: starting $name (nothing answers on 127.0.0.1:$port)" >&2
    if ! "start_$name" >/dev/null; then
      failed+=("$name (its start command failed)")
      continue
    fi
  fi
  ok=""
  for _ in $(seq 1 150); do # 30 s
    if up "$port" && ready "$name"; then ok=1; break; fi
    sleep 0.2
  done
  [ -n "$ok" ] || failed+=("$name (nothing ready on 127.0.0.1:$port after 30 s)")
done

if ((${#failed[@]})); then
  printf 'services: NOT RUNNING: %s\n' "${failed[@]}" >&2
  echo "services: the returner tests need these servers; see /work/.library/env/machines/go-svc.md" >&2
  exit 1
fi
