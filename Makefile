# Halite — make targets. `make demo` and `make test` are all the set-up there is.
SHELL := /bin/bash
GO        ?= go
BIN       := bin
DIST      := dist
CMDS      := halite-master halite-agent halite halite-key halite-run halite-flash
# --version and --versions-report print these (internal/version); a build
# without them says "devel" with the commit Go recorded, if any.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION_PKG := github.com/halite-fleet/halite/internal/version
LDFLAGS   := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT)
GOFLAGS_B := -trimpath
# Agent-side programs, built for every device architecture. The agent is
# multi-call: halite-call is a symlink to it (argv[0]; also `halite-agent
# call ...`), one file on a device instead of two (cmd/halite-call still
# builds the caller alone, for development).
AGENT_CMDS := halite-agent
AGENT_LINKS := halite-call
MASTER_CMDS := halite-master halite halite-key halite-run halite-flash
# The agent is flashed on devices with little flash. On 32-bit ARM and MIPS
# (cameras, gateways: the relay is not built in there, see
# cmd/halite-agent/norelay.go) inlining is turned off everywhere
# (AGENT_GCFLAGS_SMALL), which keeps linux/arm v7 under 8.5 MiB; the cost is
# CPU the device seldom spends (an ed25519 verify per job: ~50 -> ~60 us on
# amd64). On amd64 and arm64, where relays run and size matters less, the
# hot packages (runtime, sync, crypto, QUIC, CBOR) keep their inlining
# (AGENT_GCFLAGS). `make cross` prints the sizes; docs/BENCHMARKS.md
# records them.
AGENT_GCFLAGS := -gcflags=all=-l -gcflags=runtime/...= -gcflags=internal/runtime/...= -gcflags=crypto/...= \
  -gcflags=sync/...= -gcflags=github.com/quic-go/...= -gcflags=github.com/fxamacker/...=
# AGENT_GCFLAGS_SMALL is one argument (the recipe passes it quoted): -l and
# two compiler settings that change no program's meaning, only its size:
# maxshapelen=64 names a generic instantiation by a 64-character hash of its
# shape, as Go already does above 500 characters (shorter function names in
# the binary's symbol table: -24 KiB on armv7); variablemakethreshold=0
# leaves a make([]T, n) of unknown n on the heap instead of adding a stack
# copy of it for n*size <= 32 bytes at every such call (-48 KiB; the cost is
# an allocation the device seldom makes). cmd/halite-agent's TestAgentSize,
# firmware/build.go and e2e/qemu_test.go build with the same flags.
AGENT_GCFLAGS_SMALL := -gcflags=all=-l -d=maxshapelen=64,variablemakethreshold=0
# On 32-bit ARM, whose Linux has 4 KiB pages only, the agent's segments are
# aligned to 4 KiB instead of the linker's 64 KiB default for arm: the
# padding between them is gone (about 0.1 MiB of flash). Not on MIPS, where
# kernels with 16 KiB and 64 KiB pages exist.
AGENT_LDFLAGS_ARM := -R 0x1000
# On 32-bit ARM and MIPS the agent is built with a trimmed standard library:
# no P-224/P-384/P-521 arithmetic, no TLS 1.0-1.2, no RSA (the device's QUIC
# client speaks TLS 1.3 with Ed25519 keys only; about -330 KB on armv7).
# tools/gotrim writes the go build -overlay file that swaps in
# third_party/gotrim/<go version>/ and refuses, failing the build, a Go
# version or GOROOT the trims were not made for (third_party/gotrim/HALITE.md
# says how to port them). TestAgentSize, firmware/build.go and
# e2e/qemu_test.go build with the same overlay.
AGENT_OVERLAY := $(DIST)/gotrim-overlay.json
# Cross targets: name goos goarch goarm gomips
CROSS := linux-amd64:linux:amd64:: linux-arm64:linux:arm64:: linux-armv6:linux:arm:6: linux-armv7:linux:arm:7: linux-mipsle:linux:mipsle::softfloat

.PHONY: all build cross packages test test-short demo bench deps clean fmt vet

all: build

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_B) -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(MASTER_CMDS))
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_B) $(AGENT_GCFLAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(AGENT_CMDS))
	@for l in $(AGENT_LINKS); do ln -sfn halite-agent $(BIN)/$$l; done
	@ls -l $(BIN) | awk 'NR>1 && !/^l/ {printf "  %-14s %6.2f MiB\n", $$9, $$5/1048576} /^l/ {printf "  %-14s -> %s\n", $$9, $$11}'

