# Which requests reach the webhook under these matchConditions is asserted by the cluster test
# (cluster/tests/cluster/match_conditions.rs), with a real API server evaluating them. This
# test stays for what that one cannot show:
# - that the policy itself accepts, with no patch, every request the conditions skip, under
#   each manifest's settings (kwctl or the waPC harness): skipping loses nothing. The API server
#   never sends a skipped request, so the cluster test cannot ask the policy about it;
# - a DELETE (no object): no rule binds it, so the API server never evaluates the conditions
#   for one; here they are shown false there, not an error, should a rule ever bind it;
# - request shapes the cluster test does not send: an empty label or annotation map beside a
#   missing one, the opt-in spelled "True" or "false", a JobSet's child Job UPDATE;
# - the manifests agreeing: the same conditions in the cluster-wide and namespaced examples,
#   timeoutSeconds in (2, 30], and the rules of policy-metadata.yml;
# and it runs in `make e2e-tests`, with no Go toolchain and no control plane.
"""The matchConditions of the example policy manifests, evaluated by a real CEL evaluator
(the `cel` package: bindings of the Rust `cel` crate) with the variables the API server gives
a webhook's matchConditions (`request`, `object`, `oldObject`), on the requests it would send.

An evaluation error fails the test: with failurePolicy Fail the API server would reject the
request. Every request the conditions skip is also sent to the policy under each manifest's
settings: the policy itself must accept it with no patch, so skipping it loses nothing. The
policy runs in one of two hosts, and the script says which:

- kwctl (`kwctl run` on annotated-policy.wasm), where kwctl is installed: named by KWCTL, else
  on PATH, else in ../shared/tools;
- the waPC harness (the host crate's `evaluate` on policy.wasm), where it is not: the same
  wasmtime host `make test` runs the module in.

Run by `make e2e-tests`, which builds what each host needs and passes `--host`:
  python tests/cel/match_conditions.py [--host auto|kwctl|harness] [--evaluate EVALUATE]
      [--wasm policy.wasm]
"""
import argparse
import copy
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import cel
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = ["examples/single/cluster-admission-policy.yaml",
             "examples/namespaced/admission-policy.yaml"]
# The one home of every policy's matchConditions: a JSON patch that examples/policy/'s
# component applies to each policy of examples/ (`kubectl apply -k`).
CONDITIONS = "examples/policy/match-conditions.yaml"
# The recommended pair (README "Install"): each binds part of the rules, with the conditions of
# the resources it binds.
PAIR = ["examples/cluster-admission-policy-mutate.yaml",
        "examples/cluster-admission-policy-validate.yaml"]


def spec_of(manifest):
    """The manifest's spec as kubectl apply -k renders it: with the component's conditions."""
    spec = yaml.safe_load((ROOT / manifest).read_text())["spec"]
    ops = yaml.safe_load((ROOT / CONDITIONS).read_text())
    assert [(op["op"], op["path"]) for op in ops] == [("add", "/spec/matchConditions")], ops
    spec["matchConditions"] = ops[0]["value"]
    return spec


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


def with_annotations(req, annotations):
    """The same request with the object's annotations replaced."""
    out = copy.deepcopy(req)
    out["object"]["metadata"]["annotations"] = annotations
    return out


def bare(req):
    """The same request with neither labels nor annotations on the object."""
    out = copy.deepcopy(req)
    out["object"]["metadata"].pop("labels", None)
    out["object"]["metadata"].pop("annotations", None)
    return out


FACTS = "multislice.kubewarden.io/facts"
JAX_OPT_IN = "multislice.kubewarden.io/jax-distributed"


def job_pod(job_request, pod_request, index):
    """The pod the Job controller creates for completion `index` of an admitted opted-in Job:
    the template's labels and annotations (the facts the Job CREATE stamped among them), the
    controller's job-name and completion-index labels and annotation, and no jobset-name
    label. The envelope (kind, resource, user) is that of another pod CREATE."""
    job = job_request["object"]
    name = job["metadata"]["name"]
    template = job["spec"]["template"]
    meta = template.get("metadata", {})
    out = copy.deepcopy(pod_request)
    out["namespace"] = job["metadata"]["namespace"]
    out["name"] = ""
    out["object"] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{name}-{index}-",
            "namespace": job["metadata"]["namespace"],
            "labels": {**meta.get("labels", {}),
                       "batch.kubernetes.io/job-name": name, "job-name": name,
                       "batch.kubernetes.io/job-completion-index": str(index)},
            "annotations": {**meta.get("annotations", {}),
                            # What the Job CREATE stamps for job-jax-gpu-4.json.
                            FACTS: '{"subdomain":"jax-train","job":{"completions":4}}',
                            "batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {**template["spec"], "hostname": f"{name}-{index}"},
    }
    return out


jobset = request("test_data/requests/jobset-tpu-4-slices.v09.json")
jobset_pod = request("test_data/requests/pod-tpu-slice-pod.json")
plain_pod = request("test_data/requests/pod-not-a-jobset-pod.json")
opted_in_job = request("test_data/requests/job-jax-gpu-4.json")
example_job = request("test_data/e2e/examples/jax-indexed-job.json")
plain_job = request("test_data/requests/job-not-opted-in.json")
jobset_child_job = request("test_data/requests/job-jobset-child.json")
opted_in_job_pod = job_pod(opted_in_job, plain_pod, 0)


