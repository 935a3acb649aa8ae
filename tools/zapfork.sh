#!/usr/bin/env bash
# tools/zapfork.sh: (re)makes third_party/zap, the copy of go.uber.org/zap
# that go.mod's replace directive builds with, from the version go.mod
# requires: zap's own source (no tests, no zapgrpc, no CI files) less
# http_handler.go and reflected_encoder.go, with tools/zapfork.patch.
# http_handler.go is zap's only import of net/http (AtomicLevel.ServeHTTP,
# which Halite does not use); without it the armv7 agent links no
# net/http, mime or IDNA tables (192 KiB smaller). The patch makes the
# JSON encoder call encoding/json's Encoder directly instead of through
# zap's ReflectedEncoder interface (EncoderConfig.NewReflectedEncoder,
# which Halite does not set, goes): an interface call of
# Encode(interface{}) error keeps every reachable type's method of that
# signature, (*yaml.Node).Encode among them and go-yaml's whole encoder
# behind it (94 KB of the armv7 agent). Run it after changing the zap
# version in go.mod (if the patch no longer applies, redo it on the new
# source), then go build ./... and the tests; third_party/zap/HALITE.md
# records what differs from upstream.
set -euo pipefail
cd "$(dirname "$0")/.."
ver=$(go list -m -mod=mod -f '{{.Version}}' go.uber.org/zap)
go mod download go.uber.org/zap@"$ver"
src=$(go mod download -json go.uber.org/zap@"$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
dst=third_party/zap
rm -rf "$dst"
mkdir -p "$dst"
(cd "$src" && find . -type f \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum -o -name LICENSE \) \
	! -path './zapgrpc/*' ! -path './internal/readme/*' ! -path './.github/*' ! -name http_handler.go \
	! -name reflected_encoder.go -print0) |
	(cd "$src" && xargs -0 cp --parents -t "$OLDPWD/$dst")
chmod -R u+w "$dst"
patch -s -d "$dst" -p1 --no-backup-if-mismatch <tools/zapfork.patch
cat >"$dst/HALITE.md" <<MD
# go.uber.org/zap $ver, less net/http and the reflected-encoder interface

Made by tools/zapfork.sh from the module go.mod requires; do not edit by hand.
It is zap $ver's source without its tests, zapgrpc, internal/readme,
http_handler.go (AtomicLevel.ServeHTTP) and reflected_encoder.go, with
tools/zapfork.patch applied. http_handler.go is zap's only import of
net/http; without it the armv7 agent does not link net/http, mime and the
IDNA and Unicode normalisation tables. The patch removes
EncoderConfig.NewReflectedEncoder and the ReflectedEncoder interface: the
JSON encoder writes zap.Any/zap.Reflect values with encoding/json's
Encoder (HTML not escaped, as zap's default), called directly. Through the
interface, the call Encode(interface{}) error made the linker keep every
reachable type's method of that signature, go-yaml's (*yaml.Node).Encode
and the whole go-yaml encoder with it. go.mod builds every Halite binary
with this copy (replace go.uber.org/zap => ./third_party/zap).
MD
