#!/usr/bin/env bats
# End-to-end tests of the annotated policy with the real `kwctl run`, as every Kubewarden
# policy has. The expectations live in test_data/e2e/cases.json, which the harness test
# tests/wasm/e2e_cases.rs also runs through the same policy, so they hold without kwctl too.

CASES=test_data/e2e/cases.json
POLICY=annotated-policy.wasm

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
    run kwctl run --request-path "$request" --settings-json "$settings" "$POLICY"
    [ "$status" -ne 0 ]
    [[ "$output" == *"$(jq -r . <<<"$error")"* ]]
    return 0
  fi

  run bash -c "kwctl run --request-path '$request' --settings-json '$settings' '$POLICY' 2>/dev/null"
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

@test "an unknown accelerator is accepted with a warning" {
  check_case warn-unknown-accelerator
}

@test "rejectUnknownAccelerators turns that warning into a rejection" {
  check_case reject-unknown-accelerator
}

@test "invalid settings are refused by kwctl run" {
  check_case invalid-settings
}
