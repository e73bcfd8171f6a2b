#!/usr/bin/env bats
# The publish steps (README) against a real OCI registry on loopback, since OCI distribution is
# how Kubewarden policies travel: CNCF distribution's `registry` (built from its Go module by
# `cluster/deps.sh registry`) serving plain HTTP on a free port of 127.0.0.1, with its storage
# in a temporary folder. `make push` pushes the annotated module to it, `kwctl pull` brings it
# back, `kwctl run registry://…` and every example manifest pointed at it answer as the local
# file does, and policy-server loads the policy from `registry://…` and answers a request.
#
# Signatures: cosign (the release that release.yml installs, built from its Go module by
# `cluster/deps.sh cosign`) signs the module as release.yml signs it, with a key pair of the
# test's instead of the workflow's keyless identity, and without Rekor. `kwctl verify` and
# policy-server's `--verification-path` then check it against a verificationConfig naming that
# key: the format release.yml signed with at aabe9ba (cosign v3.0.6's defaults: a Sigstore
# bundle, no signature tag) is refused, the format it signs with now is accepted.
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
# The format flags of release.yml's `cosign sign` lines, one entry per line in its order, as
# written there after `--yes` (tests/native/signing.rs holds them equal): the signature tag
# `sha256-<digest>.sig`, the one place Kubewarden v1.35 looks, then cosign v3's own Sigstore
# bundle. AABE9BA_SIGNS is its one line at aabe9ba, `cosign sign --yes "$ref"`.
RELEASE_SIGNS=("--new-bundle-format=false --use-signing-config=false" "")
AABE9BA_SIGNS=("")

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
  built="$(bash cluster/deps.sh cosign)" || return 1
  COSIGN="${built#cosign=}"
  [ -x "$COSIGN" ] || { echo "cluster/deps.sh cosign built no cosign: $built" >&2; return 1; }

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

  # The key pair, and the verificationConfig ConfigMap's `verification-config` naming its public
  # key (the file the controller mounts for policy-server's --verification-path).
  export COSIGN_PASSWORD=registry-test
  (cd "$DIR" && "$COSIGN" generate-key-pair >/dev/null 2>&1) ||
    { echo "cosign generate-key-pair failed" >&2; return 1; }
  { printf 'apiVersion: v1\nallOf:\n  - kind: pubKey\n    key: |\n'
    sed 's/^/      /' "$DIR/cosign.pub"; } >"$DIR/verification.yml"

  export KWCTL POLICY_SERVER SIGSTORE_TRUST_CONFIG COSIGN DIR HOST REPOSITORY URI VERSION
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

# policy-server's arguments, in ARGS: loopback on free ports (PORT, PROBE), the policy
# `jobset-multislice` from MODULE, offline with the Sigstore trust config where there is one,
# Sigstore's cache in SIGSTORE_CACHE (default: under DIR); then the ARGs given after MODULE.
policy_server_args() {
  local module="$1"
  PORT="$(free_port)"
  PROBE="$(free_port)"
  mkdir -p "$DIR/downloads"
  cat >"$DIR/policies.yml" <<EOF
jobset-multislice:
  module: $module
  settings: {}
  allowedToMutate: true
EOF
  ARGS=(--addr 127.0.0.1 --port "$PORT" --readiness-probe-port "$PROBE"
    --policies "$DIR/policies.yml" --policies-download-dir "$DIR/downloads"
    --sources-path "$DIR/sources.yml" --sigstore-cache-dir "${SIGSTORE_CACHE:-$DIR/sigstore}"
    --ignore-kubernetes-connection-failure --log-no-color "${@:2}")
  [ -n "$SIGSTORE_TRUST_CONFIG" ] && ARGS+=(--sigstore-trust-config "$SIGSTORE_TRUST_CONFIG")
  return 0
}