def opted_out_update(req):
    """An UPDATE whose new object drops the opt-in annotation (the old one still has it)."""
    out = with_operation(req, "UPDATE")
    del out["object"]["metadata"]["annotations"][JAX_OPT_IN]
    return out

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
    # Plain Jobs (docs/contributing/spec.md §4.6): only those opted into the JAX env, and not a JobSet's child.
    ("opted-in Job CREATE", opted_in_job, True),
    ("opted-in Job UPDATE", with_operation(opted_in_job, "UPDATE"), True),
    ("the example Job (examples/jax-indexed-job.yaml) CREATE", example_job, True),
    ("Job without the annotation CREATE", plain_job, False),
    ("Job without the annotation UPDATE", with_operation(plain_job, "UPDATE"), False),
    ("Job annotated \"false\" CREATE",
     with_annotations(opted_in_job, {JAX_OPT_IN: "false"}), False),
    ("Job annotated \"True\" (not exactly \"true\") CREATE",
     with_annotations(opted_in_job, {JAX_OPT_IN: "True"}), False),
    ("Job with unrelated annotations only",
     with_annotations(opted_in_job, {"team": "ml"}), False),
    ("Job with no labels and no annotations at all", bare(opted_in_job), False),
    ("Job with an empty annotation map", with_annotations(opted_in_job, {}), False),
    ("JobSet's child Job (opted in, jobset-name label) CREATE", jobset_child_job, False),
    ("JobSet's child Job UPDATE", with_operation(jobset_child_job, "UPDATE"), False),
    ("Job UPDATE that drops the annotation (the old Job opted in, as the policy checks)",
     opted_out_update(opted_in_job), True),
    ("Job DELETE, no object", with_operation(opted_in_job, "DELETE"), False),
    # Pods of opted-in Jobs carry the facts annotation copied from the template.
    ("pod of an opted-in Job (facts annotation, no jobset-name label)", opted_in_job_pod, True),
    ("pod of an opted-in Job with no labels at all",
     without_labels(opted_in_job_pod), True),
    ("plain pod with unrelated annotations (the Job opt-in among them)",
     with_annotations(plain_pod, {"prometheus.io/scrape": "true", JAX_OPT_IN: "true"}), False),
    ("pod with an empty annotation map", with_annotations(plain_pod, {}), False),
    ("pod with no labels and no annotations at all", bare(plain_pod), False),
    ("pod of an opted-in Job DELETE, no object", with_operation(opted_in_job_pod, "DELETE"),
     False),
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


def bound(rules, req):
    """Whether a policy's rules bind the request (its resource and operation)."""
    return any(req["resource"]["resource"] in r["resources"] and req["operation"] in r["operations"]
               for r in rules)


def find_kwctl():
    """kwctl as the Makefile finds it: KWCTL (a path, or a name on PATH), else kwctl on PATH,
    else ../shared/tools/kwctl. None when there is none."""
    value = os.environ.get("KWCTL") or "kwctl"
    if "/" in value:
        return value if os.access(value, os.X_OK) else None
    found = shutil.which(value)
    if found:
        return found
    shared = ROOT.parent / "shared" / "tools" / value
    return str(shared) if os.access(shared, os.X_OK) else None


def trust_config(kwctl):
    """The Sigstore trust config that keeps kwctl off the network, as e2e.bats finds it."""
    candidates = [os.environ.get("SIGSTORE_TRUST_CONFIG"),
                  pathlib.Path(kwctl).parent / "sigstore-trust-config.json",
                  ROOT.parent / "shared" / "tools" / "sigstore-trust-config.json"]
    return next((str(c) for c in candidates if c and pathlib.Path(c).is_file()), None)


class Kwctl:
    """`kwctl run` on the annotated module: the AdmissionResponse, as e2e.bats reads it."""

    def __init__(self, kwctl):
        self.kwctl = kwctl
        self.trust = trust_config(kwctl)
        self.module = ROOT / "annotated-policy.wasm"

    def describe(self):
        return f"kwctl run ({self.kwctl}) on {self.module.name}"

    def verdicts(self, runs):
        """(allowed, patched) or an error string, for each (request, settings) of `runs`."""
        out = []
        for req, settings in runs:
            command = [self.kwctl, "run"]
            if self.trust:
                command += ["--sigstore-trust-config", self.trust]
            with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
                json.dump(req, f)
                f.flush()
                command += ["--request-path", f.name, "--settings-json", json.dumps(settings),
                            str(self.module)]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                out.append(f"kwctl run failed: {done.stderr.strip()}")
                continue
            response = json.loads(done.stdout)
            out.append((response.get("allowed") is True, bool(response.get("patch"))))
        return out