cross:
	@mkdir -p $(DIST) && $(GO) run ./tools/gotrim -go $(GO) -o $(AGENT_OVERLAY)
	@for t in $(CROSS); do \
	  IFS=: read name goos goarch goarm gomips <<< "$$t"; \
	  mkdir -p $(DIST)/$$name; \
	  cmds="$(AGENT_CMDS)"; \
	  case $$goarch in amd64|arm64) cmds="$(CMDS)";; esac; \
	  for c in $$cmds; do \
	    gcf=(); ldf=""; case " $(AGENT_CMDS) " in *" $$c "*) gcf=($(AGENT_GCFLAGS)); \
	      case $$goarch in arm|mips*) gcf=("$(AGENT_GCFLAGS_SMALL)" -overlay=$(AGENT_OVERLAY));; esac; \
	      case $$goarch in arm) ldf="$(AGENT_LDFLAGS_ARM)";; esac;; esac; \
	    CGO_ENABLED=0 GOOS=$$goos GOARCH=$$goarch GOARM=$$goarm GOMIPS=$$gomips \
	      $(GO) build $(GOFLAGS_B) "$${gcf[@]}" -ldflags '$(LDFLAGS) '"$$ldf" -o $(DIST)/$$name/$$c ./cmd/$$c || exit 1; \
	  done; \
	  for l in $(AGENT_LINKS); do ln -sfn halite-agent $(DIST)/$$name/$$l; done; \
	  printf "  %-14s halite-agent %6.2f MiB\n" $$name $$(echo "scale=2; $$(stat -c %s $(DIST)/$$name/halite-agent)/1048576" | bc); \
	done

# System packages from the cross builds, into dist/packages (halite-flash
# package, firmware/pkg): .deb for the agent (amd64, arm64, armv7 as armhf,
# mipsle as mipsel), the relay and the master (amd64, arm64), and .ipk for
# the agent on OpenWrt (every arch). armv6 makes an armhf .deb too
# (Raspberry Pi OS on a Pi 1 or Zero), with armv7's file name: build it
# apart with `halite-flash package --format deb --arch armv6 -o DIR`.
# Without a tag, the version is 0.0.0+COMMITS.gHASH, which sorts by commit
# count (a bare hash would not).
PKG_VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo "0.0.0-$$(git rev-list --count HEAD 2>/dev/null || echo 0)-g$$(git rev-parse --short HEAD 2>/dev/null || echo 0000000)")
PKGS := deb:agent:amd64 deb:agent:arm64 deb:agent:armv7 deb:agent:mipsle deb:relay:amd64 deb:relay:arm64 \
  deb:master:amd64 deb:master:arm64 ipk:agent:amd64 ipk:agent:arm64 ipk:agent:armv7 ipk:agent:armv6 ipk:agent:mipsle

packages: cross
	@mkdir -p $(BIN) $(DIST)/packages
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_B) -ldflags '$(LDFLAGS)' -o $(BIN)/halite-flash ./cmd/halite-flash
	@for p in $(PKGS); do \
	  IFS=: read format kind arch <<< "$$p"; \
	  $(BIN)/halite-flash package --format $$format --kind $$kind --arch $$arch --version '$(PKG_VERSION)' \
	    --bin $(DIST)/linux-$$arch -o $(DIST)/packages || exit 1; \
	done

deps:
	@bash tools/ci/deps.sh

vet:
	$(GO) vet ./...

# The full suite: unit tests, end-to-end tests with real processes, the
# linux/arm v7 agent under qemu-arm, all with the race detector (and the
# allocation tests again without it).
test: deps vet
	bash tools/ci/services.sh
	$(GO) test -race -count=1 -timeout 15m ./...
	# Without -race as well: allocation counts (sync.Pool drops items under
	# -race) and the quic-go copy's own tests of Halite's patches.
	$(GO) test -count=1 -run 'Allocs|AllocatesNothing|Halite' ./protocol ./targets github.com/quic-go/quic-go

test-short:
	$(GO) test -short -count=1 ./...

demo: build
	@bash tools/demo.sh

bench: build
	@bash tools/bench.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) $(DIST)