# Starts policy-server (policy_server_args MODULE ARG...) and waits until it is ready; its log
# is $DIR/policy-server.log.
start_policy_server() {
  policy_server_args "$@"
  timeout "$LIFETIME" "$POLICY_SERVER" "${ARGS[@]}" >"$DIR/policy-server.log" 2>&1 3>&- &
  echo $! >"$DIR/policy-server.pid"
  wait_ready "http://127.0.0.1:$PROBE/readiness" "$(cat "$DIR/policy-server.pid")" \
    "$DIR/policy-server.log"
}

# Each of REQUESTS, POSTed to the running policy-server, gets the answer kwctl run gives with
# the local file.
answers_as_kwctl_run() {
  local request review
  for request in "${REQUESTS[@]}"; do
    review=$(jq -c '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: .}' "$request")
    run curl -sf -X POST -H 'Content-Type: application/json' --data-binary "$review" \
      "http://127.0.0.1:$PORT/validate/jobset-multislice"
    [ "$status" -eq 0 ] || { echo "$request: curl $status"; cat "$DIR/policy-server.log"; return 1; }
    local served="$output"
    [ "$(jq -r .response.uid <<<"$served")" = "$(jq -r .uid "$request")" ]
    run --separate-stderr kw run --request-path "$request" --settings-json '{}' "$POLICY"
    [ "$status" -eq 0 ]
    [ "$(jq -c .response <<<"$served" | decision)" = "$(decision <<<"$output")" ] ||
      { echo "$request: policy-server $served, kwctl $output"; return 1; }
  done
}

# kwctl push of the annotated module to a repository of its own, as release.yml pushes; prints
# the immutable reference (<repository>@sha256:…).
push_to() {
  "$KWCTL" push -o json --sources-path "$DIR/sources.yml" "$POLICY" "$HOST/$1:v$VERSION" |
    jq -r .immutable_ref
}

# cosign sign REF with FORMAT (flags as release.yml writes them), offline: the key pair where the
# workflow has Fulcio's certificate, and no Rekor upload. cosign v3.0.6 refuses
# --tlog-upload=false with its signing config (the first signing test), so a format that leaves
# the signing config on gets --use-signing-config=false. Where the signature goes stays the
# same: with or without the signing config, cosign writes the bundle to the registry alike.
cosign_sign() {
  local ref="$1" format="$2" offline=(--key "$DIR/cosign.key" --tlog-upload=false)
  [[ " $format " == *" --use-signing-config=false "* ]] || offline+=(--use-signing-config=false)
  # shellcheck disable=SC2086 # the format is words
  "$COSIGN" sign --yes "${offline[@]}" $format "$ref"
}

# Pushes the module to repository NAME and signs it in each FORMAT given, as release.yml signs
# once per format; REF is the pushed digest reference, DIGEST its digest.
push_signed() {
  local format
  REF="$(push_to "$1")"
  DIGEST="${REF#*@}"
  for format in "${@:2}"; do
    cosign_sign "$REF" "$format" >"$DIR/sign.log" 2>&1 || { cat "$DIR/sign.log"; return 1; }
  done
}

# The tags of a repository of the registry, sorted, on one line.
tags_of() {
  curl -sf "http://$HOST/v2/$1/tags/list" | jq -r '.tags | sort | join(" ")'
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
  start_policy_server "$URI" --log-level warn
  answers_as_kwctl_run
  kill "$(cat "$DIR/policy-server.pid")"
}

@test "cosign v3.0.6 signs offline only without its signing config, and the signature tag only with both flags" {
  local ref
  ref="$HOST/none@sha256:$(printf '0%.0s' {1..64})"
  run "$COSIGN" sign --yes --key "$DIR/cosign.key" --tlog-upload=false "$ref"
  [ "$status" -ne 0 ]
  [[ "$output" == *"--tlog-upload=false is not supported with --signing-config or --use-signing-config."* ]] ||
    { echo "$output"; return 1; }
  run "$COSIGN" sign --yes --key "$DIR/cosign.key" --new-bundle-format=false "$ref"
  [ "$status" -ne 0 ]
  [[ "$output" == *"must provide --new-bundle-format or --bundle where applicable with --signing-config or --use-signing-config"* ]] ||
    { echo "$output"; return 1; }
}

