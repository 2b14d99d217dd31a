# The policy is a TinyGo waPC module; the host and CLI are plain Go.
# `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
TINYGO    ?= tinygo
BUILD     := build
BINARY    := $(BUILD)/yunikorn-userinfo
LOADGEN   := $(BUILD)/loadgen
WASM      := $(BUILD)/policy.wasm
ANNOTATED := $(BUILD)/annotated-policy.wasm
EMBEDDED  := cmd/yunikorn-userinfo/policy.wasm
FUZZTIME  ?=

# Kubewarden's usual flags plus -buildmode=wasi-legacy -scheduler=none: the
# module's _start returns instead of calling proc_exit(0), so any waPC host
# can keep the instance (see RATIONALE.md, "Why `-buildmode=wasi-legacy`").
TINYGO_FLAGS := -target=wasi -no-debug -buildmode=wasi-legacy -scheduler=none

# Test files are not part of the module: editing a test or a fixture does
# not cost a TinyGo build.
POLICY_SRC := $(filter-out %_test.go,$(wildcard policy/*.go policy/*/*.go)) go.mod go.sum

.PHONY: help
help: ## List the targets
	@grep -E '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: tinygo
tinygo: ## Install TinyGo 0.41.1 (built from the Go module against Debian's LLVM 19) if missing
	@command -v $(TINYGO) >/dev/null && $(TINYGO) version | grep -q ' 0\.41\.1 ' || bash hack/install-tinygo.sh

$(WASM): $(POLICY_SRC)
	@mkdir -p $(BUILD)
	@start=$$(date +%s%N); \
	$(TINYGO) build -o $@ $(TINYGO_FLAGS) ./policy; \
	echo "tinygo build: $$(( ($$(date +%s%N) - start) / 1000000 )) ms, $$(stat -c %s $@) bytes"

.PHONY: policy
policy: tinygo $(WASM) ## Build the policy with TinyGo into build/policy.wasm

$(ANNOTATED): $(WASM) metadata.yml
	cd release && $(GO) run ./cmd/policymeta annotate $(CURDIR)/$(WASM) -m $(CURDIR)/metadata.yml -o $(CURDIR)/$@

.PHONY: annotated
annotated: policy $(ANNOTATED) ## Add the io.kubewarden.metadata section (build/annotated-policy.wasm)

.PHONY: embed
embed: annotated ## Refresh the module embedded in the CLI from a fresh TinyGo build
	cp $(ANNOTATED) $(EMBEDDED)

.PHONY: check-embedded
check-embedded: annotated ## Fail if the embedded module differs from a fresh, reproducible build
	@cmp $(ANNOTATED) $(EMBEDDED) && echo "embedded module matches a fresh build ($$(stat -c %s $(EMBEDDED)) bytes)" \
	  || { echo "cmd/yunikorn-userinfo/policy.wasm is stale: run 'make embed' and commit it"; exit 1; }

.PHONY: build
build: ## Build the CLI into build/yunikorn-userinfo
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BINARY) ./cmd/yunikorn-userinfo

# The release: version from metadata.yml, timestamps from the commit.
VERSION     ?= $(shell sed -n 's/^  io.kubewarden.policy.version: //p' metadata.yml)
SOURCE_URL  := https://github.com/yunikorn-userinfo/userinfo
IMAGE_DIR   := $(BUILD)/image
IMAGE_ARCHS := amd64 arm64

.PHONY: image-binaries
image-binaries: ## Static binaries for the image, one per architecture, into build/image-bin/ARCH
	@for arch in $(IMAGE_ARCHS); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" \
	    -o $(BUILD)/image-bin/$$arch/yunikorn-userinfo ./cmd/yunikorn-userinfo || exit 1; \
	done

.PHONY: image
image: image-binaries ## Container image of the webhook (linux/amd64, linux/arm64) as an OCI layout in build/image; reproducible from the commit
	cd release && $(GO) run ./cmd/image -o $(CURDIR)/$(IMAGE_DIR) \
	  --created $$(git log -1 --format=%ct) --revision $$(git rev-parse HEAD) --version $(VERSION) \
	  --source $(SOURCE_URL) --license Apache-2.0 \
	  --description "Admission webhook recording who submitted a workload in yunikorn.apache.org/user.info" \
	  $(foreach a,$(IMAGE_ARCHS),--platform linux/$(a)=$(CURDIR)/$(BUILD)/image-bin/$(a)/yunikorn-userinfo)

