# floodgate: a Raft-replicated distributed rate limiter.
# `make` or `make help` lists the targets.

GO      ?= go
BIN     := bin
PKGS    := ./...
# Every package but the process-level suites runs under the race detector,
# so a new package is tested without anyone remembering to list it.
# The slowest packages come first: go test starts them in this order, and
# rpc and cluster mostly wait on real Raft timers, so started last (in
# name order) they ran on alone after the rest had finished.
RACE    = $$($(GO) list ./rpc/ ./cluster/ ./fsm/ ./rpc/client/ ./raftlog/ ./... | grep -v /test/)
# Property tests run a quarter of their sequences under -race
# (test/proptest), where the race detector makes them 6-9 times slower;
# the packages whose tests use it run again without -race, at full size.
PROPS   = $$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | grep ' github.com/floodgate/floodgate/test/proptest' | cut -d' ' -f1)
# Test binaries run two per core: the cluster and rpc packages spend most
# of their time waiting on real Raft timers (cluster: 166 s of wall time
# for 34 s of CPU), so with one per core the race pass idled half its
# time (2 cores: 338 s at -p 2, 231 s at -p 4).
RACEP   := $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) * 2 )))
# Binaries say which commit they are (--version) when built from a git
# checkout, whatever GOFLAGS says; elsewhere they say "rev unknown", and
# so do builds in a git worktree: the go command reads VCS information
# only where .git is a directory, and a worktree's .git is a file.
VCS     := $(shell git rev-parse --git-dir >/dev/null 2>&1 && echo -buildvcs=true || echo -buildvcs=false)

.DEFAULT_GOAL := help

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build floodgate and floodgatectl into ./bin
	$(GO) build $(VCS) -o $(BIN)/floodgate ./cmd/floodgate
	$(GO) build $(VCS) -o $(BIN)/floodgatectl ./cmd/floodgatectl

run: build ## Run a single-node cluster on loopback, data in ./floodgate-data
	./$(BIN)/floodgate --data-dir ./floodgate-data

test: ## Run every test: unit, property, race, system, end-to-end and fault
	$(GO) vet $(PKGS)
	$(GO) vet -tags clockskew ./wallclock/ ./cmd/floodgate/
	$(GO) test -race -count=1 -p $(RACEP) $(RACE)
	$(GO) test -count=1 $(PROPS)
	$(GO) test -count=1 -run '^TestAMemberMovedToNewAddressesTakesThem$$' ./cluster/ # trips hashicorp/raft's own race under -race
	$(GO) test -count=1 -tags clockskew ./wallclock/
	$(GO) test -count=1 -parallel 4 $$($(GO) list ./test/... | grep -v /test/fault)
	$(MAKE) deploy-check
	$(MAKE) fault

deploy-check: ## Check the Kubernetes manifests against the API types and run the Dockerfile's build steps
	cd deploy/check && $(GO) vet ./... && $(GO) test -count=1 ./...

fault: ## Run the fault-injection suite alone (real processes; partition and disk scenarios need root)
	$(GO) test -count=1 -timeout 15m -v ./test/fault/

e2e: ## Run only the end-to-end tests (real processes on loopback)
	$(GO) test -count=1 -parallel 4 -v ./test/e2e/

# Fuzz targets, package:Target; their seed corpora (testdata/fuzz/) also run
# as ordinary tests in `make test`.
FUZZ    := ./policy/:FuzzDecode ./fsm/:FuzzShardApply ./fsm/:FuzzShardRestore \
           ./fsm/:FuzzMetaApply ./fsm/:FuzzMetaRestore ./rpc/:FuzzPeerRequests \
           ./policyfile/:FuzzParse ./raftlog/:FuzzReplay ./raftnet/:FuzzDecode \
           ./window/:FuzzDecodeState ./backup/:FuzzParse
FUZZTIME ?= 20s

fuzz: ## Fuzz every decoder for FUZZTIME (20s) each, one at a time
	@set -e; for t in $(FUZZ); do \
		echo "== $${t#*:} ($${t%%:*})"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s "$${t%%:*}"; \
	done

# The load tool of `make bench`, installed on first use into $(BIN)/tools.
GHZ        := $(BIN)/tools/ghz
GHZ_MODULE := github.com/bojand/ghz/cmd/ghz@v0.93.0
BENCHFLAGS ?=

$(GHZ):
	GOBIN=$(abspath $(BIN)/tools) $(GO) install $(GHZ_MODULE)

bench: build $(GHZ) ## Measure issue 7's targets (ghz and Go SDK, idle, failover, 5 nodes, memory): ~10 min; BENCHFLAGS=--quick
	$(GO) run ./test/bench --ghz $(GHZ) $(BENCHFLAGS)

# The linter of `make lint`, installed on first use into $(BIN)/tools.
STATICCHECK        := $(BIN)/tools/staticcheck
STATICCHECK_MODULE := honnef.co/go/tools/cmd/staticcheck@v0.8.2

$(STATICCHECK):
	GOBIN=$(abspath $(BIN)/tools) $(GO) install $(STATICCHECK_MODULE)

lint: $(STATICCHECK) ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	$(STATICCHECK) -tags clockskew ./wallclock/ ./cmd/floodgate/

proto: ## Regenerate the protobuf code (needs protoc, protoc-gen-go, protoc-gen-go-grpc)
	protoc -I proto --go_out=. --go_opt=module=github.com/floodgate/floodgate \
		--go-grpc_out=. --go-grpc_opt=module=github.com/floodgate/floodgate \
		proto/floodgate/v1/*.proto proto/floodgate/meta/v1/*.proto proto/floodgate/peer/v1/*.proto

# Release: static binaries for each platform, stamped with VERSION (the
# tag of HEAD by default), and their SHA-256 sums, in ./dist.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
LDFLAGS   := -s -w -X github.com/floodgate/floodgate/version.Override=$(VERSION)

release: ## Build static release binaries for linux and darwin, amd64 and arm64, with checksums, into ./dist
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		for cmd in floodgate floodgatectl; do \
			out=dist/$$cmd-$(VERSION)-$$os-$$arch; \
			echo "  $$out"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build $(VCS) -trimpath -ldflags "$(LDFLAGS)" -o $$out ./cmd/$$cmd; \
		done; \
	done
	cd dist && sha256sum * > SHA256SUMS

clean: ## Remove build output, the default data dir and the README walkthroughs' files
	rm -rf $(BIN) dist floodgate-data data policies.yaml edge.yaml shop.yaml trace.out backup.fgbk

.PHONY: help build run test deploy-check e2e fuzz bench lint proto release clean
