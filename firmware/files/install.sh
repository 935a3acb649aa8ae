#!/bin/sh
# install.sh: installs the Halite agent from this bundle (made by
# `halite-flash bundle`, or sent by `halite-flash ssh`). POSIX sh: runs
# under BusyBox ash on cameras and gateways.
#
#   sh install.sh [--root DIR] [--id ID] [--init systemd|procd|sysv|none]
#                 [--bin-dir DIR] [--move] [--no-start] [--force-arch]
#
# --root installs under DIR instead of / (tests, images being built).
# --id sets the agent id; the default comes from the bundle (bundle.env
# ID_FROM: hostname, mac or file:PATH), or is the id of the one preseeded
# key. --move moves the binary instead of copying it (halite-flash uploads
# it beside its final place). The last line printed is
#   HALITE-INSTALL ok id=ID arch=ARCH init=INIT
# or, on failure, HALITE-INSTALL error=KIND followed by what to do.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=""
ID=""
INIT=""
BIN_DIR=/usr/bin
MOVE=""
START=1
FORCE_ARCH=""
ARCH=""
ID_FROM=hostname
[ -r "$HERE/bundle.env" ] && . "$HERE/bundle.env"

fail() { # fail KIND MESSAGE
	echo "install.sh: $2" >&2
	echo "HALITE-INSTALL error=$1"
	exit 1
}

while [ $# -gt 0 ]; do
	case $1 in
	--root) ROOT=${2%/}; shift ;;
	--id) ID=$2; shift ;;
	--init) INIT=$2; shift ;;
	--bin-dir) BIN_DIR=${2%/}; shift ;;
	--move) MOVE=1 ;;
	--no-start) START="" ;;
	--force-arch) FORCE_ARCH=1 ;;
	-h | --help)
		sed -n '2,16p' "$0"
		exit 0
		;;
	*) fail usage "unknown option $1 (see sh $0 --help)" ;;
	esac
	shift
done
case $ROOT$BIN_DIR in *'|'* | *' '*) fail usage "--root and --bin-dir may not hold '|' or spaces" ;; esac

# The device's architecture, named as the bundle's ARCH.
device_arch() {
	m=$(uname -m 2>/dev/null)
	case $m in
	x86_64 | amd64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	armv7* | armv8l) echo armv7 ;;
	armv6*) echo armv6 ;;
	mipsel | mipsle) echo mipsle ;;
	mips)
		e=$(od -An -tx1 -j5 -N1 /bin/sh 2>/dev/null | tr -d ' ')
		[ "$e" = 01 ] && echo mipsle || echo mips
		;;
	*) echo "$m" ;;
	esac
}
if [ -n "$ARCH" ] && [ -z "$FORCE_ARCH" ]; then
	d=$(device_arch)
	if [ "$d" != "$ARCH" ] && ! { [ "$ARCH" = armv6 ] && [ "$d" = armv7 ]; }; then
		fail arch "this bundle's agent is for $ARCH but this device is $d (uname -m: $(uname -m)): make a bundle with --arch $d, or give --force-arch"
	fi
fi

valid_id() {
	case $1 in
	'' | .* | -* | *..* | *[/\\*?,\[\]]* | *' '*) return 1 ;;
	esac
	return 0
}

# The id: --id, the one preseeded key, else ID_FROM.
if [ -z "$ID" ] && [ -d "$HERE/keys" ]; then
	n=0
	for k in "$HERE"/keys/*.pem; do
		[ -e "$k" ] || continue
		n=$((n + 1))
		ID=$(basename "$k" .pem)
	done
	if [ "$n" -gt 1 ]; then
		fail usage "this bundle holds $n preseeded keys: give --id, one of: $(ls "$HERE/keys" | sed -n 's/\.pem$//p' | tr '\n' ' ')"
	fi
fi
if [ -z "$ID" ]; then
	case $ID_FROM in
	hostname) ID=$(cat /proc/sys/kernel/hostname 2>/dev/null || hostname) ;;
	mac)
		for a in /sys/class/net/*/address; do
			m=$(cat "$a" 2>/dev/null)
			case $m in '' | 00:00:00:00:00:00) continue ;; esac
			ID=$(echo "$m" | tr -d ':' | tr 'ABCDEF' 'abcdef')
			break
		done
		;;
	file:*) ID=$(head -n 1 "${ID_FROM#file:}" 2>/dev/null | tr -d ' \r\t') ;;
	esac
fi
valid_id "$ID" || fail id "no valid agent id (got '$ID' from $ID_FROM): give --id ID"

BIN=$ROOT$BIN_DIR/halite-agent
CONF=$ROOT/etc/halite
PKI=$CONF/pki/agent

# The init system: --init, else what the device runs.
if [ -z "$INIT" ]; then
	if [ -d "$ROOT/run/systemd/system" ]; then
		INIT=systemd
	elif [ -f "$ROOT/etc/rc.common" ] || [ -x "$ROOT/sbin/procd" ]; then
		INIT=procd
	elif [ -d "$ROOT/etc/init.d" ]; then
		INIT=sysv
	else
		INIT=none
	fi
fi

# Writable? A read-only root (squashfs) cannot take the agent there.
mkdir -p "$ROOT$BIN_DIR" "$CONF/agent.d" "$PKI" 2>/dev/null
for d in "$ROOT$BIN_DIR" "$CONF" "$PKI"; do
	if ! : >"$d/.halite-install-probe" 2>/dev/null; then
		fail readonly "$d is not writable (read-only root?): give --bin-dir a writable directory, or remount read-write"
	fi
	rm -f "$d/.halite-install-probe"
