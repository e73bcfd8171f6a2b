#!/usr/bin/env bats
# The publish steps (README) against a real OCI registry on loopback, since OCI distribution is
# how Kubewarden policies travel: CNCF distribution's `registry` (built from its Go module by
# `cluster/deps.sh registry`) serving plain HTTP on a free port of 127.0.0.1, with its storage
# in a temporary folder. `make push` pushes the annotated module to it, `kwctl pull` brings it
# back, `kwctl run registry://…` and every example manifest pointed at it answer as the local
# file does, and policy-server loads the policy from `registry://…` and answers a request.
#
# Plain HTTP needs kwctl's and policy-server's sources file (`insecure_sources`); a registry
# with TLS needs none. kwctl's store is a temporary folder (XDG_CACHE_HOME), so every pull
# reaches the registry. The registry and policy-server are stopped at the end (and each runs
# under coreutils `timeout`, a hard lifetime).
#
# Run by `make registry-test` (after `make annotated-policy.wasm`), which `make e2e-tests` runs
# where kwctl and policy-server are installed (.ci/kubewarden finds them).

bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
POLICY="$ROOT/annotated-policy.wasm"
# A JobSet the policy mutates and a pod it gives the multislice env.
REQUESTS=(test_data/requests/jobset-tpu-4-slices.v09.json test_data/requests/pod-tpu-slice-pod.json)
# How long the registry and policy-server may live, and may take to be ready.
LIFETIME=600
READY_WITHIN=120

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until `curl URL` answers HTTP 200, or the process PID dies, or READY_WITHIN passes.
wait_ready() {
  local url="$1" pid="$2" log="$3" waited=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url")" = 200 ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "it exited before it was ready:" >&2
      cat "$log" >&2
      return 1
    fi
    if [ "$waited" -ge $((READY_WITHIN * 10)) ]; then
      echo "not ready within $READY_WITHIN s:" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
}

setup_file() {
  cd "$ROOT"
  KWCTL="$(.ci/kubewarden which kwctl)" || { echo "kwctl is not installed" >&2; return 1; }
  POLICY_SERVER="$(.ci/kubewarden which policy-server)" ||
    { echo "policy-server is not installed" >&2; return 1; }
  SIGSTORE_TRUST_CONFIG="$(.ci/kubewarden trust-config)"
  [ -f "$POLICY" ] || { echo "$POLICY is missing: make annotated-policy.wasm" >&2; return 1; }
  local built
  built="$(bash cluster/deps.sh registry)" || return 1
  REGISTRY_BIN="${built#registry=}"
  [ -x "$REGISTRY_BIN" ] || { echo "cluster/deps.sh registry built no registry: $built" >&2; return 1; }

  DIR="$BATS_FILE_TMPDIR"
  PORT="$(free_port)"
  HOST="127.0.0.1:$PORT"
  VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
  REPOSITORY="$HOST/jobset-multislice-policy"
  URI="registry://$REPOSITORY:v$VERSION"
  mkdir -p "$DIR/storage"
  cat >"$DIR/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/storage
http:
  addr: $HOST
EOF
  printf 'insecure_sources:\n  - "%s"\n' "$HOST" >"$DIR/sources.yml"
  # distribution exports OpenTelemetry traces unless told not to.
  OTEL_TRACES_EXPORTER=none timeout "$LIFETIME" "$REGISTRY_BIN" serve "$DIR/registry.yml" \
    >"$DIR/registry.log" 2>&1 3>&- &
  echo $! >"$DIR/registry.pid"
  wait_ready "http://$HOST/v2/" "$(cat "$DIR/registry.pid")" "$DIR/registry.log"

  export KWCTL POLICY_SERVER SIGSTORE_TRUST_CONFIG DIR HOST REPOSITORY URI VERSION
  export XDG_CACHE_HOME="$DIR/cache" XDG_CONFIG_HOME="$DIR/config" XDG_DATA_HOME="$DIR/data"
}

teardown_file() {
  local pid
  for pid in "$DIR/policy-server.pid" "$DIR/registry.pid"; do
    [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
}

setup() {
  cd "$ROOT"
}

# kwctl with the Sigstore trust config, when there is one, and the sources file.
kw() {
  local trust=()
  [ -n "$SIGSTORE_TRUST_CONFIG" ] && trust=(--sigstore-trust-config "$SIGSTORE_TRUST_CONFIG")
  "$KWCTL" "$1" "${trust[@]}" --sources-path "$DIR/sources.yml" "${@:2}"
}

# The answer of kwctl run, without its uid: what the policy decided.
decision() {
  jq -S -c '{allowed, patchType, patch: (.patch // null | if . then @base64d | fromjson else . end),
    status, warnings}'
}

