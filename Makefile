# kubectl-registry: one binary that is both the `kubectl registry` plugin and the
# controller it installs (`kubectl registry serve`). `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
MODULE    := github.com/kubectl-registry/kubectl-registry
BIN       ?= $(CURDIR)/bin
TESTBIN   ?= $(BIN)/testbin
GOTEST_FLAGS ?= -count=1 -timeout=40m

# Version stamped into the binary: the nearest v* tag, else a dev version of the commit.
COMMIT    ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
VERSION   ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.1.0-dev+$(COMMIT))
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -s -w \
	-X $(MODULE)/reconciler/buildinfo.Version=$(VERSION) \
	-X $(MODULE)/reconciler/buildinfo.Commit=$(COMMIT) \
	-X $(MODULE)/reconciler/buildinfo.Date=$(BUILD_DATE)

# Upstream Kubernetes version the test bed builds (testdata/testbin/go.mod pins it).
KUBE_VERSION := v1.36.3
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION)
KUBE_COMMANDS := kube-apiserver kube-controller-manager kubectl
TESTBIN_BINARIES := $(addprefix $(TESTBIN)/,$(KUBE_COMMANDS) etcd promtool)

CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen

##@ General

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-10s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build bin/kubectl-registry (static, version stamped) and bin/kubectl_complete-registry
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-registry ./cmd/kubectl-registry
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/kubectl_complete-registry ./cmd/kubectl_complete-registry

.PHONY: generate
generate: ## Regenerate deepcopy code and CRD manifests with the pinned controller-gen, then the chart and kustomize base
	$(CONTROLLER_GEN) object paths=./reconciler/api/... crd output:crd:artifacts:config=manifests/crds
	$(MAKE) charts

# The Helm chart and the kustomize base are generated from the manifests `install` embeds
# (manifests/*.yaml, crds/, monitoring/); TestGeneratedFilesAreCurrent fails when they are stale.
.PHONY: charts
charts: ## Regenerate the Helm chart (manifests/helm) and kustomize base (manifests/kustomize) from the manifests
	$(GO) run ./manifests/gen

# Release packaging: `make dist` cross-builds these platforms into $(DIST); archive URIs in
# the krew manifest are $(DIST_BASE_URL)/<archive> (the GitHub release of the tag).
DIST           ?= $(CURDIR)/dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
DIST_BASE_URL  ?= https://github.com/kubectl-registry/kubectl-registry/releases/download/$(VERSION)
# The controller image's name: for `make image`, the name in the tarball (empty means the
# manifests' default image, manifests.DefaultImage, which `kubectl registry install`
# deploys); for `make image-push`, the names to push to (required, separated by spaces).
IMAGE          ?=
IMAGE_ARCH     ?= amd64
# The platforms of the multi-arch controller image (make image-index, make image-push).
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
# PUSH_FLAGS=--insecure lets make image-push use a registry served over plain HTTP.
PUSH_FLAGS     ?=

.PHONY: dist
dist: ## Cross-build release archives, the Helm chart, the kustomize base, checksums.txt and the krew manifest into dist/
	@# The published chart and base must be what the manifests generate (make charts).
	$(GO) test -count=1 -run '^TestGeneratedFilesAreCurrent$$' ./manifests/gen
	rm -rf $(DIST)
	for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		echo "building $$os/$$arch" >&2; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $(DIST)/bin/$${os}_$${arch}/kubectl-registry$$ext ./cmd/kubectl-registry; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w' \
			-o $(DIST)/bin/$${os}_$${arch}/kubectl_complete-registry$$ext ./cmd/kubectl_complete-registry; \
	done
	$(GO) run ./cmd/registry-dist package --version '$(VERSION)' --bin-dir $(DIST)/bin --out $(DIST) \
		--license LICENSE --template .krew.yaml --base-url '$(DIST_BASE_URL)' --platforms '$(DIST_PLATFORMS)' \
		--chart manifests/helm/kubectl-registry --kustomize manifests/kustomize --monitoring manifests/monitoring

.PHONY: image
image: ## Controller image tarball dist/kubectl-registry-image.tar without Docker (docker load -i it)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
		-o $(DIST)/bin/linux_$(IMAGE_ARCH)/kubectl-registry ./cmd/kubectl-registry
	$(GO) run ./cmd/registry-dist image --binary $(DIST)/bin/linux_$(IMAGE_ARCH)/kubectl-registry \
		--arch $(IMAGE_ARCH) --version '$(VERSION)' --output $(DIST)/kubectl-registry-image.tar $(if $(IMAGE),--tag '$(IMAGE)')

