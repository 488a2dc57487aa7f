"""One machine of a cluster: today's supervisor over that machine's slice of the ring.

The node actor (hive/procs/cluster_node.py) starts this in a process of its own
(``spawn``, as any child) with the cluster's plan (hive/procs/cluster_plan.py):
a :class:`MachineSupervisor` is the one-machine :class:`Supervisor` with the
plan's slice of workers (global ids, so each store is ``worker-NN`` of the
ring's numbering), a ring over every worker of the cluster, tcp + CURVE
endpoints with every worker as a peer, and its own data directory on its own
disk in the usual layout (hive/storage/datadir.py). It differs in three ways:

- **The batch end is the cluster's.** A machine whose workers are idle may be
  given links by another at any moment, so it only says it is ``quiet`` (in its
  status); the driver ends the batch when every machine is.
- **It is fenced.** Its node actor renews its lease with the head and hands each
  grant over as a ``fence`` request (``until``, its epoch, every worker's
  epoch); the supervisor passes it to its workers as a command at once and
  keeps the latest for ``status`` (hive/procs/fence.py).
- **Its ring is the plan's.** The driver resizes the machines' stores to a new
  plan before any machine starts (hive/procs/cluster_resize.py), each
  machine's hive.json then records the new ring; a start whose hive.json
  records another ring (a resize that did not run) is refused.

Seeds and ``hive add`` URLs reach it through ``add`` on its control socket, each
already one its own workers own (the driver cuts them by the ring), so its
splitter sends them only to its own workers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import zmq

from hive.config import Config, from_dict
from hive.core import wire
from hive.errors import HiveError, StoreError
from hive.procs.batchend import BatchEnd
from hive.procs.cluster_plan import ClusterPlan
from hive.procs.curve import ensure_keys
from hive.procs.endpoints import Endpoints
from hive.procs.fence import Fence
from hive.procs.lifecycle import ExitCode, Runner, die_with_parent, setup_logging
from hive.procs.startcheck import store_released
from hive.procs.stats import HiveStats
from hive.procs.supervisor import Supervisor
from hive.storage.datadir import DataDir
from hive.storage.store import Store, check_file

log = logging.getLogger(__name__)


class MachineSupervisor(Supervisor):
    """The supervisor of one machine of a cluster."""

    def __init__(self, cfg: Config, data_dir: Path, plan: ClusterPlan, name: str) -> None:
        machine = plan.machine(name)
        super().__init__(cfg, data_dir, machine.count)
        self.plan = plan
        self.machine = machine
        self.workers = machine.workers
        self.ring_procs = plan.procs
        self.ring = plan.ring()
        self.batch_end_stops = False
        self.stats = HiveStats(self.workers)
        self.batch = BatchEnd(self.workers)
        self.fence = Fence(enabled=True)

    def _check(self, previous: dict[str, Any] | None) -> None:
        ring = previous.get("ring") if previous is not None else None
        if isinstance(ring, dict) and ring != self._ring():
            raise HiveError(f"{self.dd.state_file} records the ring {ring}, the cluster's plan "
                            f"is {self._ring()}: hive start --cluster resizes the machines first")
        for i in self.workers:
            directory = self.dd.worker(i)
            with store_released(directory, f"the store of worker {i}"):
                check_file(directory)
            if DataDir.store_data(directory).exists():
                continue
            if ring is not None and not self.recreate_missing:
                raise StoreError(f"the store of worker {i} is missing "
                                 f"({DataDir.store_data(directory)}) though "
                                 f"{self.dd.state_file} names it")
            Store(directory, sync_interval=0.0).close(time.time())

    def _endpoints(self) -> Endpoints:
        return self.plan.endpoints(self.machine, ensure_keys(self.dd.keys).directory)

    def _write_state(self) -> None:
        super()._write_state()
        self.dd.update_state(workers=[self.machine.first, self.machine.count],
                             machine=self.machine.name)

    def _handlers(self) -> dict[str, Any]:
        return {**super()._handlers(), "fence": self._fence, "status": self._machine_status}

    def _fence(self, request: dict[str, Any]) -> object:
        args = {key: request.get(key) for key in ("until", "epoch", "epochs", "dropped")}
        self.fence.update(args)  # ValueError for a bad one: answered as an error
        command = wire.encode_command("fence", args)
        for sock in self.commands:
            with contextlib.suppress(zmq.Again):
                sock.send_multipart(command, flags=zmq.NOBLOCK)
        return {"epoch": self.fence.epoch}

    def _machine_status(self, request: dict[str, Any]) -> object:
        status: dict[str, Any] = dict(self.status())
        status.update(machine=self.machine.name, epoch=self.fence.epoch,
                      lease_until=self.fence.until, quiet=self.quiet,
                      pages_this_start=self.stats.pages_this_start,
                      ended=self.ended, exit_code=int(self.exit_code))
        return status


def run_machine(cfg_data: dict[str, Any], data_dir: str, plan_data: dict[str, Any], name: str,
                parent: int) -> None:
    """The machine supervisor's entry point (spawned by its node actor, dying with it)."""
    die_with_parent(parent)
    cfg = from_dict(cfg_data)
    dd = DataDir(Path(data_dir))
    dd.logs.mkdir(parents=True, exist_ok=True)
    setup_logging(cfg.log.level, dd.log_file("supervisor"), "supervisor")
    supervisor = MachineSupervisor(cfg, Path(data_dir), ClusterPlan.from_dict(plan_data), name)
    runner = Runner(supervisor, f"machine {name}", stop=supervisor.signalled)
    try:
        if runner.run() != 0:
            supervisor.exit_code = ExitCode.ERROR
    except (HiveError, OSError) as exc:
        log.error("machine %s could not run: %s", name, exc)
        dd.failure_file("supervisor.log").write_text(str(exc)[:2000])
        raise SystemExit(ExitCode.ERROR) from None
    log.info("machine %s (pid %d) ended: %s", name, os.getpid(), supervisor.ended)
    raise SystemExit(int(supervisor.exit_code))