class Harness:
    """The host crate's `evaluate` on policy.wasm: the policy's own `validate` response, sent
    `{"request": …, "settings": …}` as kwctl sends it; a patch is a `mutated_object`."""

    def __init__(self, evaluate, wasm):
        self.evaluate = pathlib.Path(evaluate)
        self.wasm = pathlib.Path(wasm)

    def describe(self):
        return f"the waPC harness ({self.evaluate}) on {self.wasm}"

    def verdicts(self, runs):
        if not self.evaluate.is_file():
            raise RuntimeError(f"{self.evaluate} is missing: build it with "
                               "`cargo build --workspace --bins`")
        if not self.wasm.is_file():
            raise RuntimeError(f"{self.wasm} is missing: build it with `make policy.wasm`")
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for i, (req, settings) in enumerate(runs):
                path = pathlib.Path(tmp) / f"payload-{i}.json"
                path.write_text(json.dumps({"request": req, "settings": settings}))
                files.append(str(path))
            # One process for every payload: the module is compiled once.
            done = subprocess.run([str(self.evaluate), "--wasm", str(self.wasm), *files],
                                  capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"evaluate failed: {done.stderr.strip()}")
        answers = dict(line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)
        out = []
        for path in files:
            answer = answers.get(path)
            if answer is None or answer.startswith("HOST ERROR"):
                out.append(f"evaluate: {answer or 'no answer'}")
                continue
            response = json.loads(answer)
            out.append((response.get("accepted") is True,
                        response.get("mutated_object") is not None))
        return out


def policy_host(args):
    """The host the policy runs in, and why that one."""
    kwctl = find_kwctl()
    if args.host == "kwctl" or (args.host == "auto" and kwctl):
        if not kwctl:
            raise SystemExit("error: --host kwctl, but kwctl is not installed "
                             "(docs/contributing/testing.md \"Kubewarden's own tools\")")
        return Kwctl(kwctl)
    return Harness(args.evaluate, args.wasm)


def parse_args():
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", choices=["auto", "kwctl", "harness"], default="auto",
                        help="where the policy runs: kwctl when installed (auto), or the waPC "
                             "harness")
    parser.add_argument("--evaluate", default=str(pathlib.Path(target) / "debug" / "evaluate"),
                        help="the host crate's evaluate binary (the harness)")
    parser.add_argument("--wasm", default=str(ROOT / "policy.wasm"),
                        help="the module the harness loads")
    return parser.parse_args()


def main():
    args = parse_args()
    host = policy_host(args)
    print(f"host: the policy runs in {host.describe()}")
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok: {what}")
        else:
            failed += 1
            print(f"FAILED: {what}")

    specs = [spec_of(m) for m in MANIFESTS]
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
    metadata_rules = yaml.safe_load((ROOT / "policy-metadata.yml").read_text())["rules"]
    for manifest, spec in zip(MANIFESTS, specs):
        check(spec.get("rules") == metadata_rules,
              f"{manifest} has the rules of policy-metadata.yml")

    skipped = []
    for name, req, expected in CASES:
        try:
            got = sent(conditions, req)
        except Exception as error:  # an error would reject the request under Fail
            check(False, f"{name}: evaluation error: {error}")
            continue
        check(got == expected, f"{name}: {'sent' if got else 'skipped'}, "
              f"expected {'sent' if expected else 'skipped'}")
        if not got:
            skipped.append((name, req))

    # What the API server skips, the policy would have accepted unchanged.
    runs = [(name, manifest, req, spec.get("settings") or {})
            for name, req in skipped for manifest, spec in zip(MANIFESTS, specs)]

    # The pair: each policy is sent, of the requests its rules bind, exactly what the single
    # policy is sent; what its conditions skip goes to the policy under its own settings.
    for manifest in PAIR:
        spec = spec_of(manifest)
        for name, req, expected in CASES:
            if not bound(spec["rules"], req):
                continue
            try:
                got = sent(spec.get("matchConditions") or [], req)
            except Exception as error:
                check(False, f"{manifest}: {name}: evaluation error: {error}")
                continue
            check(got == expected, f"{manifest}: {name}: {'sent' if got else 'skipped'}, "
                  f"expected {'sent' if expected else 'skipped'}")
            if not got:
                runs.append((name, manifest, req, spec.get("settings") or {}))
    try:
        verdicts = host.verdicts([(req, settings) for _, _, req, settings in runs])
    except RuntimeError as error:
        check(False, f"the policy's host cannot run: {error}")
        verdicts = []
    for (name, manifest, _, _), verdict in zip(runs, verdicts):
        if isinstance(verdict, str):
            check(False, f"{name}: {manifest}: {verdict}")
            continue
        allowed, patched = verdict
        check(allowed and not patched,
              f"{name}: the policy under {manifest}'s settings accepts it unchanged")
    check(len(runs) > 0 and len(verdicts) == len(runs),
          "some requests are skipped, and the policy judged each of them")

    # The evaluator is not lenient: a condition that reads a missing field errors.
    try:
        cel.evaluate("object.metadata.labels.size() > 0",
                     {"request": plain_pod, "object": without_labels(plain_pod)["object"]})
        check(False, "reading a missing field is an error")
    except Exception:
        check(True, "reading a missing field is an error")

    print(f"{passed} passed, {failed} failed (the policy in {host.describe()})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
