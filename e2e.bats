#!/usr/bin/env bats
# End-to-end tests of the annotated policy with the real `kwctl run`, as every Kubewarden
# policy has, on the example manifests, and on the packaging kwctl generates.
#
# The request cases live in test_data/e2e/cases.json, which the harness test
# tests/wasm/e2e_cases.rs also runs through the same module. To add a case: add its entry to
# cases.json (name, request file, settings, and the exact allowed/patch/message/code/warnings)
# and a `@test` below that calls `check_case <name>`; the harness test fails until both exist.
# Any other `@test` must be listed in e2e_cases.rs, with its harness twin or as kwctl-only.
#
# kwctl is $KWCTL, else on PATH, else in ../shared/tools (.ci/kubewarden finds it). `make
# e2e-tests` runs the tests tagged `artifacthub` as a step of their own.

bats_require_minimum_version 1.5.0

CASES=test_data/e2e/cases.json
POLICY=annotated-policy.wasm

setup_file() {
  KWCTL="$("$BATS_TEST_DIRNAME/.ci/kubewarden" which kwctl)" || {
    echo "kwctl is not installed: $KWCTL (see docs/contributing/testing.md \"Kubewarden's own tools\")" >&2
    return 1
  }
  # The Sigstore trust config, when there is one, so that kwctl does not reach for the
  # network to fetch one.
  SIGSTORE_TRUST_CONFIG="$("$BATS_TEST_DIRNAME/.ci/kubewarden" trust-config)"
  export KWCTL SIGSTORE_TRUST_CONFIG
  # Copies of the example policy manifests with the module built here (examples/policy/
  # sets `module:` for kubectl apply -k; kwctl reads one file).
  for manifest in single/cluster-admission-policy namespaced/admission-policy; do
    sed "s|^spec:\$|spec:\n  module: file://$PWD/$POLICY|" "examples/$manifest.yaml" \
      > "$BATS_FILE_TMPDIR/$(basename "$manifest").yaml"
  done
}

# kwctl with the Sigstore trust config, when there is one.
kw() {
  if [ -n "$SIGSTORE_TRUST_CONFIG" ]; then
    "$KWCTL" "$1" --sigstore-trust-config "$SIGSTORE_TRUST_CONFIG" "${@:2}"
  else
    "$KWCTL" "$@"
  fi
}

case_field() {
  jq -S -c --arg name "$1" ".[] | select(.name == \$name) | $2" "$CASES"
}

# Runs one case with kwctl and checks verdict, exact patch or exact message, code and warnings.
check_case() {
  local name="$1"
  local request settings
  request=$(jq -r --arg name "$name" '.[] | select(.name == $name) | .request' "$CASES")
  settings=$(case_field "$name" '.settings // {}')
  [ -n "$request" ] || { echo "no case named $name in $CASES"; return 1; }

  local error
  error=$(case_field "$name" '.settingsError // empty')
  if [ -n "$error" ]; then
    run kw run --request-path "$request" --settings-json "$settings" "$POLICY"
    [ "$status" -ne 0 ]
    [[ "$output" == *"$(jq -r . <<<"$error")"* ]]
    return 0
  fi

  local context=()
  local session
  session=$(jq -r --arg name "$name" '.[] | select(.name == $name) | .session // empty' "$CASES")
  if [ -n "$session" ]; then
    context=(--allow-context-aware --replay-host-capabilities-interactions "$session")
  fi
  run --separate-stderr kw run "${context[@]}" --request-path "$request" --settings-json "$settings" "$POLICY"
  [ "$status" -eq 0 ]
  local response="$output"
  [ "$(jq -r .allowed <<<"$response")" = "$(case_field "$name" .allowed)" ]

  local want_patch got_patch
  want_patch=$(case_field "$name" '.patch')
  if [ "$want_patch" = "null" ]; then
    [ "$(jq -r '.patch // "none"' <<<"$response")" = "none" ]
  else
    got_patch=$(jq -r '.patch | @base64d' <<<"$response" | jq -S -c .)
    [ "$got_patch" = "$want_patch" ]
  fi

  local want_message
  want_message=$(case_field "$name" '.message')
  if [ "$want_message" != "null" ]; then
    [ "$(jq -c .status.message <<<"$response")" = "$want_message" ]
    [ "$(jq -r .status.code <<<"$response")" = "$(case_field "$name" .code)" ]
  fi
  [ "$(jq -c '.warnings // []' <<<"$response")" = "$(case_field "$name" '.warnings')" ]
}

