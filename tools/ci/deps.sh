#!/usr/bin/env bash
# Installs what the test suite needs and is not in Go modules: qemu-arm (for
# the linux/arm v7 agent end-to-end test), bc (the Makefile's size report),
# zsh, fish, busybox, logrotate, systemd-analyze, dropbear and openssh-server.
# Idempotent; quiet when everything is there.
set -euo pipefail
need=()
command -v qemu-arm-static >/dev/null 2>&1 || command -v qemu-arm >/dev/null 2>&1 || need+=(qemu-user-static)
command -v bc >/dev/null 2>&1 || need+=(bc)
# The shells the completion scripts are checked with, BusyBox (the init
# script runs under its ash, as on cameras) and logrotate (the snippet).
command -v zsh >/dev/null 2>&1 || need+=(zsh)
command -v fish >/dev/null 2>&1 || need+=(fish)
command -v busybox >/dev/null 2>&1 || need+=(busybox)
command -v logrotate >/dev/null 2>&1 || need+=(logrotate)
# systemd-analyze verifies the packaged units (firmware/pkg; dpkg-deb and
# dpkg, which those tests run too, are in every Debian system).
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# The SSH servers halite-flash is tested against: dropbear (what cameras
# run) and OpenSSH, both started by the tests on loopback.
[ -x /usr/sbin/dropbear ] || need+=(dropbear-bin)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
if ((${#need[@]})); then
  echo "installing: ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