@test "signed as release.yml signed at aabe9ba, kwctl verify and policy-server find no signature" {
  push_signed signed-aabe9ba "${AABE9BA_SIGNS[@]}"
  local ref="$REF" digest="$DIGEST"
  # A Sigstore bundle under the referrers tag sha256-<hex> (this registry serves no referrers
  # API), and no signature tag sha256-<hex>.sig.
  [ "$(tags_of signed-aabe9ba)" = "${digest/:/-} v$VERSION" ]
  run curl -sf -H 'Accept: application/vnd.oci.image.index.v1+json' \
    "http://$HOST/v2/signed-aabe9ba/manifests/${digest/:/-}"
  [ "$status" -eq 0 ]
  local bundle
  bundle="$(jq -r '.manifests[] | .digest' <<<"$output")"
  run curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$HOST/v2/signed-aabe9ba/manifests/$bundle"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.subject.digest, .layers[].mediaType' <<<"$output" | tr '\n' ' ')" = \
    "$digest application/vnd.dev.sigstore.bundle.v0.3+json " ] || { echo "$output"; return 1; }

  run kw verify --verification-config-path "$DIR/verification.yml" "registry://$ref"
  [ "$status" -ne 0 ]
  [[ "$output" == *"no signatures found for image: $ref"* ]] || { echo "$output"; return 1; }

  policy_server_args "registry://$ref" --log-level warn --verification-path "$DIR/verification.yml"
  run timeout "$READY_WITHIN" "$POLICY_SERVER" "${ARGS[@]}"
  [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { echo "status $status: $output"; return 1; }
  [[ "$output" == *"Policy 'jobset-multislice' cannot be verified: no signatures found for image: $ref"* ]] ||
    { echo "$output"; return 1; }
}

@test "signed as release.yml signs, kwctl verify and policy-server accept it, and policy-server answers" {
  push_signed signed-release "${RELEASE_SIGNS[@]}"
  local ref="$REF" digest="$DIGEST"
  # The signature tag, beside the bundle's referrers tag.
  [ "$(tags_of signed-release)" = "${digest/:/-} ${digest/:/-}.sig v$VERSION" ]

  run kw verify --verification-config-path "$DIR/verification.yml" "registry://$ref"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }

  start_policy_server "registry://$ref" --log-level info --verification-path "$DIR/verification.yml"
  # Its log says it verified the signatures (the status field of "policy download").
  grep -q '"verified-signatures"' "$DIR/policy-server.log" ||
    { cat "$DIR/policy-server.log"; return 1; }
  answers_as_kwctl_run
  kill "$(cat "$DIR/policy-server.pid")"

  # What docs/operations.md says `cosign verify` prints: the signed digest.
  run --separate-stderr "$COSIGN" verify --key "$DIR/cosign.pub" --insecure-ignore-tlog=true "$ref"
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(jq -r '.[].critical.image."docker-manifest-digest"' <<<"$output" | sort -u)" = "$digest" ]
}

@test "policy-server without a Sigstore trust root loads an unsigned module despite its verificationConfig" {
  # A PolicyServer without sigstoreTrustConfig where Sigstore's TUF cannot be reached: here the
  # trust root's cache cannot be made, and there is no trust config.
  SIGSTORE_TRUST_CONFIG="" SIGSTORE_CACHE=/dev/null/sigstore \
    start_policy_server "$URI" --log-level warn --verification-path "$DIR/verification.yml"
  grep -q "Cannot create Sigstore trust root, verification relying on Rekor and Fulcio will fail" \
    "$DIR/policy-server.log" || { cat "$DIR/policy-server.log"; return 1; }
  answers_as_kwctl_run
  kill "$(cat "$DIR/policy-server.pid")"
}
