# Halite — make targets. `make demo` and `make test` are all the set-up there is.
SHELL := /bin/bash
GO        ?= go
BIN       := bin
DIST      := dist
CMDS      := halite-master halite-agent halite halite-key halite-run halite-call
LDFLAGS   := -s -w
GOFLAGS_B := -trimpath
# Agent-side programs, built for every device architecture.
AGENT_CMDS := halite-agent halite-call
MASTER_CMDS := halite-master halite halite-key halite-run
# The agent is flashed on devices with little flash: inlining is turned off
# except in the hot packages (the runtime and its maps, sync, crypto, QUIC,
# CBOR), which saves about 0.6 MiB on linux/arm v7 at no measurable cost to
# the agent's work, which waits on the network and on the commands it runs.
# `make cross` prints the sizes; docs/BENCHMARKS.md records them.
AGENT_GCFLAGS := -gcflags=all=-l -gcflags=runtime/...= -gcflags=internal/runtime/...= -gcflags=crypto/...= \
  -gcflags=sync/...= -gcflags=github.com/quic-go/...= -gcflags=github.com/fxamacker/...=
# Cross targets: name goos goarch goarm gomips
CROSS := linux-amd64:linux:amd64:: linux-arm64:linux:arm64:: linux-armv6:linux:arm:6: linux-armv7:linux:arm:7: linux-mipsle:linux:mipsle::softfloat

.PHONY: all build cross test test-short demo bench deps clean fmt vet

all: build

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_B) -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(MASTER_CMDS))
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_B) $(AGENT_GCFLAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(AGENT_CMDS))
	@ls -l $(BIN) | awk 'NR>1 {printf "  %-14s %6.2f MiB\n", $$9, $$5/1048576}'

cross:
	@for t in $(CROSS); do \
	  IFS=: read name goos goarch goarm gomips <<< "$$t"; \
	  mkdir -p $(DIST)/$$name; \
	  cmds="$(AGENT_CMDS)"; \
	  case $$goarch in amd64|arm64) cmds="$(CMDS)";; esac; \
	  for c in $$cmds; do \
	    gcf=""; case " $(AGENT_CMDS) " in *" $$c "*) gcf="$(AGENT_GCFLAGS)";; esac; \
	    CGO_ENABLED=0 GOOS=$$goos GOARCH=$$goarch GOARM=$$goarm GOMIPS=$$gomips \
	      $(GO) build $(GOFLAGS_B) $$gcf -ldflags '$(LDFLAGS)' -o $(DIST)/$$name/$$c ./cmd/$$c || exit 1; \
	  done; \
	  printf "  %-14s halite-agent %6.2f MiB\n" $$name $$(echo "scale=2; $$(stat -c %s $(DIST)/$$name/halite-agent)/1048576" | bc); \
	done

deps:
	@bash tools/ci/deps.sh

vet:
	$(GO) vet ./...

# The full suite: unit tests, end-to-end tests with real processes, the
# linux/arm v7 agent under qemu-arm, all with the race detector.
test: deps vet
	bash tools/ci/services.sh
	$(GO) test -race -count=1 -timeout 15m ./...

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
