# jobset-multislice-policy — the targets every Kubewarden policy has, plus preview/fixtures.
SOURCE_FILES := $(shell find src -type f -name '*.rs')
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
CARGO_TARGET_DIR ?= target
WASM_OUT := $(CARGO_TARGET_DIR)/wasm32-wasip1/release/jobset_multislice_policy.wasm
EXAMPLE ?= examples/multislice-v5p.yaml

.PHONY: wasm-target
wasm-target:
	@rustup target list --installed | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1

policy.wasm: $(SOURCE_FILES) Cargo.toml Cargo.lock | wasm-target
	cargo build --target=wasm32-wasip1 --release -p jobset-multislice-policy
	cp $(WASM_OUT) policy.wasm

annotated-policy.wasm: policy.wasm policy-metadata.yml README.md
	kwctl annotate -m policy-metadata.yml -u README.md -o annotated-policy.wasm policy.wasm

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

# Native and harness tests, then the real-JAX tests with their summary shown, then the
# policy's unit tests compiled to wasm32-wasip1 (32-bit usize) and run in wasmtime by the host
# crate's wasi-run.
.PHONY: test
test: policy.wasm jax-venv
	JAX_PYTHON=$(JAX_PYTHON) cargo test --workspace -- --skip real_jax
	$(MAKE) --no-print-directory jax-test
	cargo build -q -p multislice-host --bin wasi-run
	CARGO_TARGET_WASM32_WASIP1_RUNNER=$(abspath $(CARGO_TARGET_DIR))/debug/wasi-run \
		cargo test --target=wasm32-wasip1 -p jobset-multislice-policy --lib

# The real-JAX tests alone (tests/wasm/real_jax.rs): JAX processes on the injected env, and
# JAX's GKE TPU cluster detection on every TPU container's env.
.PHONY: jax-test
jax-test: policy.wasm jax-venv
	JAX_PYTHON=$(JAX_PYTHON) cargo test -p jobset-multislice-policy --test wasm real_jax -- --nocapture --test-threads=1

.PHONY: lint
lint: | wasm-target
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy --target=wasm32-wasip1 -p jobset-multislice-policy -- -D warnings

.PHONY: fmt
fmt:
	cargo fmt --all

# bats and jq for e2e.bats (Debian/Ubuntu).
.PHONY: e2e-deps
e2e-deps:
	@command -v bats >/dev/null && command -v jq >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq bats jq || \
		  { sudo apt-get update -qq && sudo apt-get install -y -qq bats jq; }; }

.PHONY: e2e-tests
e2e-tests: annotated-policy.wasm
	bats e2e.bats

REGISTRY ?= ghcr.io/kubewarden/policies/jobset-multislice
TAG ?= v$(VERSION)

# Pushes the annotated policy to an OCI registry (kwctl uses the docker credentials).
.PHONY: push
push: annotated-policy.wasm
	kwctl push annotated-policy.wasm $(REGISTRY):$(TAG)

.PHONY: artifacthub
artifacthub:
	kwctl scaffold artifacthub --metadata-path policy-metadata.yml --version $(VERSION) --output artifacthub-pkg.yml

# The policy against an accept-all baseline in one wasmtime host; BENCH_ARGS=--quick for a
# rough run.
bench/baseline.wasm: bench/baseline/src/lib.rs bench/baseline/Cargo.toml Cargo.lock | wasm-target
	cargo build --target=wasm32-wasip1 --release -p baseline-policy
	cp $(CARGO_TARGET_DIR)/wasm32-wasip1/release/baseline_policy.wasm bench/baseline.wasm

.PHONY: bench
bench: policy.wasm bench/baseline.wasm
	cargo run -q -p multislice-bench -- $(BENCH_ARGS)

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

# Builds the policy and runs an example JobSet through it and the simulated controllers.
.PHONY: preview
preview: policy.wasm
	cargo run -q -p multislice-host --bin preview -- $(EXAMPLE) $(PREVIEW_ARGS)

# Regenerates test_data/requests/*.json from the YAML sources in test_data/.
.PHONY: fixtures
fixtures:
	cargo run -q -p multislice-host --bin fixtures

.PHONY: clean
clean:
	cargo clean
	rm -f policy.wasm annotated-policy.wasm bench/baseline.wasm