# The multi-arch controller image: one static binary per platform of IMAGE_PLATFORMS,
# each alone on an empty base, in one OCI image index (an OCI image layout at
# dist/image), without Docker. registry-dist checks every binary's ELF machine.
.PHONY: image-index
image-index: ## Controller image for IMAGE_PLATFORMS (linux/amd64 linux/arm64) as one OCI image index in dist/image, without Docker
	for p in $(IMAGE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "building $$os/$$arch" >&2; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $(DIST)/bin/$${os}_$${arch}/kubectl-registry ./cmd/kubectl-registry; \
	done
	$(GO) run ./cmd/registry-dist image-index --bin-dir $(DIST)/bin --platforms '$(IMAGE_PLATFORMS)' \
		--version '$(VERSION)' --output $(DIST)/image

# Pushes with go-containerregistry (no Docker needed), authenticated as `docker login`
# left it (~/.docker/config.json or its credential helper).
.PHONY: image-push
image-push: ## Push the multi-arch controller image to every name of IMAGE (IMAGE='registry.example.com/team/kubectl-registry:v0.2.0 ...')
	@[ -n "$(strip $(IMAGE))" ] || { echo "make image-push needs IMAGE, the names to push to, e.g. make image-push IMAGE=registry.example.com/team/kubectl-registry:v0.2.0 (this tree builds $(VERSION))" >&2; exit 1; }
	$(MAKE) image-index
	$(GO) run ./cmd/registry-dist push --layout $(DIST)/image $(PUSH_FLAGS) $(IMAGE)

# Cutting a release (docs/development.md#releases): from a clean tree, the manifests'
# default image takes the version's tag (manifests/deployment.yaml, then make charts), a
# commit "Release vX.Y.Z" records it, make dist builds the release from that commit, and
# an annotated tag vX.Y.Z marks it. Nothing is pushed: push the branch and the tag, then
# publish dist/ and make image-push yourself.
RELEASE_IMAGE_REPOSITORY := ghcr.io/kubectl-registry/kubectl-registry

.PHONY: release
release: ## Cut release VERSION=vX.Y.Z: clean tree, default image tag, commit, make dist, annotated tag (pushes nothing)
	@[ "$(origin VERSION)" = "command line" ] || { echo "usage: make release VERSION=vX.Y.Z" >&2; exit 1; }
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)\.[0-9]+)?$$ ]] || \
		{ echo "VERSION=$(VERSION) is not a release version (vX.Y.Z or vX.Y.Z-rc.N)" >&2; exit 1; }
	@[ -z "$$(git status --porcelain)" ] || { echo "the tree is not clean (git status): commit or stash first" >&2; git status --short >&2; exit 1; }
	@! git rev-parse -q --verify "refs/tags/$(VERSION)" >/dev/null || { echo "tag $(VERSION) exists already" >&2; exit 1; }
	@prev=$$(git describe --tags --match 'v*' --abbrev=0 2>/dev/null || true); \
		if [ -n "$$prev" ]; then echo "previous release: $$prev (make test-upgrade upgrades from it)"; fi
	sed -i -E 's#^(\s+image: $(RELEASE_IMAGE_REPOSITORY)):.*$$#\1:$(VERSION)#' manifests/deployment.yaml
	@grep -qE '^\s+image: $(RELEASE_IMAGE_REPOSITORY):$(VERSION)$$' manifests/deployment.yaml || \
		{ echo "manifests/deployment.yaml does not name $(RELEASE_IMAGE_REPOSITORY):$(VERSION)" >&2; exit 1; }
	$(MAKE) charts
	@if [ -n "$$(git status --porcelain)" ]; then \
		git add manifests && git commit -q -m "Release $(VERSION): the default controller image is $(RELEASE_IMAGE_REPOSITORY):$(VERSION)" && \
		echo "committed: $$(git log -1 --format='%h %s')"; \
	fi
	$(MAKE) dist VERSION=$(VERSION)
	@v=$$($(DIST)/bin/$$($(GO) env GOOS)_$$($(GO) env GOARCH)/kubectl-registry version 2>/dev/null | head -1 || true); \
		case "$$v" in *"$(VERSION)"*) ;; *) echo "the built binary says $$v, not $(VERSION)" >&2; exit 1;; esac
	git tag -a $(VERSION) -m "kubectl-registry $(VERSION)"
	@echo; echo "Tagged $(VERSION) at $$(git rev-parse --short HEAD); dist/ holds the release. Next, by hand:"; \
		echo "  git push origin HEAD $(VERSION)"; \
		echo "  upload dist/*.tar.gz dist/*.zip dist/*.tgz dist/checksums.txt dist/registry.yaml to the GitHub release $(VERSION)"; \
		echo "  make image-push VERSION=$(VERSION) IMAGE=$(RELEASE_IMAGE_REPOSITORY):$(VERSION)"