RELEASE_DIR := $(BUILD)/release

.PHONY: release
release: annotated image ## Everything a release ships into build/release: binaries, image (OCI layout tarball), policy module, CycloneDX SBOMs, release.json, SHA256SUMS (push and sign them with kwctl, oras and cosign: docs/INSTALL.md)
	cd release && $(GO) run ./cmd/release assemble -o $(CURDIR)/$(RELEASE_DIR) \
	  --version $(VERSION) --revision $$(git rev-parse HEAD) --created $$(git log -1 --format=%ct) \
	  --source $(SOURCE_URL) --license Apache-2.0 --policy $(CURDIR)/$(ANNOTATED) \
	  --image $(CURDIR)/$(IMAGE_DIR) --module-dir $(CURDIR) \
	  $(foreach a,$(IMAGE_ARCHS),--binary linux/$(a)=$(CURDIR)/$(BUILD)/image-bin/$(a)/yunikorn-userinfo)
	cd $(RELEASE_DIR) && sha256sum --check --quiet SHA256SUMS && ls -l

.PHONY: serve-local
serve-local: ## Serve the embedded policy on https://127.0.0.1:8443 with a throwaway self-signed certificate
	$(GO) run ./cmd/yunikorn-userinfo serve --self-signed --listen 127.0.0.1:8443 --metrics-listen 127.0.0.1:9090 --log-format text

.PHONY: loadgen
loadgen: ## Build the load generator into build/loadgen
	cd bench && $(GO) build -o $(CURDIR)/$(LOADGEN) ./cmd/loadgen

.PHONY: load
load: build loadgen ## Load-test a local serve at fixed rates and at saturation (RATES, DURATION, CONNECTIONS, FIXTURES)
	bash hack/load.sh

.PHONY: vet
vet: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l .); [[ -z "$$out" ]] || { echo "gofmt needed: $$out"; exit 1; }

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: ## staticcheck (2026.2.2) of the root, bench and release modules, and go mod tidy left nothing to do in any
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...
	cd release && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@cd bench && $(GO) mod tidy -diff || { echo "bench/go.mod is not tidy: run go mod tidy in bench/"; exit 1; }
	@cd release && $(GO) mod tidy -diff || { echo "release/go.mod is not tidy: run go mod tidy in release/"; exit 1; }

.PHONY: test
# The CLI's package (the fixture table through the CLI and serve, every
# command end to end) runs without the race detector here: under it, it
# took 680 s of a 13-minute make test on 2 cores, and the concurrency it
# drives is host/'s, whose packages still run under -race; make lab runs
# it under -race too (make test-race).
test: policy vet lint ## What every change must pass (.ci/run adds check-embedded, make hostile and make e2e): unit, the fixture table on every executor (native, our host, wapc-go, wasmtime, CLI, webhook), manifests, monitoring, in-process CEL, yunikorn-core differential (short), a brief fuzz run
	POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v '/cmd/yunikorn-userinfo$$')
	POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -count=1 -timeout 30m ./cmd/yunikorn-userinfo
	cd release && $(GO) test -count=1 ./cmd/policymeta ./internal/artifacthub
	$(MAKE) --no-print-directory test-bench-tools
	$(MAKE) --no-print-directory test-manifests
	$(MAKE) --no-print-directory test-monitoring
	$(MAKE) --no-print-directory test-kubewarden
	$(MAKE) --no-print-directory test-cel
	$(MAKE) --no-print-directory test-yunikorn
	$(MAKE) --no-print-directory fuzz

.PHONY: check
check: policy vet ## The inner loop (no root, no race, no byte-identical TinyGo: it tests the module make policy builds): vet, gofmt, staticcheck of the root module, the native policy tests, the fixture table on the built module, the CLI golden files
	$(GO) run $(STATICCHECK) ./...
	POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -count=1 -short ./policy/... ./host/conformance ./internal/... ./host
	POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -count=1 -run '^(TestRun_fixtures|TestPresetsFile)$$' ./cmd/yunikorn-userinfo ./policy

