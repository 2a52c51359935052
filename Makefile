# allot: build, test, bench, e2e and fuzz targets. `make test` is what CI runs.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/allot-sched/allot/internal/version.Version=$(VERSION)
FUZZTIME  ?= 10s
BENCHTIME ?= 1s

.PHONY: all build test fmt-check vet unit arrows bench e2e fuzz tidy-check clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

test: fmt-check vet arrows unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi; echo "gofmt: ok"

vet:
	$(GO) vet ./...

arrows:
	@./scripts/check-arrows.sh

unit:
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

# e2e runs against a real `nomad agent -dev` found via NOMAD_BIN or PATH; the
# tests skip with a one-line reason when there is none.
e2e: build
	ALLOT_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -v -timeout 30m ./e2e/...

fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

tidy-check:
	@cp go.mod /tmp/allot.go.mod; cp go.sum /tmp/allot.go.sum; $(GO) mod tidy; \
	if ! cmp -s go.mod /tmp/allot.go.mod || ! cmp -s go.sum /tmp/allot.go.sum; then echo "go mod tidy changed go.mod/go.sum"; exit 1; fi

clean:
	rm -rf $(BIN)
