"""Feeds each TPU container's env to JAX's own GKE TPU cluster detection (docs/contributing/spec.md §4.3).

`gke_tpu_cluster.py SPEC.json`: SPEC["containers"] is a list of {"name", "env"}, SPEC["hosts"]
maps every pod's DNS name to a loopback address (standing in for the cluster DNS, which
JAX queries before it trusts a coordinator host). A key JAX finds in no env it asks of the
TPU VM's metadata server (`tpu-env`), which holds no MEGASCALE_* for a single slice: that
lookup answers "not there", as the metadata server does, without a network. For each container this runs
jax._src.clusters.cloud_tpu_cluster.GkeTpuCluster in a clean env and prints, as one JSON
list, its process id, its process count and the coordinator host JAX derives.
"""
import json
import os
import socket
import sys

from jax._src.clusters import cloud_tpu_cluster
from jax._src.clusters.cloud_tpu_cluster import GkeTpuCluster

READ = ("TPU_", "MEGASCALE_")


def main(spec_path):
    spec = json.load(open(spec_path))
    hosts = spec["hosts"]

    def resolve(name):
        if name not in hosts:
            raise socket.gaierror(f"{name} is not a pod")
        return hosts[name]

    cloud_tpu_cluster.socket.gethostbyname = resolve
    cloud_tpu_cluster.get_tpu_env_value_from_metadata = lambda key: None
    out = []
    for c in spec["containers"]:
        for k in [k for k in os.environ if k.startswith(READ)]:
            del os.environ[k]
        os.environ.update({k: v for k, v in c["env"].items() if k.startswith(READ)})
        address = GkeTpuCluster.get_coordinator_address(
            timeout_secs=1, override_coordinator_port=None)
        out.append({
            "name": c["name"],
            "process_id": GkeTpuCluster.get_process_id(),
            "process_count": GkeTpuCluster.get_process_count(),
            "coordinator_host": address.rsplit(":", 1)[0],
        })
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
