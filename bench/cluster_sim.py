"""A simulated Ray cluster on this machine: one Ray node per hive machine, on loopback.

``ray start`` refuses a second node on one machine's loopback (Ray's check for
single-machine platforms), so this plays the README's first two commands here:
it starts a Ray head node and one more node per machine, each with its resource
``hive-node-<name>`` (the head node is the first machine), prints the address
for ``hive start --cluster`` and keeps them up until Ctrl-C::

    python bench/cluster_sim.py --machines a,b,c [--address-file FILE]

Every process of the cluster, and ``hive start`` with it, runs Ray on loopback
only: set ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in ``hive start``'s
environment too (this script prints the line). Used as a library by
bench_cluster.py and the cluster tests' fixture does the same.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path
from typing import Any

# Loopback only, no usage reports: before Ray is imported, for every process it starts.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
NODE = {"num_cpus": 1, "object_store_memory": 80 << 20, "node_ip_address": "127.0.0.1",
        "include_dashboard": False}


class SimCluster:
    """A ``ray.cluster_utils.Cluster`` whose nodes are hive machines ``names``."""

    def __init__(self, names: list[str]) -> None:
        os.environ.update(RAY_ENV)
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={
            **NODE, "resources": {f"hive-node-{names[0]}": 1}})
        self.nodes: dict[str, Any] = {names[0]: self.cluster.head_node}
        for name in names[1:]:
            self.nodes[name] = self.cluster.add_node(**NODE,
                                                     resources={f"hive-node-{name}": 1})

    @property
    def address(self) -> str:
        address: str = self.cluster.address
        return address

    def shutdown(self) -> None:
        self.cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", default="a,b,c")
    parser.add_argument("--address-file", type=Path)
    args = parser.parse_args()
    cluster = SimCluster(args.machines.split(","))
    if args.address_file:
        args.address_file.write_text(cluster.address)
    print(f"export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0\n"
          f"hive start --cluster {cluster.address} ...", flush=True)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    try:
        while not stop[0]:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