# Every generated file, refreshed by one target and checked by the other.
# generate rewrites them from their sources; verify fails, naming the file,
# when one is stale (make test runs the same checks).
.PHONY: generate
generate: embed ## Refresh every generated file: the embedded module, the CLI golden file, the chart's workload presets and CEL policies, the settings reference table and the chart schema's settings (from policy/settingsdef), the Artifact Hub golden files and artifacthub/
	$(GO) test ./cmd/yunikorn-userinfo -run '^TestRun_fixtures$$' -update
	$(GO) test ./cmd/yunikorn-userinfo -run '^TestMigrate_kubewardenGolden$$' -update
	$(GO) test ./policy -run '^TestPresetsFile$$' -update
	$(GO) test ./internal/cel -run '^(TestChartFile|TestParamsFile|TestTwinFile)$$' -update
	$(GO) test ./policy/settingsdef -run '^TestGenerated$$' -update
	cd release && $(GO) test ./internal/artifacthub -update
	$(MAKE) --no-print-directory artifacthub

.PHONY: verify
verify: check-embedded ## Fail when a generated file is stale (the checks make generate would change)
	POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -count=1 -run '^(TestRun_fixtures|TestPresetsFile|TestSettingsdef_matchesPolicy)$$' ./cmd/yunikorn-userinfo ./policy
	$(GO) test -count=1 ./policy/settingsdef
	cd release && $(GO) test -count=1 ./internal/artifacthub
	$(GO) test -count=1 -run '^(TestChartFile|TestParamsFile|TestTwinFile)$$' ./internal/cel
	@tmp=$$(mktemp -d); cp -r artifacthub $$tmp/ && (cd release && $(GO) run ./cmd/policymeta artifacthub -m $(CURDIR)/metadata.yml -o $$tmp/artifacthub) && \
	  diff -r artifacthub $$tmp/artifacthub && rm -rf $$tmp || { echo "artifacthub/ is stale: run make artifacthub"; rm -rf $$tmp; exit 1; }

.PHONY: test-race
test-race: policy ## The host tests under the race detector
	POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -race -count=1 ./host/... ./cmd/...

# package:target:executions (FUZZTIME, when set, replaces every count).
FUZZ_RUNS := ./policy:FuzzValidate:100000x ./policy:FuzzIndex:100000x \
  ./policy:FuzzCheckSuppliedValue:100000x ./policy:FuzzAppendJSONString:100000x \
  ./policy:FuzzAnnotationValue:100000x ./policy:FuzzStr:100000x ./policy:FuzzTooDeep:100000x \
  ./host/admission:FuzzCreatePatch:100000x ./host/admission:FuzzCanonical:100000x \
  ./host/admission:FuzzCheckDepth:100000x
