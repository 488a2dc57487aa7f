"""The node actor: one per machine of a cluster, pinned there by the machine's resource.

A machine joins the Ray cluster with a resource of its own,
``ray start --resources '{"hive-node-<name>": 1}'``, and ``hive start
--cluster`` (hive/procs/cluster.py) places one :class:`Node` on it by asking for
that resource: not a Ray node id, which changes whenever the machine's raylet
restarts, but a name the operator gave the machine, which does not. Ray restarts
the actor (``max_restarts=-1``) when a machine with the resource is back, and
the restarted actor resumes at once: it finds the plan at the head and starts
the machine again from its stores.

What it does, in the machine's own data directory (``cluster.node_data``,
on its local disk):

- makes the machine's CURVE keys (hive/procs/curve.py) and gives the driver
  their public halves (:meth:`Node.describe`); admits every other machine's
  client certificate (public) before its supervisor starts;
- joins the head for an epoch and starts the machine's supervisor
  (hive/procs/cluster_machine.py) as a process of its own, which dies with the
  actor (die_with_parent) and runs the machine's workers as ordinary processes;
- renews the machine's lease every ``cluster.renew`` seconds on a thread, and
  hands each grant to the supervisor as a ``fence`` request: ``until`` is when
  it asked, plus the lease, less one renewal interval, so the workers stop
  fetching before the head can count the lease as lapsed (hive/procs/fence.py).
  A refused renewal means the head has declared this machine lost (it froze,
  or was cut off, past its lease): the node stops its supervisor, joins again
  for a newer epoch and starts it again from its stores.

Ray (the ``cluster`` extra) is imported in the methods that use it, so a plain install
imports this module without it (tests/test_install.py).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from hive.config import Config, from_dict
from hive.errors import HiveError
from hive.procs.cluster_plan import ClusterPlan, Machine
from hive.procs.control import ControlClient
from hive.procs.curve import KeyFiles, admit_machines, ensure_keys
from hive.procs.lifecycle import read_failure
from hive.storage.datadir import DataDir

log = logging.getLogger(__name__)

# How long a stopping machine has to stop warmly before it is killed (its fetches finish).
STOP_GRACE = 60.0
CONTROL_TIMEOUT = 5.0


def node_data(cfg: Config, data: str, name: str) -> Path:
    """Machine ``name``'s data directory: ``cluster.node_data`` with ``--data`` and it."""
    return Path(cfg.cluster.node_data.format(data=data, node=name)).resolve()


