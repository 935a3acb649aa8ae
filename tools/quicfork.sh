#!/usr/bin/env bash
# tools/quicfork.sh: (re)makes third_party/quic-go, the copy of
# github.com/quic-go/quic-go that go.mod's replace directive builds with, from
# the version go.mod requires: quic-go's non-test source (no http3, interop,
# integration tests, examples, test utilities or mocks), its LICENSE and
# go.mod/go.sum, with Halite's changes applied on top: the patches in
# tools/quicfork/*.patch, in name order, each with patch -p1 and no fuzz, so a
# patch that no longer fits a new version stops the script instead of landing
# in the wrong place; then tools/quicfork/nolog, which makes quic-go's debug
# logging and qlog compile away on 32-bit ARM and MIPS. Run it after changing the
# quic-go version in go.mod (fix or regenerate any patch it rejects), then
# go build ./... and the tests; third_party/quic-go/HALITE.md lists what
# differs from upstream and why.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/quic-go/quic-go
ver=$(go list -m -mod=mod -f '{{.Version}}' "$mod")
go mod download "$mod@$ver"
src=$(go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
dst=third_party/quic-go
rm -rf "$dst"
mkdir -p "$dst"
(cd "$src" && find . -type f \( -name '*.go' ! -name '*_test.go' ! -name mockgen.go -o -name go.mod -o -name go.sum -o -name LICENSE \) \
	! -path './http3/*' ! -path './interop/*' ! -path './integrationtests/*' ! -path './example/*' \
	! -path './testutils/*' ! -path './internal/mocks/*' ! -path './internal/testdata/*' -print0) |
	(cd "$src" && xargs -0 cp --parents -t "$OLDPWD/$dst")
chmod -R u+w "$dst"
for p in tools/quicfork/*.patch; do
	if ! patch -d "$dst" -p1 -F0 -N -s --no-backup-if-mismatch <"$p"; then
		echo "quicfork: $p does not apply to $mod $ver; fix or regenerate it" >&2
		exit 1
	fi
done
if find "$dst" -name '*.rej' -o -name '*.orig' | grep -q .; then
	echo "quicfork: patch left .rej/.orig files in $dst" >&2
	exit 1
fi
nolog=$(go run ./tools/quicfork/nolog "$dst" | tail -n 1)
# The copy must build as it is used: on amd64, and on armv7 with and without
# its debug logging and qlog.
go build github.com/quic-go/quic-go/...
GOOS=linux GOARCH=arm GOARM=7 go build github.com/quic-go/quic-go/...
GOOS=linux GOARCH=arm GOARM=7 go build -tags quicdebug github.com/quic-go/quic-go/...
{
	cat <<MD
# $mod $ver, with Halite's changes

Made by tools/quicfork.sh from the module go.mod requires; do not edit by hand
(change a patch in tools/quicfork/ and run the script again). It is quic-go
$ver's source without its tests, http3, interop, integrationtests, example,
testutils and mocks, with the patches below applied in this order (a patch
may add Halite's own tests of it, halite_*_test.go, which make test runs:
go test -run Halite github.com/quic-go/quic-go). go.mod
builds every Halite binary with this copy
(replace $mod => ./$dst).

MD
	for p in tools/quicfork/*.patch; do
		echo "## $(basename "$p")"
		echo
		sed -n '/^---$/q; /^#/!q; s/^# \{0,1\}//p' "$p"
		echo
	done
	cat <<MD
## tools/quicfork/nolog

After the patches the script runs tools/quicfork/nolog over the copy
($nolog). It makes each call of quic-go's debug logger
(internal/utils.Logger's Debugf, Infof and Errorf, and its Debug() tests) test
protocol.LogEnabled first, and each qlog nil test protocol.QlogEnabled
(20-small-devices.patch): on 32-bit ARM and MIPS without -tags quicdebug the
compiler drops that code, elsewhere nothing changes. Nothing changes on the
wire.
MD
} >"$dst/HALITE.md"