# The verdict of one kwctl response, in the words the examples use.
verdict() {
  jq -r 'if .allowed | not then "rejected"
         elif .patch then "accepted, mutated"
         else "accepted, unchanged" end' <<<"$1"
}

# Runs every example JobSet, and the Job of every example plain Job (which may come with its
# headless Service in the same file), through a policy manifest (kwctl reads module and
# settings from it) and checks the verdict each example states in its `# Expected verdict:`
# line (of the file's JobSet or Job; a Service beside it is not the policy's). The request sent is
# test_data/e2e/examples/<stem>.json (`make fixtures`: the JobSet, or the file's Job).
check_manifest() {
  local manifest="$BATS_FILE_TMPDIR/$1.yaml" seen=0 example stem stated response
  for example in examples/*.yaml; do
    grep -q '^kind: JobSet$' "$example" || grep -q '^kind: Job$' "$example" || continue
    stem=$(basename "$example" .yaml)
    stated=$(sed -n 's/^# Expected verdict: \(.*\)\.$/\1/p' "$example")
    [ -n "$stated" ] || { echo "$example states no verdict"; return 1; }
    run --separate-stderr kw run --request-path "test_data/e2e/examples/$stem.json" "$manifest"
    [ "$status" -eq 0 ] || { echo "$stem: kwctl failed: $stderr"; return 1; }
    response="$output"
    [ "$(verdict "$response")" = "$stated" ] ||
      { echo "$stem through $1: $(verdict "$response"), stated: $stated"; return 1; }
    [ "$(jq -c '.warnings // []' <<<"$response")" = \
      "$(sed -n 's/^# Expected warning: //p' "$example" | jq -R . | jq -s -c .)" ] ||
      { echo "$stem through $1: warnings $(jq -c '.warnings' <<<"$response")"; return 1; }
    seen=$((seen + 1))
  done
  # 5 JobSets and 1 plain Job (examples/jax-indexed-job.yaml).
  [ "$seen" -eq 6 ]
}

@test "a multislice JobSet gets its facts stamped" {
  check_case jobset-multislice
}

@test "a TPU pod gets its multislice env" {
  check_case pod-multislice-env
}

@test "tpuWorkerEnv adds the TPU host env to the pod" {
  check_case pod-tpu-worker-env
}

@test "a pod outside any JobSet is accepted with no patch" {
  check_case pod-not-in-a-jobset
}

@test "G: a named group that mixes CPU and TPU is rejected" {
  check_case reject-g3
}

@test "T: parallelism different from completions is rejected" {
  check_case reject-t2
}

@test "X: pinning the exclusive node pool of 4 slices is rejected" {
  check_case reject-x4
}

@test "N: DNS hostnames off on a multislice is rejected" {
  check_case reject-n1
}

@test "N2: a host-network multi-host slice with the default dnsPolicy is rejected" {
  check_case reject-n2
}

@test "P1: a NonIndexed member of a JAX JobSet is rejected" {
  check_case reject-p1
}

@test "P2: a member of a JAX JobSet that runs fewer pods than it counts is rejected" {
  check_case reject-p2
}

@test "P3: a JAX coordinator past parallelism is rejected" {
  check_case reject-p3
}

@test "P2: a batch job in a group of its own beside a JAX group gets no JAX env and a warning" {
  check_case warn-p2-batch-job-beside-jax
}

@test "E2: a resize of an opted-in Job is rejected" {
  check_case reject-e2
}

@test "J: an opted-in Indexed Job gets its facts stamped on the pod template" {
  check_case job-jax-facts
}

@test "J: an opted-in Job without a subdomain is rejected" {
  check_case reject-j1
}

@test "J4: an opted-in Job that allows Kueue's partial admission is rejected" {
  check_case reject-j4
}

@test "a Job without the JAX annotation is accepted with no patch" {
  check_case job-not-opted-in
}

@test "jaxEnv always does not reach a Job without the JAX annotation" {
  check_case job-not-opted-in-jax-always
}

@test "jaxEnv never leaves an opted-in Job alone" {
  check_case job-jax-env-never
}

@test "a JobSet queued by Kueue without suspend is stamped; T3 and T4 wait for Kueue" {
  check_case jobset-queued-by-kueue-without-suspend
}

@test "role mutate: a JobSet gets the same patch as under both, and no verdict" {
  check_case role-mutate-jobset
}

@test "role validate: a queue label that no Kueue suspended defers nothing" {
  check_case role-validate-bare-queue-label
}

@test "role validate: a pod is accepted untouched" {
  check_case role-validate-pod
}

@test "a GKE super-slice (no topology selector, no exclusive-topology) is accepted" {
  check_case jobset-gke-super-slice
}

@test "a tpu7x JobSet of two TPU containers per pod is accepted" {
  check_case jobset-tpu7x-two-tpu-containers
}

@test "a template env that contradicts the policy earns a warning at kubectl apply" {
  check_case jobset-template-env-contradicts-warning
}

@test "an env reference that can never resolve earns a warning at kubectl apply" {
  check_case warn-references-never-resolve
}

@test "each TPU container of a tpu7x pod gets its own MEGASCALE_PORT" {
  check_case pod-tpu7x-port-per-tpu-container
}

@test "tpuWorkerEnv numbers each TPU container of a tpu7x pod" {
  check_case pod-tpu7x-tpu-worker-env
}

@test "an unknown accelerator is accepted with a warning" {
  check_case warn-unknown-accelerator
}

@test "rejectUnknownAccelerators turns that warning into a rejection" {
  check_case reject-unknown-accelerator
}

@test "queueCheck refuse: a queue whose only TPU flavour misfits is refused" {
  check_case queue-only-2x4-refuse
}

@test "queueCheck warn: a queue whose only TPU flavour misfits is accepted with a warning" {
  check_case queue-only-2x4-warn
}

@test "queueCheck refuse: a queue with one fitting and one misfit flavour is accepted with a warning" {
  check_case queue-2x4-and-4x4-refuse
}

@test "queueCheck warn: a queue with one fitting and one misfit flavour is accepted with a warning" {
  check_case queue-2x4-and-4x4-warn
}

@test "queueCheck refuse: a JobSet placed by topology whose flavour's Topology lacks a level is refused" {
  check_case queue-tas-no-level-refuse
}

@test "queueCheck warn: a JobSet placed by topology whose flavour's Topology lacks a level is accepted with a warning" {
  check_case queue-tas-no-level-warn
}

@test "queueCheck refuse: a JobSet placed by topology is warned that Kueue skips the flavour without a Topology" {
  check_case queue-tas-topology-refuse
}

@test "queueCheck refuse: a queue whose flavours carry no topology label is accepted with a warning" {
  check_case queue-no-topology-labels-refuse
}

@test "queueCheck refuse: a MultiKueue manager's queue is named in a warning, its flavours not judged" {
  check_case queue-multikueue-refuse
}

@test "queueCheck warn: a queue whose flavours carry no topology label is accepted with a warning" {
  check_case queue-no-topology-labels-warn
}

@test "queueCheck refuse: a LocalQueue that does not exist is accepted with a warning" {
  check_case queue-no-local-queue-refuse
}

@test "queueCheck warn: a LocalQueue that does not exist is accepted with a warning" {
  check_case queue-no-local-queue-warn
}

@test "queueCheck refuse: a session one call short is accepted with a warning" {
  check_case queue-one-call-short-refuse
}

@test "queueCheck warn: a session one call short is accepted with a warning" {
  check_case queue-one-call-short-warn
}

@test "queueCheck refuse: a Kueue serving only v1beta1 is read there, and the misfit refused" {
  check_case queue-v1beta1-only-2x4-refuse
}

@test "queueCheck warn: a Kueue serving only v1beta1 is read there, and the misfit warned of" {
  check_case queue-v1beta1-only-2x4-warn
}

@test "queueCheck refuse: a cluster without Kueue is accepted with a one-line warning" {
  check_case queue-no-kueue-refuse
}

@test "queueCheck warn: a host error with a stack backtrace is quoted up to its first line" {
  check_case queue-backtrace-warn
}

@test "queueCheck refuse: no context-aware capability is accepted with a warning" {
  check_case queue-no-capability-refuse
}

@test "queueCheck warn: no context-aware capability is accepted with a warning" {
  check_case queue-no-capability-warn
}

@test "invalid settings are refused by kwctl run" {
  check_case invalid-settings
}

@test "manifest: every example JobSet and Job gets its stated verdict through the ClusterAdmissionPolicy" {
  check_manifest cluster-admission-policy
}

@test "manifest: every example JobSet and Job gets its stated verdict through the AdmissionPolicy" {
  check_manifest admission-policy
}

@test "manifest: kwctl applies the manifest's settings exactly as --settings-json" {
  local pod=test_data/requests/pod-tpu-slice-pod.json
  run --separate-stderr kw run --request-path "$pod" "$BATS_FILE_TMPDIR/admission-policy.yaml"
  [ "$status" -eq 0 ]
  local from_manifest="$output"
  # The namespaced example sets tpuWorkerEnv and jaxEnv; the cluster-wide one keeps defaults.
  run --separate-stderr kw run --request-path "$pod" \
    --settings-json '{"tpuWorkerEnv": true, "jaxEnv": "always"}' "$POLICY"
  [ "$status" -eq 0 ]
  [ "$from_manifest" = "$output" ]
  jq -r '.patch | @base64d' <<<"$from_manifest" | grep -q TPU_WORKER_ID

  run --separate-stderr kw run --request-path "$pod" "$BATS_FILE_TMPDIR/cluster-admission-policy.yaml"
  [ "$status" -eq 0 ]
  local cluster="$output"
  run --separate-stderr kw run --request-path "$pod" --settings-json '{}' "$POLICY"
  [ "$cluster" = "$output" ]
  [ -z "$(jq -r '.patch | @base64d' <<<"$cluster" | grep TPU_WORKER_ID)" ]
}

# The README's pre-submit check, exactly as the README writes it: its two kwctl lines, run on
# an example JobSet in the file name the README uses, with POLICY the module built here.
@test "README: the pre-submit kwctl commands admit an example JobSet" {
  local commands
  commands=$(awk '/^<!-- pre-submit kwctl check -->$/ {marked = 1; next}
    marked && /^```console$/ {inside = 1; next}
    inside && /^```$/ {exit}
    inside' README.md)
  [ "$(grep -c '^kwctl ' <<<"$commands")" -eq 2 ]
  [ "$(grep -vc '^kwctl ' <<<"$commands")" -eq 0 ]
  local POLICY="$PWD/$POLICY"
  cp examples/multislice-v5p.yaml "$BATS_TEST_TMPDIR/my-jobset.yaml"
  cd "$BATS_TEST_TMPDIR"
  # kwctl run with the trust config, as every kwctl run here; the rest as written.
  kwctl() { if [ "$1" = run ]; then kw "$@"; else "$KWCTL" "$@"; fi; }
  run --separate-stderr eval "$commands"
  [ "$status" -eq 0 ]
  [ "$(jq -r .allowed <<<"$output")" = true ]
  jq -r '.patch | @base64d' <<<"$output" | grep -q 'multislice.kubewarden.io/facts'
}

# docs/operations.md's settings check, its two commands taken from the page ("Invalid
# settings"): `kubectl kustomize` (the control plane's kubectl, cluster/deps.sh kubectl) of an
# overlay of examples/ whose module is the one built here, then `kwctl run` of the rendered pair
# on the README's pre-submit request. Valid settings: both halves answer. `queueCheck:
# sometimes` on the validating half: refused with the message the page quotes.
@test "operations.md: the settings check runs the rendered pair, and refuses invalid settings as the page says" {
  local page render check quoted
  page=$(tr -s ' \n' ' ' < docs/operations.md)
  render=$(grep -o '`kubectl kustomize [^`]*`' <<<"$page" | tr -d '`')
  check=$(grep -o '`kwctl run --request-path REQUEST.json [^`]*`' <<<"$page" | tr -d '`')
  quoted=$(grep -o '`Error: Policy settings are invalid: [^`]*`' <<<"$page" | tr -d '`')
  [ "$(grep -c . <<<"$render")" -eq 1 ]
  [ "$(grep -c . <<<"$check")" -eq 1 ]
  quoted=${quoted#Error: Policy settings are invalid: }
  [ -n "$quoted" ]
  local built kubectl_bin
  built="$(bash cluster/deps.sh kubectl)" || return 1
  kubectl_bin=${built#kubectl=}
  [ -x "$kubectl_bin" ]
  local POLICY="$PWD/$POLICY" examples="$PWD/examples"
  "$KWCTL" scaffold admission-request --operation CREATE --object examples/multislice-v5p.yaml \
    > "$BATS_TEST_TMPDIR/REQUEST.json"
  # Two overlays of examples/, as an operator writes one: the module set to the build here; the
  # second also sets an invalid queueCheck on the validating half.
  local settings
  for overlay in valid invalid; do
    mkdir -p "$BATS_TEST_TMPDIR/$overlay"
    settings=""
    [ "$overlay" = invalid ] && settings="
- target: {kind: ClusterAdmissionPolicy, name: jobset-multislice-validate}
  patch: |-
    - {op: add, path: /spec/settings/queueCheck, value: sometimes}"
    cat > "$BATS_TEST_TMPDIR/$overlay/kustomization.yaml" <<EOF
resources:
- $(realpath --relative-to="$BATS_TEST_TMPDIR/$overlay" "$examples")
patches:
- target: {group: policies.kubewarden.io}
  patch: |-
    - {op: replace, path: /spec/module, value: "file://$POLICY"}$settings
EOF
  done
  cd "$BATS_TEST_TMPDIR"
  PATH="$(dirname "$kubectl_bin"):$PATH"
  # kwctl run with the trust config, as every kwctl run here; the rest as written.
  kwctl() { if [ "$1" = run ]; then kw "$@"; else "$KWCTL" "$@"; fi; }
  run --separate-stderr eval "${render/"<your overlay of examples/>"/valid} && $check"
  [ "$status" -eq 0 ]
  [ "$(grep -c . <<<"$output")" -eq 2 ]
  [ "$(jq -s -c 'map(.allowed)' <<<"$output")" = "[true,true]" ]
  jq -s -r '.[0].patch | @base64d' <<<"$output" | grep -q 'multislice.kubewarden.io/facts'
  [ "$(jq -s -r '.[1].patch // "none"' <<<"$output")" = none ]
  run --separate-stderr eval "${render/"<your overlay of examples/>"/invalid} && $check"
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"Error: Provided settings are not valid: $quoted"* ]]
}

# bats test_tags=artifacthub
@test "artifacthub-pkg.yml is exactly what kwctl generates, but for createdAt" {
  "$KWCTL" scaffold artifacthub --metadata-path policy-metadata.yml \
    --questions-path questions-ui.yml --output "$BATS_TEST_TMPDIR/generated.yml"
  diff <(sed '/^createdAt:/d' artifacthub-pkg.yml) \
    <(sed '/^createdAt:/d' "$BATS_TEST_TMPDIR/generated.yml")
  grep -q '^createdAt: ' artifacthub-pkg.yml
}

# bats test_tags=artifacthub
@test "make artifacthub leaves the committed artifacthub-pkg.yml unchanged" {
  local before
  before=$(sha256sum artifacthub-pkg.yml)
  run make -s artifacthub
  [ "$status" -eq 0 ]
  [ "$(sha256sum artifacthub-pkg.yml)" = "$before" ]
}