##@ Demo

.PHONY: demo
demo: build testbin ## Three API servers on loopback, a controller each, joined by the plugin, an example synced (Ctrl-C stops)
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./cmd/registry-demo --bin $(BIN)/kubectl-registry $(DEMO_FLAGS)

.PHONY: demo-check
demo-check: ## make demo without waiting: exits once the example Secret is on every cluster (CI runs it)
	$(MAKE) demo DEMO_FLAGS=--check

##@ Benchmarks

.PHONY: bench
bench: build testbin ## Sync latency, burst, write amplification, RSS at 10,000 objects, groups of 2/3/5/8 and CLI timings, against a trivial copier (BENCH_FLAGS=--quick)
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./cmd/registry-bench --bin $(BIN)/kubectl-registry $(BENCH_FLAGS)

# One real member (a real API server and `serve`) among 10, 25, 50 and 100 simulated peers
# (reconciler/peers/simpeer, all in the bench's process): docs/performance.md "A member
# among N peers". BENCH_SCALE_FLAGS=--quick runs 5 and 10 peers with 1,000 objects.
.PHONY: bench-scale
bench-scale: build testbin ## One member among 10/25/50/100 simulated peers: RSS, goroutines, connections, watches, idle CPU per peer, CPU per 1,000 synced, restart (BENCH_SCALE_FLAGS=--quick)
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./cmd/registry-bench --bin $(BIN)/kubectl-registry --mode peers --out bench-scale-results.json $(BENCH_SCALE_FLAGS)

# An outside check of bench's floor (#33): registry-probe shares no measurement code with
# registry-bench; docs/performance.md "An outside probe".
.PHONY: probe
probe: build testbin ## Create p50/p99 and a burst of 1,000: the registry against a copier measured with no controller process (PROBE_FLAGS)
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./cmd/registry-probe --bin $(BIN)/kubectl-registry $(PROBE_FLAGS)

##@ Test

.PHONY: testbin
testbin: $(TESTBIN_BINARIES) ## Build kube-apiserver, etcd, kube-controller-manager, kubectl and promtool for tests (only when missing)

$(addprefix $(TESTBIN)/,$(KUBE_COMMANDS)): testdata/testbin/go.mod
	@echo "building $(notdir $@) $(KUBE_VERSION) from the Go module proxy (a cold build takes minutes)" >&2
	cd testdata/testbin && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/$(notdir $@)

$(TESTBIN)/etcd: testdata/testbin/go.mod
	@echo "building etcd from the Go module proxy" >&2
	cd testdata/testbin && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ go.etcd.io/etcd/server/v3

# promtool (Prometheus v0.315.1 = 3.x, pinned by testdata/promtool/go.mod) checks and
# unit-tests the alerts of manifests/monitoring (TestPromtoolRules finds it next to the
# API server binaries).
$(TESTBIN)/promtool: testdata/promtool/go.mod
	@echo "building promtool from the Go module proxy (a cold build takes minutes)" >&2
	cd testdata/promtool && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/prometheus/prometheus/cmd/promtool

.PHONY: test
test: testbin ## Build what the tests need, run every test on real API servers, and scan the output for leaked secrets
	@mkdir -p $(BIN)
	@status=0; \
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test $(GOTEST_FLAGS) -json ./... 2>&1 | tee $(BIN)/test-output.json \
		| $(GO) run ./cmd/registry-leakscan -progress || status=$$?; \
	echo "scanning the tests' output ($(BIN)/test-output.json) for tokens, private keys and the canary"; \
	$(GO) run ./cmd/registry-leakscan $(BIN)/test-output.json; \
	exit $$status
	$(MAKE) fuzz FUZZTIME=20000x FUZZMINIMIZE=1000x

# The seed's controller (cisco-open/cluster-registry-controller) for the mixed-group e2e
# test (reconciler/e2e/seedmix): built from a local checkout at SEED_SRC (its module is not
# on the Go module proxy; its dependencies are), into $(SEED_BIN). Nothing of the seed is
# part of this repository: without the checkout the test skips, as on CI.
SEED_SRC ?=
SEED_BIN ?= $(BIN)/seed/manager

