"""A cluster's plan: its machines, which workers each runs, and every address and public key.

``hive start --cluster`` (hive/procs/cluster.py) draws the plan once, from the
machines that joined the Ray cluster with a resource ``hive-node-<name>``, and
the head actor (hive/procs/cluster_head.py) keeps it for the whole run; every
machine's supervisor starts from it (hive/procs/cluster_machine.py). The ring
does not change while a hive runs, so neither does the plan: machine ``k`` (in
the order of its name) runs the workers ``first .. first + count - 1`` of a
ring over all of them, and a machine that comes back (under the same name)
takes the same slice, the same ports and its own stores again.

Ports: machine ``k`` takes ``cluster.port + CLUSTER_PORTS k`` for its splitter,
the next for its supervisor, the next for its control socket, and one for each
of its workers after them (hive/procs/endpoints.py's layout, from the
machine's base). A machine's CURVE keys stay on it; the plan holds their public
halves only: each machine's server key (which the other machines' senders
expect of it) and client certificate (which every machine admits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hive.config import CLUSTER_PORTS, ClusterConfig
from hive.core.keys import HOST
from hive.core.ring import MAX_PROCS, Ring
from hive.procs.endpoints import Endpoints

RESOURCE_PREFIX = "hive-node-"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# Ports before a machine's first worker's: its splitter, supervisor and control.
_PORTS_BEFORE_WORKERS = 3


def machine_name(resource: str) -> str | None:
    """The machine a Ray resource names (``hive-node-a`` -> ``a``), or None."""
    if not resource.startswith(RESOURCE_PREFIX):
        return None
    name = resource.removeprefix(RESOURCE_PREFIX)
    return name if _NAME.fullmatch(name) else None


def check_name(name: str) -> str:
    """``name`` if it may name a machine, else ValueError naming it."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"a machine's name is 1-32 of a-z, 0-9, _ and -, got {name!r}")
    return name


@dataclass(frozen=True, slots=True)
class Machine:
    """One machine of the plan: its name, address, workers and public keys."""

    name: str
    index: int
    host: str
    first: int
    count: int
    server_key: str  # Z85 public key of its CURVE servers
    client_cert: str  # its client's public certificate, as zmq.auth writes it

    @property
    def workers(self) -> range:
        return range(self.first, self.first + self.count)


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    machines: tuple[Machine, ...]
    vnodes: int
    seed: int
    port: int
    key: str = HOST  # the ring-key scheme (hive.core.keys); "host" in a plan without one

    @classmethod
    def draw(cls, described: list[dict[str, str]], procs: int, vnodes: int, seed: int,
             cfg: ClusterConfig, key: str = HOST) -> ClusterPlan:
        """A plan for machines described as ``{name, host, server_key, client_cert}``, each
        running ``procs`` workers; ValueError if they do not fit."""
        if not described:
            raise ValueError("no machine has joined: start each with ray start --resources "
                             f"'{{\"{RESOURCE_PREFIX}<name>\": 1}}'")
        if procs > CLUSTER_PORTS - _PORTS_BEFORE_WORKERS:
            raise ValueError(f"--procs {procs}: a machine runs at most "
                             f"{CLUSTER_PORTS - _PORTS_BEFORE_WORKERS} workers")
        if procs * len(described) > MAX_PROCS:
            raise ValueError(f"{len(described)} machines x {procs} workers exceed the ring's "
                             f"{MAX_PROCS}")
        machines = []
        for k, machine in enumerate(sorted(described, key=lambda m: m["name"])):
            machines.append(Machine(check_name(machine["name"]), k, machine["host"], k * procs,
                                    procs, machine["server_key"], machine["client_cert"]))
        return cls(tuple(machines), vnodes, seed, cfg.port, key)

    @property
    def procs(self) -> int:
        return sum(m.count for m in self.machines)

    def ring(self) -> Ring:
        return Ring(self.procs, self.vnodes, self.seed, self.key)

    def machine(self, name: str) -> Machine:
        for machine in self.machines:
            if machine.name == name:
                return machine
        raise ValueError(f"no machine {name!r} in this cluster's plan")

    def machine_of(self, worker: int) -> Machine:
        for machine in self.machines:
            if worker in machine.workers:
                return machine
        raise ValueError(f"no worker {worker} in this cluster's plan")

    def base_port(self, machine: Machine) -> int:
        return self.port + CLUSTER_PORTS * machine.index

    def endpoints(self, machine: Machine, keys: Path) -> Endpoints:
        """Machine ``machine``'s recipe: its own sockets and every worker as a peer."""
        peers = {}
        for other in self.machines:
            base = self.base_port(other) + _PORTS_BEFORE_WORKERS
            host = f"[{other.host}]" if ":" in other.host else other.host
            for i, worker in enumerate(other.workers):
                peers[worker] = (f"tcp://{host}:{base + i}", other.server_key)
        return Endpoints.tcp(self.base_port(machine), machine.host, keys, peers)

    def to_dict(self) -> dict[str, Any]:
        return {"vnodes": self.vnodes, "seed": self.seed, "port": self.port, "key": self.key,
                "machines": [{"name": m.name, "index": m.index, "host": m.host,
                              "first": m.first, "count": m.count, "server_key": m.server_key,
                              "client_cert": m.client_cert} for m in self.machines]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterPlan:
        try:
            machines = tuple(Machine(check_name(m["name"]), int(m["index"]), str(m["host"]),
                                     int(m["first"]), int(m["count"]), str(m["server_key"]),
                                     str(m["client_cert"])) for m in data["machines"])
            return cls(machines, int(data["vnodes"]), int(data["seed"]), int(data["port"]),
                       str(data.get("key", HOST)))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a cluster plan: {exc}") from exc