@test "make push puts the annotated policy in the registry" {
  run make -s --no-print-directory push REGISTRY="$REPOSITORY" SOURCES="$DIR/sources.yml"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  run curl -sf "http://$HOST/v2/jobset-multislice-policy/tags/list"
  [ "$status" -eq 0 ]
  [ "$(jq -c .tags <<<"$output")" = "[\"v$VERSION\"]" ]
}

@test "kwctl pull brings back the pushed module byte for byte" {
  run kw pull --output-path "$BATS_TEST_TMPDIR/pulled.wasm" "$URI"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  cmp "$BATS_TEST_TMPDIR/pulled.wasm" "$POLICY"
}

@test "kwctl run registry:// answers as the local file" {
  local request
  for request in "${REQUESTS[@]}"; do
    run --separate-stderr kw run --request-path "$request" --settings-json '{}' "$URI"
    [ "$status" -eq 0 ] || { echo "$request: $stderr"; return 1; }
    local remote="$output"
    run --separate-stderr kw run --request-path "$request" --settings-json '{}' "$POLICY"
    [ "$status" -eq 0 ]
    [ "$(decision <<<"$remote")" = "$(decision <<<"$output")" ]
    [ "$(jq -r .allowed <<<"$remote")" = true ]
    jq -e '.patch' <<<"$remote" >/dev/null
  done
}

@test "every example manifest pointed at the registry answers as with the local file" {
  local manifest stem seen=0
  # The whole policies under examples/ (not the kustomize patches); examples/policy/ sets
  # `module:` for kubectl apply -k, so here it goes in after `spec:`, as e2e.bats does.
  for manifest in $(grep -rlE '^kind: (Cluster)?AdmissionPolicy$' examples | sort); do
    grep -q '^  rules:' "$manifest" || continue
    stem=$(basename "$manifest" .yaml)
    sed "s|^spec:\$|spec:\n  module: $URI|" "$manifest" >"$BATS_TEST_TMPDIR/$stem-registry.yaml"
    sed "s|^spec:\$|spec:\n  module: file://$POLICY|" "$manifest" >"$BATS_TEST_TMPDIR/$stem-file.yaml"
    run --separate-stderr kw run --request-path "${REQUESTS[0]}" \
      "$BATS_TEST_TMPDIR/$stem-registry.yaml"
    [ "$status" -eq 0 ] || { echo "$stem: $stderr"; return 1; }
    local remote="$output"
    run --separate-stderr kw run --request-path "${REQUESTS[0]}" \
      "$BATS_TEST_TMPDIR/$stem-file.yaml"
    [ "$status" -eq 0 ]
    [ "$(decision <<<"$remote")" = "$(decision <<<"$output")" ] ||
      { echo "$stem: $remote, from the file: $output"; return 1; }
    seen=$((seen + 1))
  done
  # The pair's two halves, the single policy and the namespaced one.
  [ "$seen" -eq 4 ]
}

@test "policy-server loads the policy from registry:// and answers as kwctl run" {
  local port probe
  port="$(free_port)"
  probe="$(free_port)"
  mkdir -p "$DIR/downloads"
  cat >"$DIR/policies.yml" <<EOF
jobset-multislice:
  module: $URI
  settings: {}
  allowedToMutate: true
EOF
  local trust=()
  [ -n "$SIGSTORE_TRUST_CONFIG" ] && trust=(--sigstore-trust-config "$SIGSTORE_TRUST_CONFIG")
  timeout "$LIFETIME" "$POLICY_SERVER" --addr 127.0.0.1 --port "$port" \
    --readiness-probe-port "$probe" --policies "$DIR/policies.yml" \
    --policies-download-dir "$DIR/downloads" --sources-path "$DIR/sources.yml" \
    --ignore-kubernetes-connection-failure --log-no-color --log-level warn "${trust[@]}" \
    >"$DIR/policy-server.log" 2>&1 3>&- &
  echo $! >"$DIR/policy-server.pid"
  wait_ready "http://127.0.0.1:$probe/readiness" "$(cat "$DIR/policy-server.pid")" \
    "$DIR/policy-server.log"

  local request review
  for request in "${REQUESTS[@]}"; do
    review=$(jq -c '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: .}' "$request")
    run curl -sf -X POST -H 'Content-Type: application/json' --data-binary "$review" \
      "http://127.0.0.1:$port/validate/jobset-multislice"
    [ "$status" -eq 0 ] || { echo "$request: curl $status"; cat "$DIR/policy-server.log"; return 1; }
    local served="$output"
    [ "$(jq -r .response.uid <<<"$served")" = "$(jq -r .uid "$request")" ]
    run --separate-stderr kw run --request-path "$request" --settings-json '{}' "$POLICY"
    [ "$status" -eq 0 ]
    [ "$(jq -c .response <<<"$served" | decision)" = "$(decision <<<"$output")" ] ||
      { echo "$request: policy-server $served, kwctl $output"; return 1; }
  done
  kill "$(cat "$DIR/policy-server.pid")"
}