.PHONY: seed-controller
seed-controller: ## Build the seed's controller from the checkout at SEED_SRC into bin/seed/manager (for test-seedmix)
	@[ -n "$(SEED_SRC)" ] && [ -f "$(SEED_SRC)/go.mod" ] && [ -d "$(SEED_SRC)/deploy/charts/cluster-registry" ] || \
		{ echo "SEED_SRC=$(SEED_SRC) is not a checkout of cisco-open/cluster-registry-controller" >&2; exit 1; }
	cd $(SEED_SRC) && CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) build -trimpath -o $(SEED_BIN) ./cmd/manager

.PHONY: test-seedmix
test-seedmix: $(addprefix $(TESTBIN)/,$(KUBE_COMMANDS)) $(TESTBIN)/etcd seed-controller ## A group of the seed's controller and two of ours on real API servers (needs SEED_SRC)
	SEED_SRC=$(abspath $(SEED_SRC)) SEED_CONTROLLER=$(SEED_BIN) KUBEBUILDER_ASSETS=$(TESTBIN) \
		$(GO) test $(GOTEST_FLAGS) -p 1 ./reconciler/e2e/seedmix/

# The upgrade e2e test (reconciler/e2e/upgrade): a group formed with the previous
# release's binary, built from the git history (REGISTRY_PREVIOUS_REF: a tag, branch or
# commit; empty means the latest v* tag before HEAD), upgraded member by member to this
# tree's. It skips when the checkout holds no previous release (a clone without tags).
REGISTRY_PREVIOUS_REF ?=

.PHONY: test-upgrade
test-upgrade: $(addprefix $(TESTBIN)/,$(KUBE_COMMANDS)) $(TESTBIN)/etcd ## Upgrade a group from the previous release (REGISTRY_PREVIOUS_REF, default the latest v* tag) to this tree, member by member
	REGISTRY_PREVIOUS_REF='$(REGISTRY_PREVIOUS_REF)' REGISTRY_NEW_VERSION='$(VERSION)' KUBEBUILDER_ASSETS=$(TESTBIN) \
		$(GO) test $(GOTEST_FLAGS) -p 1 -v -run '^TestUpgrade$$' ./reconciler/e2e/upgrade/

# Fuzz targets: package:FuzzName.
FUZZ_TARGETS := ./reconciler/kubeconfig:FuzzParse ./reconciler/rules:FuzzApply ./reconciler/rules:FuzzPath ./reconciler/planner:FuzzDecide ./reconciler/planner:FuzzChoose
# A duration -fuzztime races Go's fuzz coordinator at its deadline (go.dev/issue/75804,
# fixed in Go 1.27): on a loaded machine a target then fails with "context deadline
# exceeded" and no failing input. make test gives counts instead (FUZZTIME=20000x,
# FUZZMINIMIZE=1000x: a few seconds a target), which have no deadline to race; a real
# finding always writes its input under testdata/fuzz.
FUZZTIME ?= 2m
FUZZMINIMIZE ?= 3s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 2m; make test runs 20,000 inputs of each)
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzzing $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) || exit 1; \
	done

# lint, cheapest check first: no tracked file over 1 MB outside testdata/; go.mod and
# go.sum as `go mod tidy` leaves them (direct dependencies marked right); a doc comment on
# every package; gofmt; go vet; staticcheck (pinned as a tool in go.mod; a finding kept on
# purpose carries a //lint:ignore with the reason); errcheck (pinned too) on the product
# and test infrastructure code, _test.go files apart, with the calls it leaves alone and
# why in .ci/errcheck-excludes.txt; the layers (what depguard would check: the import
# allow-lists per layer, verbs apart, the planner and sync-diff off controller machinery)
# the length of functions and of doc table rows, by their tests in cmd/kubectl-registry.
.PHONY: lint
lint: ## Check tracked file sizes, go mod tidy, package docs, gofmt, go vet, staticcheck, errcheck, the layers and function length
	.ci/large-files.sh
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy (the diff above): run go mod tidy" >&2; exit 1; }
	.ci/package-docs.sh
	@out=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...)); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) tool errcheck -ignoretests -exclude .ci/errcheck-excludes.txt ./...
	$(GO) test -count=1 -run '^(TestLayering|TestFunctionLength|TestDocTableRows)$$' ./cmd/kubectl-registry/