.PHONY: fuzz
# A count of executions, not a duration: Go 1.26's fuzzing coordinator can
# report the end of a -fuzztime duration as "context deadline exceeded"
# with no failing input when a worker is starved at that moment (a race in
# internal/fuzz, fixed in Go 1.27); a count has no deadline to race. The
# generated corpus goes to build/fuzzcache, not $GOCACHE, so the baseline a
# run replays is the committed seeds and what this clone found, not every
# input of every earlier run on the machine (that grew without bound).
fuzz: ## A short, bounded fuzz run of each target (FUZZTIME: an execution count per target such as 200000x, or a duration); logs in build/fuzz-TARGET.log
	@mkdir -p $(BUILD); for t in $(FUZZ_RUNS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; f=$${rest%%:*}; n=$${rest##*:}; budget=$(or $(FUZZTIME),$$n); log=$(BUILD)/fuzz-$$f.log; \
	  echo "fuzz $$f ($$budget)"; \
	  if ! $(GO) test $$pkg -run '^$$' -fuzz "^$$f\$$" -fuzztime $$budget -test.fuzzcachedir=$(CURDIR)/$(BUILD)/fuzzcache/$$f >$$log 2>&1; then \
	    tail -30 $$log; \
	    if grep -q 'Failing input written to' $$log; then echo "failing input saved under $$pkg/testdata/fuzz/$$f"; fi; \
	    exit 1; \
	  fi; \
	done

.PHONY: artifacthub
artifacthub: ## Regenerate artifacthub/ from metadata.yml (createdAt is kept while the version is unchanged)
	cd release && $(GO) run ./cmd/policymeta artifacthub -m $(CURDIR)/metadata.yml -o $(CURDIR)/artifacthub

.PHONY: test-bench-tools
test-bench-tools: policy ## Tests of the bench module: load generator, perfkit, fixture generator, YuniKorn peer answers
	cd bench && POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -count=1 ./cmd/... ./internal/... ./peer/...

.PHONY: test-release
test-release: image ## Release tests: the release directory assembled twice and compared, the image read from its layout and run unpacked, and two builds of it compared
	cd release && YUNIKORN_IMAGE_LAYOUT=$(CURDIR)/$(IMAGE_DIR) $(GO) test -count=1 -timeout 20m ./...

.PHONY: test-manifests
test-manifests: ## Check every YAML file of the repository (nested module test/manifests)
	cd test/manifests && $(GO) vet ./... && $(GO) test -count=1 ./...

.PHONY: test-monitoring
test-monitoring: build ## The chart's alerts and dashboard loaded with Prometheus's rule and PromQL parsers, every metric they name checked against a running serve's /metrics (nested module test/monitoring)
	@mkdir -p $(BUILD)/chart
	cd test/manifests && $(GO) build -o $(CURDIR)/$(BUILD)/chartrender ./cmd/chartrender
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo \
	  -values 'monitoring: {rules: {enabled: true}, dashboard: {enabled: true}}' -out $(BUILD)/chart/monitoring.yaml
	cd test/monitoring && $(GO) vet ./... && \
	  { $(GO) mod tidy -diff || { echo "test/monitoring/go.mod is not tidy"; exit 1; }; } && \
	  MONITORING_CHART=$(CURDIR)/$(BUILD)/chart/monitoring.yaml YUNIKORN_USERINFO_BINARY=$(CURDIR)/$(BINARY) $(GO) test -count=1 ./...

.PHONY: test-kubewarden
test-kubewarden: policy ## The fixture table on wasmtime as Kubewarden's policy-server runs it: fresh instance, _start + wapc_init, serde re-serialisation, json-patch diff (nested module test/kubewarden, cgo)
	cd test/kubewarden && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && \
	  { $(GO) mod tidy -diff || { echo "test/kubewarden/go.mod is not tidy"; exit 1; }; } && \
	  POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -count=1 ./...

.PHONY: test-yunikorn
.PHONY: test-cel
test-cel: policy ## The in-apiserver mode (yunikorn-userinfo cel) run in k8s.io/apiserver v0.37.1's own CEL admission code: identity corpus byte for byte against encoding/json and the module, cost at the bounds, every fixture it expresses against the module, the static manifests through the API server's loader (nested module test/cel)
	cd test/cel && $(GO) vet ./... && \
	  { $(GO) mod tidy -diff || { echo "test/cel/go.mod is not tidy"; exit 1; }; } && \
	  POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -count=1 ./...

test-yunikorn: ## policy/queues against yunikorn-core v1.9.0 itself on a generated corpus (200 configurations; LONG=1: the 2,000 of make lab) of queue configurations and applications, queues.Validate against core's validate-conf, and audit --yunikorn against core's REST types (nested module test/yunikorn)
	cd test/yunikorn && export GONOSUMDB=github.com/apache/yunikorn-core,github.com/apache/yunikorn-scheduler-interface && \
	  $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && \
	  { $(GO) mod tidy -diff || { echo "test/yunikorn/go.mod is not tidy"; exit 1; }; } && \
	  $(GO) test -count=1 -v $(if $(LONG),,-short) -run 'TestDifferential|TestConfigValidationMatchesCore|TestCharged' ./... | grep -aE '^(---|ok|FAIL|PASS)|seed|disagreements|config [0-9]+:|core:|ours:' ; exit $${PIPESTATUS[0]}

.PHONY: bench-kubewarden
bench-kubewarden: policy ## Cost per evaluation as policy-server runs it (fresh wasmtime instance) beside the pooled engine, per bench fixture
	cd test/kubewarden && POLICY_WASM=$(CURDIR)/$(WASM) $(GO) test -run '^$$' -bench . -count $(or $(COUNT),3) ./...

.PHONY: bench
bench: policy build loadgen chart-render ## Benchmarks (native vs wasm, fresh vs pooled, cost vs request size, ours vs YuniKorn), load test, cold start, and Pod-create latency per deployment mode through a real API server; tables in docs/perf (QUICK=1: smoke run; see hack/bench.sh)
	POLICY_WASM=$(CURDIR)/$(WASM) bash hack/bench.sh

.PHONY: hostile
hostile: build ## Attack a local serve class by class (2,000+ idle, slowloris, slow-body and HTTP/2 connections from 8 addresses, declared bodies, metric labels, huge objects, deep values, many groups, settings, a 90/10 mixed load with 3 MiB objects, a connection flood from 13 addresses past --max-conns) and check the bounds; prints the figures
	cd bench && HOSTILE_BINARY=$(CURDIR)/$(BINARY) $(GO) test -v -count=1 -timeout 10m -run '^TestHostile$$' ./hostile | grep -v '^=== \|^    --- PASS\|^--- PASS\|^PASS$$'

.PHONY: soak
soak: build loadgen ## Soak at a fixed rate (RATE=1000, DURATION=10m): RSS and goroutines over time, into build/bench
	bash hack/soak.sh

E2E_TIMEOUT ?= 30m
# The Kubernetes version matrix of make e2e-matrix (the change path, make
# e2e, runs v1.37.1 only): the older version (E2E_KUBE_VERSION, a wrapper
# module e2e/kube133) and the scenarios it runs there: injection, forged
# and changed identities refused, every write path, both failure policies,
# the validating twin, the watch caches' list and watch paths, the chart's
# objects (RATIONALE.md, "Why a wrapper module per older Kubernetes version").
E2E_OLD_KUBE ?= 1.33
# The MutatingAdmissionPolicy-beta version (e2e/kube135) the in-apiserver
# (CEL) scenarios also run on, with the gate and v1beta1 API turned on.
E2E_MAP_BETA_KUBE ?= 1.35
E2E_MAP_BETA_RUN ?= CEL
# The first version with MutatingAdmissionPolicy GA and on by default
# (e2e/kube136), which the README recommends for cel: the CEL scenarios and
# the chart's rendered objects run there with no gate turned on.
E2E_CEL_KUBE ?= 1.36
E2E_OLD_KUBE_RUN ?= ^(TestUserPod|TestDeployment|TestCronJobScheduledJob|TestStatefulSetPods|TestRolloutRestart|TestForgedIdentityRefused|TestFrontEndOnBehalf|TestAnnotationChangeRefused|TestAnnotationAddRefused|TestServerSideApply|TestDryRunCreate|TestImpersonation|TestPodSubresources|TestWebhookDownFailsClosed|TestChartRegistrationGate|TestHostileLaterWebhook|TestHostCapabilities|TestWatchCacheListPaths|TestYuniKornApplicationOwnership|TestChartRenderingServed)$$
E2E_ENV := CGO_ENABLED=0 E2E_SERVE_BINARY=$(CURDIR)/$(BINARY)
E2E_TEST := $(GO) test -count=1 -v -timeout $(E2E_TIMEOUT) -parallel 16

.PHONY: chart-render
chart-render: ## Render the Helm chart (standalone, Kubewarden, cel and hybrid variants, default values) into build/chart with Helm's libraries, as make e2e installs it (the steady state, as helm upgrade renders it; install.yaml: a first install, with the registration gate; watch.yaml: the switch's watch step, watchOnly)
	@mkdir -p $(BUILD)/chart
	cd test/manifests && $(GO) build -o $(CURDIR)/$(BUILD)/chartrender ./cmd/chartrender
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo -out $(BUILD)/chart/standalone.yaml
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo -values 'mode: kubewarden' -out $(BUILD)/chart/kubewarden.yaml
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo -values 'mode: cel' -out $(BUILD)/chart/cel.yaml
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo -values 'mode: hybrid' -out $(BUILD)/chart/hybrid.yaml
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo -values '{mode: hybrid, settings: {configValidation: {mode: enforce, namespace: e2e-hybrid-yunikorn}}}' -out $(BUILD)/chart/hybrid-config.yaml
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo -values 'watchOnly: true' -out $(BUILD)/chart/watch.yaml
	$(BUILD)/chartrender -upgrade -chart $(CURDIR)/charts/yunikorn-userinfo -values "$$(cat e2e/operators/values.yaml)" -out $(BUILD)/chart/operators.yaml
	$(BUILD)/chartrender -chart $(CURDIR)/charts/yunikorn-userinfo -out $(BUILD)/chart/install.yaml

.PHONY: e2e
e2e: build chart-render ## End-to-end tests on one Kubernetes version: real etcd, kube-apiserver, kube-controller-manager v1.37.1, the YuniKorn scheduler and admission controller v1.9.0 and three operators on 127.0.0.1 (built once into ~/.cache/yunikorn-userinfo/e2e: about 15 minutes of 2 cores cold; make e2e about 5 minutes warm)
	@start=$$(date +%s); \
	cd e2e && CGO_ENABLED=0 $(GO) vet ./... && CGO_ENABLED=0 $(GO) test -count=1 ./internal/... && \
	(cd yunikorn && $(E2E_ENV) $(GO) test -count=1 ./...) && \
	$(E2E_ENV) $(E2E_TEST) ./scenarios; \
	rc=$$?; echo "make e2e: $$(( $$(date +%s) - start ))s (build, cluster and scenarios)"; exit $$rc

.PHONY: e2e-matrix
e2e-matrix: build chart-render ## The rest of the real-cluster matrix (make lab): the YuniKorn scenarios with every controller as system:kube-controller-manager, the core scenarios on Kubernetes $(E2E_OLD_KUBE), the CEL scenarios on $(E2E_MAP_BETA_KUBE) with MutatingAdmissionPolicy beta and on $(E2E_CEL_KUBE) with it GA (with the chart's objects and hybrid mode), and the long k8shim/core ownership sequences
	@start=$$(date +%s); cd e2e && \
	echo "e2e-matrix: the ownership model against k8shim and core, long sequences" && \
	(cd yunikorn && APPOWNER_SEQUENCES=30 APPOWNER_CORE_SEQUENCES=10 $(E2E_ENV) $(GO) test -count=1 -timeout $(E2E_TIMEOUT) ./...) && \
	echo "e2e-matrix: the YuniKorn scenarios again, every controller acting as system:kube-controller-manager" && \
	E2E_SHARED_CONTROLLER_CREDENTIALS=1 $(E2E_ENV) $(E2E_TEST) -run '^TestYuniKorn' ./scenarios && \
	echo "e2e-matrix: the core scenarios on Kubernetes $(E2E_OLD_KUBE)" && \
	E2E_KUBE_VERSION=$(E2E_OLD_KUBE) $(E2E_ENV) $(E2E_TEST) -run '$(E2E_OLD_KUBE_RUN)' ./scenarios && \
	echo "e2e-matrix: the in-apiserver (CEL) scenarios on Kubernetes $(E2E_MAP_BETA_KUBE), MutatingAdmissionPolicy beta" && \
	E2E_KUBE_VERSION=$(E2E_MAP_BETA_KUBE) $(E2E_ENV) $(E2E_TEST) -run '$(E2E_MAP_BETA_RUN)' ./scenarios && \
	echo "e2e-matrix: the CEL scenarios, the chart's hybrid mode and its rendered objects on Kubernetes $(E2E_CEL_KUBE), MutatingAdmissionPolicy GA" && \
	E2E_KUBE_VERSION=$(E2E_CEL_KUBE) $(E2E_ENV) $(E2E_TEST) -run 'CEL|^TestChartModeHybridWebhookDown$$|^TestChartRenderingServed$$' ./scenarios; \
	rc=$$?; echo "make e2e-matrix: $$(( $$(date +%s) - start ))s"; exit $$rc

.PHONY: lab
lab: ## Nightly and release runs, apart from the change path: the release tests, the CLI's tests under the race detector, the Kubernetes version matrix, the long differential and fuzz runs, and make bench (QUICK=1 for a smoke run)
	$(MAKE) --no-print-directory test-release
	$(MAKE) --no-print-directory test-race
	$(MAKE) --no-print-directory LONG=1 test-yunikorn
	$(MAKE) --no-print-directory FUZZTIME=$(or $(FUZZTIME),1000000x) fuzz
	$(MAKE) --no-print-directory e2e-matrix
	$(MAKE) --no-print-directory bench

.PHONY: clean
clean: ## Remove build outputs
	rm -rf $(BUILD)
