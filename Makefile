# mink — see README.md. `make run` and `make test` work on a fresh machine:
# they install what they need (Go modules, versitygw, Debian packages).

GO      ?= go
BIN     := bin/mink
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
GOBIN   := $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)
# DuckDB's Arrow interface is compiled in only with this tag (sqlfront/engine).
export GOFLAGS := $(strip $(shell $(GO) env GOFLAGS) -tags=duckdb_arrow)

# Packages that link cgo dependencies (DuckDB, pg_query) are tested without
# -race; every other package is pure Go and runs under the race detector.
CGO_PKGS  := github.com/minkdb/mink/sqlfront github.com/minkdb/mink/sqlfront/engine \
	github.com/minkdb/mink/server github.com/minkdb/mink/cmd/mink github.com/minkdb/mink/bench \
	github.com/minkdb/mink/bench/cmd/minkbench
ALL_PKGS   = $(shell $(GO) list ./...)
PURE_PKGS  = $(filter-out $(CGO_PKGS),$(ALL_PKGS))

.PHONY: all build run test test-deps deps bench lint clean soak kgo-integration

all: build

deps:
	$(GO) mod download

build: deps
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/mink

# A single node with the embedded defaults: etcd inside the process, objects
# in ./mink-data/objects, Postgres wire on 127.0.0.1:5433, admin on :9480.
run: build
	./$(BIN) server

test-deps: deps
	./scripts/install-test-deps.sh

test: test-deps build test-rust
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m $(PURE_PKGS)
ifneq ($(strip $(CGO_PKGS)),)
	$(GO) test -count=1 -timeout 25m $(CGO_PKGS)
endif

# A long seeded random fault schedule (cmd/mink TestRandomFaultSchedule):
# SIGKILL, SIGSTOP/SIGCONT, cuts from etcd, S3 refusing a node or slowing
# down, etcd losing its quorum, clean restarts and rebalances of three nodes under
# writes, the history checked with porcupine. `make test` runs it for 30 s.
# SOAK sets the length; SEED=n replays the schedule of seed n.
SOAK ?= 10m
soak: test-deps build
	MINK_SCHEDULE=$(SOAK) MINK_SEED=$(SEED) $(GO) test -count=1 -timeout 3h -v -run '^TestRandomFaultSchedule$$' ./cmd/mink

# Benchmarks against their peers; results go to bench/RESULTS.md by hand,
# with the command, the machine and the date.
bench: test-deps build
	$(GO) run ./bench/cmd/minkbench all

# franz-go's own pkg/kgo integration tests against a mink node, the subset
# that passes (docs/kafka.md, "franz-go's integration tests"); about 2.5
# minutes, not part of `make test`.
kgo-integration: build
	./scripts/kgo-integration.sh

lint: deps lint-rust
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean:
	rm -rf bin

include clients/rust/rust.mk
