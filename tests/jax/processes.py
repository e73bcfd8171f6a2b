"""Runs real JAX processes on the env the policy injected (docs/contributing/spec.md §4.4).

`processes.py launch SPEC.json` starts one JAX process per entry of SPEC["processes"], each
as `processes.py worker` with its own loopback address, waits for all of them at most
SPEC["wall_seconds"], kills whatever is left, and prints one JSON summary on stdout.

A worker stands in for one pod's container: the pod's DNS name resolves to its loopback
address (SPEC["hosts"] maps every pod's name to one), and JAX_COORDINATOR_BIND_ADDRESS is its
own address, so the coordination service is reachable only where the env says it is.
"""
import json
import os
import subprocess
import sys
import time


def worker(spec_path, index):
    spec = json.load(open(spec_path))
    me = spec["processes"][int(index)]
    env = me["env"]
    host, port = env["JAX_COORDINATOR_ADDRESS"].rsplit(":", 1)
    if host not in spec["hosts"]:
        print(json.dumps({"error": f"coordinator host {host} is not a pod"}))
        return 3
    os.environ["JAX_PLATFORMS"] = "cpu"
    # Only process 0 starts the coordination service, on its own address.
    os.environ["JAX_COORDINATOR_BIND_ADDRESS"] = f"{me['address']}:{port}"
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"{spec['hosts'][host]}:{port}",
        num_processes=int(env["JAX_NUM_PROCESSES"]),
        process_id=int(env["JAX_PROCESS_ID"]),
        initialization_timeout=spec["init_seconds"],
    )
    gathered = multihost_utils.process_allgather(np.int32(jax.process_index()))
    print(json.dumps({
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "gathered": sorted(int(x) for x in np.ravel(gathered)),
    }), flush=True)
    jax.distributed.shutdown()
    return 0


def launch(spec_path):
    spec = json.load(open(spec_path))
    started = []
    for i, p in enumerate(spec["processes"]):
        started.append(subprocess.Popen(
            [sys.executable, __file__, "worker", spec_path, str(i)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + spec["wall_seconds"]
    results = []
    for p, proc in zip(spec["processes"], started):
        left = max(0.1, deadline - time.monotonic())
        try:
            out, err = proc.communicate(timeout=left)
            killed = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            killed = True
        report = None
        for line in out.splitlines():
            if line.startswith("{"):
                report = json.loads(line)
        results.append({
            "name": p["name"],
            "exit": proc.returncode,
            "killed": killed,
            "report": report,
            # The error, not the stack trace that follows it.
            "stderr_tail": "\n".join(
                [l for l in err.splitlines() if "rror" in l or "DEADLINE" in l][-3:]),
        })
    print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "worker":
        sys.exit(worker(sys.argv[2], sys.argv[3]))
    sys.exit(launch(sys.argv[2]))