done

# put SRC DST MODE: copies SRC to DST through a temporary name and a rename.
put() {
	cp "$1" "$2.new" 2>/dev/null || { rm -f "$2.new"; fail nospace "cannot write $2 (no space left?): free space on $(dirname "$2")"; }
	chmod "$3" "$2.new" && mv -f "$2.new" "$2" || fail write "cannot rename $2.new to $2"
}

# Rewrites the service files' paths for BIN_DIR and ROOT.
paths() {
	sed -e "s|/usr/bin/halite-agent|$BIN|g" \
		-e "s|/etc/default/halite-agent|$ROOT/etc/default/halite-agent|g" \
		-e "s|/var/run/halite-agent.pid|$ROOT/var/run/halite-agent.pid|g" \
		-e "s|/etc/halite|$CONF|g" "$1"
}

stop_old() {
	case $INIT in
	systemd) [ -z "$ROOT" ] && systemctl stop halite-agent 2>/dev/null ;;
	procd | sysv) [ -x "$ROOT/etc/init.d/halite-agent" ] && "$ROOT/etc/init.d/halite-agent" stop >/dev/null 2>&1 ;;
	esac
	return 0
}

# The configuration: the bundle's, with this device's id (and root).
tmp=$CONF/agent.tmp
{
	cat "$HERE/agent"
	echo "id: $ID"
	[ -n "$ROOT" ] && echo "root_dir: $ROOT"
} >"$tmp" 2>/dev/null || { rm -f "$tmp"; fail nospace "cannot write $CONF/agent (no space left?)"; }
mv -f "$tmp" "$CONF/agent"

# The key: a preseeded one (its public key is already accepted by the
# master), else the one halite-flash sent, else the agent makes one at
# first start (and waits, pending, for halite-key -a).
if [ -f "$HERE/keys/$ID.pem" ]; then
	[ -f "$PKI/minion.pem" ] && ! cmp -s "$HERE/keys/$ID.pem" "$PKI/minion.pem" && cp "$PKI/minion.pem" "$PKI/minion.pem.old"
	put "$HERE/keys/$ID.pem" "$PKI/minion.pem" 600
	put "$HERE/keys/$ID.pub" "$PKI/minion.pub" 644
fi

stop_old
if [ -n "$MOVE" ]; then
	chmod 755 "$HERE/halite-agent" && mv -f "$HERE/halite-agent" "$BIN" || fail write "cannot move the agent to $BIN"
else
	put "$HERE/halite-agent" "$BIN" 755
fi
# The caller is the same binary under another name (halite-agent is
# multi-call): a symlink, not a second copy of the agent in flash. It
# replaces a halite-call file an older install left.
ln -sf halite-agent "$ROOT$BIN_DIR/halite-call" || fail write "cannot link $ROOT$BIN_DIR/halite-call to halite-agent"
if ! "$BIN" --version >/dev/null 2>&1; then
	[ -n "$FORCE_ARCH" ] || fail arch "$BIN does not run on this device ($(uname -m)): wrong --arch?"
	echo "install.sh: warning: $BIN --version fails here (--force-arch: installed anyway)" >&2
fi

start_agent() {
	case $INIT in
	systemd)
		mkdir -p "$ROOT/etc/systemd/system"
		paths "$HERE/init/halite-agent.service" >"$ROOT/etc/systemd/system/halite-agent.service"
		if [ -z "$ROOT" ]; then
			systemctl daemon-reload && systemctl enable halite-agent >/dev/null 2>&1
			[ -n "$START" ] && { systemctl restart halite-agent || fail start "systemctl restart halite-agent failed: see journalctl -u halite-agent"; }
		fi
		;;
	procd)
		paths "$HERE/init/halite-agent.procd" >"$ROOT/etc/init.d/halite-agent" && chmod 755 "$ROOT/etc/init.d/halite-agent"
		if [ -z "$ROOT" ]; then
			/etc/init.d/halite-agent enable
			[ -n "$START" ] && { /etc/init.d/halite-agent restart || fail start "/etc/init.d/halite-agent restart failed: see logread"; }
		fi
		;;
	sysv)
		mkdir -p "$ROOT/etc/init.d"
		paths "$HERE/init/halite-agent.init" >"$ROOT/etc/init.d/halite-agent" && chmod 755 "$ROOT/etc/init.d/halite-agent"
		if [ -z "$ROOT" ] && command -v update-rc.d >/dev/null 2>&1; then
			update-rc.d halite-agent defaults >/dev/null 2>&1
		elif [ -d "$ROOT/etc/rc.d" ]; then
			ln -sf ../init.d/halite-agent "$ROOT/etc/rc.d/S95halite-agent"
		else
			# BusyBox's rcS runs /etc/init.d/S??* at boot.
			ln -sf halite-agent "$ROOT/etc/init.d/S95halite-agent"
		fi
		if [ -n "$START" ]; then
			"$ROOT/etc/init.d/halite-agent" restart >&2 || fail start "$ROOT/etc/init.d/halite-agent start failed: run $BIN -c $CONF -l info to see why"
		fi
		;;
	none)
		echo "install.sh: no init system found: start the agent with $BIN -c $CONF" >&2
		;;
	esac
}
start_agent
echo "HALITE-INSTALL ok id=$ID arch=${ARCH:-unknown} init=$INIT"
