#!/usr/bin/env bash
# Installs what the test suite needs and is not in Go modules: qemu-arm (for
# the linux/arm v7 agent end-to-end test) and bc (the Makefile's size report).
# Idempotent; quiet when everything is there.
set -euo pipefail
need=()
command -v qemu-arm-static >/dev/null 2>&1 || command -v qemu-arm >/dev/null 2>&1 || need+=(qemu-user-static)
command -v bc >/dev/null 2>&1 || need+=(bc)
if ((${#need[@]})); then
  echo "installing: ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
