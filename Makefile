# allot: build, test, bench, e2e and fuzz targets. `make test` is what CI runs.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/allot-sched/allot/internal/version.Version=$(VERSION)
FUZZTIME  ?= 10s
BENCHTIME ?= 1s

.PHONY: all build test fmt-check vet unit arrows arrows-selftest staticcheck bench e2e chaos fuzz tidy-check clean sim-suite fidelity

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

# test is what CI runs (.ci/run). The quick checks come first; staticcheck
# runs last, after the unit tests.
test: fmt-check vet arrows arrows-selftest tidy-check proto-check unit staticcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi; echo "gofmt: ok"

vet:
	$(GO) vet ./...

arrows:
	@./scripts/check-arrows.sh

# arrows-selftest shows that the arrows check fails when a package it names
# is missing or `go list` fails (it used to print ok for both).
arrows-selftest:
	@./scripts/check-arrows-selftest.sh

# staticcheck is pinned: a new release's new checks must not break make test
# on its own. The first run downloads and builds it (about a minute of CPU).
STATICCHECK_VERSION := v0.8.2

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

unit:
	$(GO) test -race -count=1 ./...

# sim-suite prints allot against the baseline on every scenario of
# examples/sim/suite (a few minutes on two cores); the regression suite
# pinned by make test is examples/sim/suite/regress (TestSimSuiteFigures).
sim-suite: build
	$(BIN)/allot sim suite examples/sim/suite

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

# e2e runs against a real `nomad agent -dev` found via NOMAD_BIN or PATH; the
# tests skip with a one-line reason when there is none.
e2e: build
	ALLOT_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -v -timeout 30m ./e2e/...

# fidelity runs the traces of examples/sim/fidelity on a real Nomad (one
# server, three clients with allot-nvml's fake GPUs) driven by an allot
# server, and through the simulator's model, and compares the two event logs
# (allot sim compare); skipped with a reason without Nomad. About 6 minutes;
# ALLOT_FIDELITY_OUT=DIR keeps the logs and comparisons.
fidelity: build
	ALLOT_FIDELITY=1 ALLOT_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -v -run TestFidelity -timeout 20m ./e2e/

# chaos runs three real `allot server` processes under a bounded write load,
# kills the leader, a follower and then all three with SIGKILL, and checks
# that every acknowledged write is on every server exactly once; then a
# server on an emptied raft.db (refused) and one whose disk fills up (a
# tmpfs: needs root, skipped otherwise). No Nomad needed; under a minute.
chaos: build
	ALLOT_CHAOS=1 ALLOT_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -v -run TestChaos -timeout 10m ./e2e/

fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

# tidy-check fails when `go mod tidy` would change go.mod or go.sum, and
# prints the change; -diff leaves both files as they are either way.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go mod tidy would change go.mod/go.sum (diff above): run go mod tidy and commit"; exit 1; }
	@echo "go mod tidy: ok"

clean:
	rm -rf $(BIN)

# proto regenerates nvplugin's Go code from its own .proto files (Nomad's wire
# protocol, declared in nvplugin/proto). The generator versions are pinned so
# the committed files are reproduced byte-for-byte; protoc comes from apt's
# protobuf-compiler (Debian 12: libprotoc 3.21.12), the plugins from the Go
# module proxy.
PROTOC_VERSION             := 3.21.12
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTO_TOOLS                := $(CURDIR)/$(BIN)/tools
PROTO_FILES                := $(addprefix nvplugin/proto/,hclspec/hcl_spec.proto structs/attribute.proto structs/stats.proto base/base.proto device/device.proto)

.PHONY: proto proto-check

# PROTO_OUT is where `make proto` writes (proto-check points it at a
# scratch directory).
PROTO_OUT ?= .

proto:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get update && apt-get install -y protobuf-compiler"; exit 1; }
	@v=$$(protoc --version); [ "$$v" = "libprotoc $(PROTOC_VERSION)" ] || { echo "protoc is '$$v'; want 'libprotoc $(PROTOC_VERSION)' for byte-identical output"; exit 1; }
	GOBIN=$(PROTO_TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(PROTO_TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	@mkdir -p $(PROTO_OUT)
	PATH=$(PROTO_TOOLS):$$PATH protoc -I . \
		--go_out=$(PROTO_OUT) --go_opt=paths=source_relative \
		--go-grpc_out=$(PROTO_OUT) --go-grpc_opt=paths=source_relative \
		$(PROTO_FILES)

# proto-check regenerates the code into a scratch directory and fails when
# it differs from the committed files (or one is missing on either side),
# leaving the tree as it is. Without protoc it is skipped with one line,
# except under CI=true (.ci/run installs protoc), where it must run.
proto-check:
	@if ! command -v protoc >/dev/null && [ "$${CI:-}" != true ]; then \
		echo "proto-check: skipped, no protoc (apt-get install -y protobuf-compiler; CI runs it)"; exit 0; fi; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory -s proto PROTO_OUT=$$tmp || exit 1; \
	stale=0; \
	for f in $$({ (cd $$tmp && find nvplugin/proto -name '*.pb.go'); git ls-files 'nvplugin/proto/*.pb.go'; } | sort -u); do \
		cmp -s "$$tmp/$$f" "$$f" || { echo "stale: $$f"; stale=1; }; \
	done; \
	if [ $$stale = 1 ]; then echo "generated protobuf code is stale: run make proto and commit"; exit 1; fi; \
	echo "proto-check: ok (nvplugin/proto reproduced byte-for-byte)"

# ui copies the uPlot pinned in ui/package-lock.json into ui/vendor (embedded
# by the server with the page sources of ui/src, and committed, so `make test`
# needs no Node); ui-check fails when the committed copy differs.
.PHONY: ui ui-check

ui:
	@command -v npm >/dev/null || { echo "npm missing: apt-get update && apt-get install -y npm"; exit 1; }
	cd ui && npm ci --no-audit --no-fund && npm run --silent build

ui-check: ui
	@git diff --exit-code -- ui/vendor && test -z "$$(git status --porcelain -- ui/vendor)" || { echo "ui/vendor is stale: run make ui and commit"; exit 1; }
