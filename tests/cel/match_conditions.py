"""The matchConditions of the example policy manifests, evaluated by a real CEL evaluator
(the `cel` package: bindings of the Rust `cel` crate) with the variables the API server gives
a webhook's matchConditions (`request`, `object`, `oldObject`), on the requests it would send.

An evaluation error fails the test: with failurePolicy Fail the API server would reject the
request. Run by `make e2e-tests`: python tests/cel/match_conditions.py
"""
import copy
import json
import pathlib
import sys

import cel
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = ["examples/cluster-admission-policy.yaml", "examples/admission-policy.yaml"]


def request(path):
    return json.loads((ROOT / path).read_text())


def with_operation(req, operation):
    """The same request as another operation; DELETE carries the object only as oldObject."""
    out = copy.deepcopy(req)
    out["operation"] = operation
    if operation == "DELETE":
        out["oldObject"], out["object"] = out["object"], None
    elif operation == "UPDATE":
        out["oldObject"] = copy.deepcopy(out["object"])
    return out


def without_labels(req, empty=False):
    out = copy.deepcopy(req)
    if empty:
        out["object"]["metadata"]["labels"] = {}
    else:
        del out["object"]["metadata"]["labels"]
    return out


jobset = request("test_data/requests/jobset-tpu-4-slices.v09.json")
jobset_pod = request("test_data/requests/pod-tpu-slice-pod.json")
plain_pod = request("test_data/requests/pod-not-a-jobset-pod.json")

# (name, AdmissionRequest, whether the API server must send it to the policy)
CASES = [
    ("JobSet CREATE", jobset, True),
    ("JobSet UPDATE", with_operation(jobset, "UPDATE"), True),
    ("JobSet pod CREATE", jobset_pod, True),
    ("plain pod CREATE", plain_pod, False),
    ("pod with no labels at all", without_labels(plain_pod), False),
    ("pod with an empty label map", without_labels(plain_pod, empty=True), False),
    ("pod DELETE, no object", with_operation(jobset_pod, "DELETE"), False),
    ("JobSet DELETE, no object", with_operation(jobset, "DELETE"), True),
]


def sent(conditions, req):
    """True when every condition is true (the API server calls the webhook)."""
    context = {"request": req, "object": req["object"], "oldObject": req.get("oldObject")}
    results = []
    for condition in conditions:
        result = cel.evaluate(condition["expression"], context)
        if not isinstance(result, bool):
            raise TypeError(f"{condition['name']} gave {result!r}, not a bool")
        results.append(result)
    return all(results)


def main():
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok: {what}")
        else:
            failed += 1
            print(f"FAILED: {what}")

    specs = [yaml.safe_load((ROOT / m).read_text())["spec"] for m in MANIFESTS]
    conditions = specs[0].get("matchConditions") or []
    check(len(conditions) > 0, "the cluster-wide example has matchConditions")
    for manifest, spec in zip(MANIFESTS, specs):
        check(spec.get("matchConditions") == conditions,
              f"{manifest} has the same matchConditions as {MANIFESTS[0]}")
        timeout = spec.get("timeoutSeconds")
        # policy-server stops an evaluation after 2 s; the webhook allows 1..30 s.
        check(isinstance(timeout, int) and 2 < timeout <= 30,
              f"{manifest}: timeoutSeconds {timeout} lies in (2, 30]")
    names = [c["name"] for c in conditions]
    check(len(set(names)) == len(names), "condition names are unique")

    for name, req, expected in CASES:
        try:
            got = sent(conditions, req)
        except Exception as error:  # an error would reject the request under Fail
            check(False, f"{name}: evaluation error: {error}")
            continue
        check(got == expected, f"{name}: {'sent' if got else 'skipped'}, "
              f"expected {'sent' if expected else 'skipped'}")

    # The evaluator is not lenient: a condition that reads a missing field errors.
    try:
        cel.evaluate("object.metadata.labels.size() > 0",
                     {"request": plain_pod, "object": without_labels(plain_pod)["object"]})
        check(False, "reading a missing field is an error")
    except Exception:
        check(True, "reading a missing field is an error")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
