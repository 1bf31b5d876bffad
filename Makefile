# Gensee — containerd shim v2 with a kernel-enforced boundary per container.
# `make help` lists the targets. Root is needed for deps, test, demo, bench.

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/gensee/gensee/internal/version.Version=$(VERSION) \
	-X github.com/containerd/containerd/v2/version.Version=gensee-$(VERSION)
# Build tags of every binary. grpcnotrace: gRPC without its request tracing
# (golang.org/x/net/trace), whose html/template and text/template reach
# reflect's MethodByName, so the linker keeps every exported method of every
# reachable type: 4 MiB of the long-lived shim's text, rodata and pclntab,
# all of it mapped in every sleeping task's shim (P5). Nothing here serves
# gRPC. TAGS='grpcnotrace gensee_profile' adds the shim's measuring aid
# (cmd/gensee-shim/profile.go, hack/bench.sh).
TAGS ?= grpcnotrace
export PATH := $(BIN):$(PATH)
# make install: DESTDIR, PREFIX and SYSCONFDIR as usual; HOOKSDIR is podman's hooks directory.
DESTDIR ?=
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
HOOKSDIR ?= /usr/share/containers/oci/hooks.d
GOARCH ?= $(shell $(GO) env GOARCH)
DIST ?= $(CURDIR)/dist

.PHONY: help deps deps-demo build install uninstall release test unit race fuzz bench demo lint clean

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

deps: ## everything: Debian packages and every pinned tool the tests use, into bin/ (root)
	./hack/deps.sh all

deps-demo: ## only what the demo runs: containerd, ctr and runc into bin/ (root)
	./hack/deps.sh demo

build: ## build bin/gensee, bin/containerd-shim-gensee-v2 and bin/gensee-shim, bin/gensee-gate-helper, bin/gensee-runc, bin/gensee-oci-hook, bin/gensee-sandbox, bin/gensee-verifier, bin/gensee-events and bin/gensee-node
	$(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee ./cmd/gensee
	# The shim, the helper and the hook are exec'd on every container's
	# path: static, without cgo, as containerd builds its own shims
	# (SHIM_CGO_ENABLED=0), so no exec of them pays the dynamic loader and
	# libc's start-up. The CLI keeps cgo: its user lookups go through NSS.
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/containerd-shim-gensee-v2 ./cmd/containerd-shim-gensee-v2
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-shim ./cmd/gensee-shim
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-gate-helper ./cmd/gensee-gate-helper
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-oci-hook ./cmd/gensee-oci-hook
	# The runc the shim hands containerd's runc task service: it starts
	# and deletes a task itself and runs the real runc for the rest.
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-runc ./cmd/gensee-runc
	# The host run's wrapper and stage: static and small (no shim
	# dependencies), started twice per gensee boundary run.
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-sandbox ./cmd/gensee-sandbox
	# The JSON Schema judge gensee verify json-schema runs: the JSON
	# Schema library lives here only, never in the CLI (cmd/gensee's
	# TestNoJSONSchemaDeps), whose every start would pay its init.
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-verifier ./cmd/gensee-verifier
	# The subscriber gensee events --follow runs: gRPC and containerd's
	# protobuf types live here (and in the shim) only, never in the CLI
	# (cmd/gensee's TestNoRuntimeClientDeps), whose every start, a host
	# run's among them, would pay their init.
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-events ./cmd/gensee-events
	# The node daemon (metrics, Kubernetes Events): client-go and
	# client_golang live here only, never in the CLI (cmd/gensee's
	# TestNoKubernetesDeps).
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/gensee-node ./cmd/gensee-node

lint: ## go vet and staticcheck
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

test: deps build lint race ## everything: unit, root kernel tests and integration (root)
	GENSEE_ROOT_TESTS=1 GENSEE_BIN=$(BIN) $(GO) test -count=1 -timeout 25m -p 1 ./...

unit: ## tests that need neither root nor the kernel
	$(GO) test -count=1 ./...

race: ## the unit tests under the race detector (the root and integration tests skip)
	env -u GENSEE_ROOT_TESTS $(GO) test -race -count=1 -timeout 15m ./...

fuzz: ## run every fuzz target for a short time
	./hack/fuzz.sh 10s

bench: deps build ## benchmarks against their peers (root); prints ratios
	./hack/bench.sh

demo: deps-demo build ## a private containerd running one admitted and one refused container (root)
	./hack/demo.sh

.PHONY: conformance
conformance: deps build ## critest with the runc and the gensee handlers; the specs that differ (root)
	./hack/conformance.sh

.PHONY: k8s-deps k8s-e2e
k8s-deps: ## Kubernetes v1.37.2 (apiserver, controller-manager, scheduler, kubelet, kubectl), etcd, CNI plugins into bin/k8s/
	./hack/k8s-build.sh

k8s-e2e: deps build k8s-deps ## a private single-node Kubernetes through kubectl: Deployment+Service, Jobs, refusal, Events, metrics, installer (root)
	./hack/k8s-e2e.sh

install: ## install the built binaries, drop-ins, config, hook, man pages, completions (DESTDIR, PREFIX)
	DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' SYSCONFDIR='$(SYSCONFDIR)' HOOKSDIR='$(HOOKSDIR)' BIN='$(BIN)' VERSION='$(VERSION)' ./hack/install.sh install

uninstall: ## remove what make install put (never an operator config it did not create)
	DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' SYSCONFDIR='$(SYSCONFDIR)' HOOKSDIR='$(HOOKSDIR)' ./hack/install.sh uninstall

release: ## dist/: the tarball, SHA256SUMS, an in-toto provenance statement, the installer image
	DIST='$(DIST)' VERSION='$(VERSION)' GOARCH='$(GOARCH)' LDFLAGS='$(LDFLAGS)' TAGS='$(TAGS)' ./hack/release.sh

clean:
	rm -rf $(BIN) $(DIST)