class Node:
    """One machine's actor: its keys, its supervisor process and its lease."""

    def __init__(self, head: Any, name: str, data: str, cfg_data: dict[str, Any]) -> None:
        import ray
        self.head = head
        self.name = name
        self.cfg_data = cfg_data
        self.cfg = from_dict(cfg_data)
        self.data_dir = node_data(self.cfg, data, name)
        self.dd = DataDir(self.data_dir)
        self.dd.logs.mkdir(parents=True, exist_ok=True)
        self.keys = ensure_keys(self.dd.keys)
        self.process: BaseProcess | None = None
        self.plan: ClusterPlan | None = None
        self.machine: Machine | None = None
        self.epoch = 0
        self.rejoins = 0
        self.stopping = False
        self._lock = threading.Lock()
        self._renewing: threading.Thread | None = None
        plan = ray.get(head.plan.remote())
        if plan is not None:  # restarted by Ray after the machine came back: resume
            log.info("machine %s: resuming", name)
            self.start(plan)

    def describe(self) -> dict[str, str]:
        """The machine's name, address and public keys, for the plan."""
        import ray
        from zmq.auth import load_certificate  # noqa: PLC0415 - only for its public keys

        files = KeyFiles.at(self.keys.directory)
        server, _ = load_certificate(files.server_public)
        host: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return {"name": self.name, "host": host,
                "server_key": server.decode("ascii"),
                "client_cert": files.client_public.read_text()}

    def pid(self) -> int:
        return os.getpid()

    def start(self, plan_data: dict[str, Any]) -> int:
        """Admit the other machines' clients, join the head and start the machine; its epoch."""
        with self._lock:
            if self.process is not None and self.process.is_alive():
                return self.epoch
            self.plan = ClusterPlan.from_dict(plan_data)
            self.machine = self.plan.machine(self.name)
            admit_machines(KeyFiles.at(self.keys.directory).clients_dir,
                           {other.name: other.client_cert for other in self.plan.machines})
            self._launch()
        if self._renewing is None:
            self._renewing = threading.Thread(target=self._renew_loop, daemon=True,
                                              name="hive-lease")
            self._renewing.start()
        return self.epoch

    def _launch(self) -> None:
        import ray

        from hive.procs.cluster_machine import run_machine  # noqa: PLC0415 - its process's

        assert self.plan is not None
        self.epoch = ray.get(self.head.join.remote(self.name))
        if not self.epoch:
            log.warning("machine %s was dropped by the operator: it does not start", self.name)
            self.stopping = True
            return
        spawn = multiprocessing.get_context("spawn")
        self.process = spawn.Process(
            target=run_machine, name=f"hive-machine-{self.name}",
            args=(self.cfg_data, str(self.data_dir), self.plan.to_dict(), self.name,
                  os.getpid()))
        # Started as is (not under spawn_quietly, which only the main thread may call): an
        # actor has no terminal whose Ctrl-C could reach it, and the machine's supervisor
        # sets its own signal handlers.
        self.process.start()
        log.info("machine %s started with epoch %d, pid %s", self.name, self.epoch,
                 self.process.pid)

    def _client(self, timeout: float = CONTROL_TIMEOUT) -> ControlClient:
        assert self.plan is not None and self.machine is not None
        endpoints = self.plan.endpoints(self.machine, self.keys.directory)
        return ControlClient(endpoints.control, timeout, curve_dir=self.keys.directory)

    def _renew_loop(self) -> None:
        import ray
        cluster = self.cfg.cluster
        while not self.stopping:
            asked = time.time()
            try:
                grant = ray.get(self.head.renew.remote(self.name, self.epoch),
                                timeout=cluster.lease)
            except Exception as exc:  # noqa: BLE001 - a head out of reach: no grant
                log.warning("machine %s: no renewal: %s", self.name, exc)
                grant = {}
            if grant is None and not self.stopping:
                try:
                    self._rejoin()
                except Exception:  # the thread must go on: the next turn tries again
                    log.exception("machine %s: could not start again", self.name)
            elif grant:
                with contextlib.suppress(HiveError), self._client(cluster.renew) as client:
                    client.call("fence", until=asked + cluster.lease - cluster.renew,
                                epoch=self.epoch, epochs=grant["epochs"],
                                dropped=grant["dropped"])
            time.sleep(max(0.0, asked + cluster.renew - time.time()))

    def _rejoin(self) -> None:
        """The head declared this machine lost: stop its old processes, join again."""
        log.warning("machine %s: the head refused epoch %d; starting again", self.name,
                    self.epoch)
        with self._lock:
            self._end(warm=True)
            self.rejoins += 1
            self._launch()

    def _end(self, warm: bool) -> None:
        process = self.process
        if process is None:
            return
        if process.is_alive():
            if warm:
                process.terminate()
                process.join(STOP_GRACE)
            if process.is_alive():
                process.kill()
        process.join(10)

    def add(self, urls: list[str]) -> dict[str, Any]:
        """Queue seeds (its own workers' hosts only) at the machine's supervisor."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with self._client(10.0) as client:
                    result = client.call("add", urls=urls)
                    assert isinstance(result, dict)
                    return result
            except HiveError:
                if self.process is None or not self.process.is_alive():
                    why = read_failure(self.dd.failure_file("supervisor.log"))
                    raise HiveError(f"machine {self.name} did not start: "
                                    f"{why or 'see its logs'}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def call(self, cmd: str, args: dict[str, Any]) -> Any:
        """One control request to the machine's supervisor (``hive add`` or ``deny`` through
        the driver: hive/procs/cluster_requests.py); HiveError if it did not answer."""
        if self.plan is None or self.process is None or not self.process.is_alive():
            raise HiveError(f"machine {self.name} is not running")
        with self._client() as client:
            return client.call(cmd, **args)

    def resize(self, step: str, *args: Any) -> Any:
        """Run a step of a cluster resize on this machine's stores; refused while it
        crawls (hive/procs/cluster_resize.py)."""
        from hive.procs.cluster_resize import STEPS  # noqa: PLC0415 - only for a resize

        if self.process is not None and self.process.is_alive():
            raise HiveError(f"machine {self.name} is crawling: a cluster resize is offline")
        return STEPS[step](self.data_dir, self.cfg, self.name, *args)

    def status(self) -> dict[str, Any]:
        """The machine supervisor's status, or why there is none. Read under the lock a
        restart holds: the driver never sees the exit of a supervisor the node is replacing
        (it would take it for the machine's end and stop the hive)."""
        with self._lock:
            process, epoch, rejoins = self.process, self.epoch, self.rejoins
            alive = process is not None and process.is_alive()
            code = process.exitcode if process is not None else None
        base = {"machine": self.name, "epoch": epoch, "rejoins": rejoins,
                "alive": alive, "node_pid": os.getpid(), "exit_code": code}
        if not alive or self.plan is None:
            return base
        try:
            with self._client() as client:
                result = client.call("status")
        except HiveError as exc:
            return {**base, "error": str(exc)}
        assert isinstance(result, dict)
        return {**result, **base}

    def stop(self, now: bool = False) -> None:
        """Stop the machine (warmly unless ``now``); its renewals go on until it has."""
        with contextlib.suppress(HiveError), self._client() as client:
            client.call("stop", now=now)

    def exit_code(self) -> int | None:
        """The machine supervisor's exit code once it has exited, else None (not while the
        node replaces it)."""
        with self._lock:
            return self.process.exitcode if self.process is not None else None

    def shutdown(self) -> None:
        self.stopping = True
        with self._lock:
            self._end(warm=True)
