"""``hive start --cluster ADDRESS``: one hive across the machines of a Ray cluster.

The driver (this module, in the ``hive start`` process) connects to the Ray
cluster at ADDRESS (``auto``, ``ray://head:10001`` or a GCS ``host:port``), and:

1. finds the machines: every live Ray node with a resource ``hive-node-<name>``
   (given when the machine joined: ``ray start --resources``);
2. starts the head actor (hive/procs/cluster_head.py) on its own Ray node (the
   head's state lives and dies with the driver's machine) and one node actor per
   machine (hive/procs/cluster_node.py), pinned by that resource; draws the plan
   (hive/procs/cluster_plan.py: ``--procs`` workers per machine, one ring over
   all of them, each machine's address and public keys) from what the nodes
   describe, and hands it to the head and then to every node, which starts its
   machine's supervisor; ``--machines`` names the plan's machines (default: every
   one joined). A plan other than the last start's is a resize, done first, offline,
   through the node actors (hive/procs/cluster_resize.py), with every machine that
   may hold part of the crawl, which must have joined;
3. cuts the seeds by the ring and gives each machine the ones its workers own;
4. runs like a supervisor: a control socket of its own in ``--data`` (so ``hive
   status``, ``stop``, ``add`` and ``deny`` work as on one machine, over every
   machine: hive/procs/cluster_requests.py),
   ``hive.json`` there, and each second it asks every machine's status and the
   head to sweep the lapsed leases. The batch ends when every machine is quiet
   (its workers idle, its outboxes empty) and no count moved anywhere for two
   rounds in a row; ``--max-pages`` counts the pages of all machines; a machine
   whose supervisor stops on an error stops the cluster with its message.
   Exit codes are one machine's (hive/procs/lifecycle.py).

A machine that is lost (Ray lost its node, or it froze past its lease) shows
as ``down`` or ``lost`` in ``hive status``; its hosts wait, the others' outboxes
keep its batches, and the batch cannot end without it. It resumes when it is
back under the same name. A machine gone for good is the operator's to decide:
``hive stop``, then restore its data directory on another machine that joins
under its name (the stores and WARCs are all it is); or ``hive drop NAME``
(``drop`` on the control socket), which the head records (and the driver in
``hive.json``: ``cluster.dropped``): the machine's node actor is killed for
good, the other machines refuse, with a count, every URL of its hosts they held
or find later (hive/procs/cluster_head.py), and the batch ends without it. Its
own frontier is left on its disk, as it was. A start on the same data directory
keeps it dropped: it keeps its place in the plan (so the ring stays the same),
is dropped at the head before any machine starts, and is not started even if a
machine of its name has joined; its hosts' seeds are left out, counted.

Ray (the ``cluster`` extra) is imported in the methods that use it, so a plain install
imports this module without it (tests/test_install.py).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import zmq

from hive import __version__
from hive.config import Config
from hive.core.record import UrlRecord
from hive.errors import HiveError
from hive.procs.cluster_head import Head
from hive.procs.cluster_node import Node
from hive.procs.cluster_plan import RESOURCE_PREFIX, ClusterPlan, Machine, machine_name
from hive.procs.cluster_requests import ClusterRequests
from hive.procs.cluster_resize import (
    Call,
    ClusterResize,
    left_cluster,
    resize_if_changed,
    resize_pending,
    taking_part,
)
from hive.procs.control import ControlServer
from hive.procs.endpoints import Endpoints, make_run_dir, remove_run_dir
from hive.procs.lifecycle import ExitCode, Lock
from hive.storage.datadir import DataDir

log = logging.getLogger(__name__)

POLL = 1.0
# How long a machine's status may take before it shows down (asked again then), and the
# head's sweep before the driver says it did not answer: the driver's loop goes on meanwhile.
STATUS_TIMEOUT = 2 * POLL + 5
SWEEP_TIMEOUT = 5.0
# How long the cluster's address may take to answer a connection before hive start says so.
CONNECT_TIMEOUT = 5.0
# How long the driver waits for the machines' answers to a hive add or deny: within the
# CLI's own wait for the driver (5 s).
ASK_TIMEOUT = 3.0
STOP_GRACE = 90.0
# Ray's own defaults that a crawl driver does not want: its dashboard (a web server),
# usage statistics sent home.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
SUMMED = ("outbox", "bad_messages")


def reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse (OSError) a ``host:port`` or ``ray://host:port`` address nothing answers on:
    Ray itself would retry it for minutes. ``auto`` is Ray's to find."""
    if address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected auto, ray://HOST:PORT or HOST:PORT, got {address!r}")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
        pass


def machines_of(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """The names of the live machines among Ray's nodes (by their hive-node-* resource)."""
    names = set()
    for node in nodes:
        if node.get("Alive"):
            for resource in node.get("Resources", {}):
                name = machine_name(resource)
                if name is not None:
                    names.add(name)
    return sorted(names)


def merge_status(statuses: Sequence[dict[str, Any]], *, data_dir: str, started: float,
                 stopping: bool) -> dict[str, Any]:
    """One status document over every machine's: their processes (roles named by machine),
    their totals summed, and a ``machines`` table."""
    processes: list[dict[str, Any]] = []
    totals: dict[str, float] = {}
    machines = []
    merged: dict[str, Any] = {"outbox": 0, "bad_messages": 0}
    top: list[dict[str, Any]] = []
    hosts: dict[str, Any] = {}
    for status in statuses:
        name = status["machine"]
        machines.append({key: status.get(key) for key in (
            "machine", "epoch", "rejoins", "alive", "quiet", "lease_until", "exit_code",
            "error", "lost", "dropped", "data_dir")})
        for row in status.get("processes", []):
            processes.append({**row, "role": f"{name}: {row['role']}"})
        for key, value in status.get("totals", {}).items():
            if isinstance(value, int | float):
                totals[key] = totals.get(key, 0) + value
        for key in SUMMED:
            merged[key] += status.get(key) or 0
        if isinstance(status.get("hosts"), dict):
            hosts = {**status["hosts"], **hosts}
            top += status["hosts"].get("top", [])
    if hosts:
        hosts["top"] = sorted(top, key=lambda h: -(h.get("pending") or 0))
    return {"data_dir": data_dir, "procs": sum(1 for p in processes if "stats" in p),
            "started": started, "stopping": stopping, "processes": processes,
            "totals": totals, "waiting": None, "cpu_window": statuses[0].get("cpu_window", 10)
            if statuses else 10, "fetch_total_timeout": statuses[0].get("fetch_total_timeout")
            if statuses else None, **merged, "resize": None, "hosts": hosts or {"top": []},
            "metrics": None, "cluster": True, "machines": machines}


class ClusterDriver:
    """The ``hive start --cluster`` process: a Runner role over the cluster's machines."""

    def __init__(self, cfg: Config, data_dir: Path, address: str, procs: int,
                 seeds: Sequence[UrlRecord] = (), max_pages: int = 0,
                 machines: Sequence[str] = ()) -> None:
        self.cfg = cfg
        self.machines = list(machines)
        self.left: list[str] = []
        self.resized: ClusterResize | None = None
        self.data_dir = data_dir.resolve()
        self.dd = DataDir(self.data_dir)
        self.address = address
        self.procs = procs
        self.seeds = list(seeds)
        self.max_pages = max_pages
        self.stopping = False
        self.ended = ""
        self.exit_code = ExitCode.ENDED
        self.started = time.time()
        self.nodes: dict[str, Any] = {}
        self.head: Any = None
        self.plan: ClusterPlan | None = None
        self.last: dict[str, dict[str, Any]] = {}
        self.dropped: set[str] = set()
        self.book: dict[str, Any] = {}
        # The questions open: each machine's status and the head's sweep, with when asked.
        self._asked: dict[str, tuple[Any, float]] = {}
        self._sweep: tuple[Any, float] | None = None
        self._unanswered: set[str] = set()
        self._next_poll = 0.0
        self._quiet_rounds = 0
        self._fingerprint: tuple[float, ...] | None = None
        self._stop_sent = False
        self._stop_deadline = 0.0
        self._finished = False
        self._totals: dict[str, float] = {}
        self.run_dir: Path | None = None

    # -- open --------------------------------------------------------------------------

    def open(self) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.lock = Lock(self.dd.lock, f"the hive at {self.data_dir}")
        os.environ.update(RAY_ENV)
        try:
            reachable(self.address)
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING, configure_logging=False,
                     namespace=f"hive-{self.dd.socket_dir().name}")
        except (OSError, ValueError, RuntimeError) as exc:
            self.lock.release()
            raise HiveError(f"--cluster {self.address}: cannot reach the Ray cluster: "
                            f"{exc}") from exc
        joined = machines_of(ray.nodes())  # type: ignore[no-untyped-call]
        before = self._dropped_before()
        if before is not None:
            self.dropped.update(m.name for m in before)
            for name in sorted(self.dropped.intersection(joined)):
                log.warning("machine %s was dropped for good: it does not start", name)
            joined = [name for name in joined if name not in self.dropped]
        if not joined:
            raise HiveError(f"--cluster {self.address}: no machine has joined with a resource "
                            f"{RESOURCE_PREFIX}<name> (ray start --resources "
                            f"'{{\"{RESOURCE_PREFIX}a\": 1}}')")
        cluster = self.cfg.cluster
        # The head lives beside the driver, on the machine that ran hive start: losing any
        # other machine must not lose the plan and the lease book with it.
        beside = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                soft=False)
        self.head = ray.remote(Head).options(num_cpus=0, name="hive-head",
                                             scheduling_strategy=beside).remote(cluster.lease)
        cfg_data = self.cfg.to_dict()
        names, involved = self._machines(joined)
        for name in involved:
            self.nodes[name] = ray.remote(Node).options(
                num_cpus=0, resources={RESOURCE_PREFIX + name: 1}, max_restarts=-1,
                name=f"hive-node-{name}",
            ).remote(self.head, name, str(self.data_dir), cfg_data)
        described = ray.get([self.nodes[name].describe.remote() for name in names])
        # A machine dropped for good keeps its place (and so the ring) without running.
        described += [{"name": m.name, "host": m.host, "server_key": m.server_key,
                       "client_cert": m.client_cert} for m in before or ()]
        hive = self.cfg.hive
        try:
            self.plan = ClusterPlan.draw(described, self.procs, hive.vnodes, hive.ring_seed,
                                         cluster, hive.ring_key)
        except ValueError as exc:
            raise HiveError(str(exc)) from exc
        if self.dropped and resize_pending(self.dd, self.plan):
            raise HiveError(
                f"machine {', '.join(sorted(self.dropped))} was dropped for good: a resize "
                f"(machines or --procs other than the last start's) cannot place its hosts; "
                f"start with the last start's machines and --procs")
        self.resized = resize_if_changed(self.dd, self.plan, RayMachines(self.nodes), involved)
        for name in set(involved) - set(names):  # drained: it left the cluster
            ray.kill(self.nodes.pop(name))
        ray.get(self.head.set_plan.remote(self.plan.to_dict()))
        for name in sorted(self.dropped):
            why = ray.get(self.head.drop.remote(name))
            if why:
                raise HiveError(f"machine {name}: {why}")
        ray.get([node.start.remote(self.plan.to_dict()) for node in self.nodes.values()])
        self._give_seeds()
        self.left = left_cluster(self.dd.read_state(),
                                 staying={m.name for m in self.plan.machines})
        self.run_dir = make_run_dir(self.dd.socket_dir())
        self.endpoints = Endpoints(self.run_dir)
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.requests = ClusterRequests(self.plan, self.dropped, self._ask,
                                        self.cfg.scope.max_url_length)
        self.control = ControlServer(self.ctx, self.endpoints.control, {
            "status": lambda request: self.status(), "stop": self._stop, "drop": self._drop,
            "add": self.requests.add, "add_answer": self.requests.add_answer,
            "deny": self.requests.deny, "deny_answer": self.requests.deny_answer,
        })
        self.poller = zmq.Poller()
        self.poller.register(self.control.socket, zmq.POLLIN)
        self.dd.write_state({
            "version": __version__, "pid": os.getpid(), "started": self.started,
            "data_dir": str(self.data_dir), "procs": self.plan.procs,
            "ring": self.plan.ring().params,
            "endpoints": self.endpoints.to_dict(), "pids": {},
            "config": cfg_data, "cluster": self._cluster_state(),
        })
        log.info("hive %s started on a cluster of %d machines (%s), %d workers", __version__,
                 len(names), ", ".join(names), self.plan.procs)

    def _machines(self, joined: list[str]) -> tuple[list[str], list[str]]:
        """The machines of this start's plan (``--machines``, else every one joined), and
        every one it must reach: those, and any that may hold part of the crawl (the last
        start's plan, an unfinished resize), which must have joined."""
        for name in self.machines:
            if name not in joined:
                raise HiveError(f"--machines: machine {name} has not joined the cluster "
                                f"(joined: {', '.join(joined)})")
        names = sorted(self.machines) or joined
        involved = [name for name in taking_part(self.dd.read_state(), names)
                    if name not in self.dropped]  # its stores are out of reach for good
        absent = [name for name in involved if name not in joined]
        if absent:
            raise HiveError(
                f"machine {', '.join(absent)} holds part of this crawl (in the plan of its "
                f"last start, or of an unfinished resize) but has not joined the cluster: "
                f"join it under its name ({RESOURCE_PREFIX}<name>) and start again")
        return names, involved

    def _dropped_before(self) -> list[Machine] | None:
        """The machines this data directory's last run dropped for good (its ``hive.json``),
        as its plan placed them; None if it dropped none."""
        try:
            state = self.dd.read_state()
        except HiveError:
            return None
        cluster = state.get("cluster") if state else None
        if not isinstance(cluster, dict) or not cluster.get("dropped"):
            return None
        try:
            plan = ClusterPlan.from_dict(cluster["plan"])
            return [plan.machine(name) for name in cluster["dropped"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise HiveError(f"{self.dd.state_file}: its cluster's dropped machines do not "
                            f"read: {exc}") from exc

    def _give_seeds(self) -> None:
        """Each machine gets the seeds its workers own, through its supervisor's ``add``;
        those of a dropped machine's hosts are counted and left out."""
        import ray
        assert self.plan is not None
        ring = self.plan.ring()
        cut: dict[str, list[str]] = {}
        refused = 0
        for record in self.seeds:
            owner = self.plan.machine_of(ring.owner(record.host_key))
            if owner.name in self.dropped:
                refused += 1
                continue
            cut.setdefault(owner.name, []).append(record.url)
        if refused:
            log.warning("seeds: %d of the hosts of dropped machines left out "
                        "(machine_dropped)", refused)
        ray.get([self.nodes[name].add.remote(urls) for name, urls in cut.items()])
        log.info("seeds: %d given to %d machines", len(self.seeds), len(cut))

    # -- control -----------------------------------------------------------------------

    def _stop(self, request: dict[str, Any]) -> object:
        now = bool(request.get("now"))
        self.request_stop("stopped by hive stop" + (" --now" if now else ""), now=now)
        return {"stopping": True}

    def _cluster_state(self) -> dict[str, Any]:
        """``hive.json``'s ``cluster``: the address, the plan, the machines dropped and
        those a resize drained (they keep their WARCs and logs: hive index, hive report)."""
        assert self.plan is not None
        return {"address": self.address, "plan": self.plan.to_dict(),
                "dropped": sorted(self.dropped), "left": self.left}

    def _ask(self, calls: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        """Control requests to machines' supervisors, all at once: the answers by machine,
        without those that did not answer within ASK_TIMEOUT (down, lost or dropped)."""
        import ray
        refs = {name: self.nodes[name].call.remote(cmd, args)
                for name, (cmd, args) in calls.items() if name not in self.dropped}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=ASK_TIMEOUT)
        answers = {}
        for name, ref in refs.items():
            if ref in ready:
                try:
                    answers[name] = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a machine's failure: no answer
                    log.warning("machine %s did not answer: %s", name, exc)
        return answers

    def _drop(self, request: dict[str, Any]) -> object:
        """``hive drop``: drop a lost machine for good (see the module docstring)."""
        import ray
        name = request.get("machine")
        if isinstance(name, str) and name in self.dropped:
            return {"machine": name, "dropped": False}
        assert self.plan is not None
        if not isinstance(name, str) or name not in self.nodes:
            raise ValueError(f"no machine {str(name)[:40]!r} in this cluster (its machines: "
                             f"{', '.join(m.name for m in self.plan.machines)})")
        why = ray.get(self.head.drop.remote(name), timeout=10)
        if why:
            raise ValueError(why)
        self.dropped.add(name)
        self.dd.update_state(cluster=self._cluster_state())
        try:
            ray.kill(self.nodes[name], no_restart=True)
        except Exception as exc:  # noqa: BLE001 - dropped all the same: the head refuses it
            log.warning("machine %s: its node actor was not killed: %s", name, exc)
        log.warning("machine %s dropped by the operator: the others refuse the URLs of its "
                    "hosts (refusals/machine_dropped)", name)
        return {"machine": name, "dropped": True}

    def signalled(self, why: str, now: bool) -> None:
        self.request_stop(why, now=now)

    def request_stop(self, why: str, now: bool = False,
                     code: ExitCode = ExitCode.STOPPED) -> None:
        if not self.stopping:
            (log.error if code == ExitCode.ERROR else log.info)("stopping: %s", why)
            self.ended, self.exit_code = why, code
        self.stopping = True
        if now or not self._stop_sent:
            self._stop_sent = True
            self._stop_deadline = time.monotonic() + STOP_GRACE
            for name in self.live():
                self.nodes[name].stop.remote(now)

    def status(self) -> dict[str, Any]:
        statuses = [self.last.get(name, {"machine": name, "alive": False})
                    for name in sorted(set(self.nodes) | self.dropped)]
        for status in statuses:
            standing = self.book.get(status["machine"], {})
            status["lost"] = standing.get("lost", False)
            status["dropped"] = status["machine"] in self.dropped
        merged = merge_status(statuses, data_dir=str(self.data_dir), started=self.started,
                              stopping=self.stopping)
        if self.resized is not None:
            merged["resize"] = self.resized.to_dict()
        return merged

    def totals(self) -> dict[str, float]:
        """The machines' totals summed, as of the last poll that heard from every one."""
        return self._totals

    # -- the loop ----------------------------------------------------------------------

    def _poll(self) -> None:
        """Take in what answered since the last round, waiting at most a round (POLL) for
        the rest: every machine's status and the head's sweep of lapsed leases; then ask
        again whoever answered. A machine keeps one question open: one that has not
        answered within STATUS_TIMEOUT (cut off, frozen) shows down with its last status,
        and is asked again. The loop never waits longer than a round, so while a machine
        is out of reach ``hive status`` is answered and the head sweeps every round: the
        machine shows lost as soon as its lease lapses."""
        import ray
        asked = [ref for ref, _ in self._asked.values()]
        if self._sweep is not None:
            asked.append(self._sweep[0])
        if asked:
            ray.wait(asked, num_returns=len(asked), timeout=POLL)
        now = time.monotonic()
        for name, (ref, since) in list(self._asked.items()):
            if ray.wait([ref], timeout=0)[0]:
                del self._asked[name]
                try:
                    self.last[name] = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - an actor out of reach is down
                    self.last[name] = self._down(name, type(exc).__name__)
            elif now - since > STATUS_TIMEOUT:
                del self._asked[name]
                self.last[name] = self._down(name, "GetTimeoutError")
        if self._sweep is not None:
            ref, since = self._sweep
            if ray.wait([ref], timeout=0)[0]:
                self._sweep = None
                try:
                    self.book = ray.get(ref)
                except Exception:  # noqa: BLE001 - the head out of reach: nothing new to say
                    log.warning("the head did not answer its sweep")
            elif now - since > SWEEP_TIMEOUT:
                self._sweep = None
                log.warning("the head did not answer its sweep")
        self._unanswered = set(self._asked)
        for name in self.live():
            if name not in self._asked:
                self._asked[name] = (self.nodes[name].status.remote(), now)
        if self._sweep is None:
            self._sweep = (self.head.sweep.remote(), now)

    def _down(self, name: str, error: str) -> dict[str, Any]:
        """Machine ``name``'s last status, marked down with ``error``."""
        return {**self.last.get(name, {}), "machine": name, "alive": False, "error": error}

    def loop_once(self, now: float) -> float:
        self.control.handle_ready()
        if now < self._next_poll:
            return min(0.2, self._next_poll - now)
        self._next_poll = now + POLL
        self._poll()
        if self.stopping:
            self._finished = all(
                self.last.get(name, {}).get("exit_code") is not None for name in self.live()
            ) or time.monotonic() > self._stop_deadline
            return 0.2
        for name in self.live():
            status = self.last.get(name, {})
            code = status.get("exit_code")
            if code is not None and not status.get("alive"):
                self.request_stop(f"machine {name} stopped (exit code {code}): see "
                                  f"{status.get('data_dir') or 'its data directory'}/logs",
                                  code=ExitCode.ERROR)
                return 0.2
        totals = self.status()["totals"]
        if all(self.last.get(name, {}).get("totals") for name in self.live()):
            self._totals = totals
        if self.max_pages and totals.get("pages_this_start", 0) >= self.max_pages:
            self.request_stop(f"--max-pages {self.max_pages} reached", code=ExitCode.MAX_PAGES)
        elif self._batch_ended(totals):
            self.request_stop("the batch ended: nothing pending or in flight anywhere",
                              code=ExitCode.ENDED)
        return 0.2

    def _batch_ended(self, totals: dict[str, float]) -> bool:
        """Every machine not dropped up, quiet and unlost, each answered this round, and no
        count moved, two rounds in a row."""
        statuses = [self.last.get(name, {}) for name in self.live()]
        quiet = not self._unanswered & set(self.live()) and all(
            s.get("alive") and s.get("quiet") and not self.book.get(
                s.get("machine", ""), {}).get("lost") for s in statuses)
        fingerprint = tuple(totals.get(k, 0) for k in (
            "frontier/admitted", "fetched", "frontier/pending")) + (
            sum(s.get("outbox") or 0 for s in statuses),)
        if not quiet or fingerprint != self._fingerprint:
            self._quiet_rounds = 0
        else:
            self._quiet_rounds += 1
        self._fingerprint = fingerprint
        return self._quiet_rounds >= 2

    def live(self) -> list[str]:
        """The machines not dropped, by name."""
        return sorted(set(self.nodes) - self.dropped)

    def wait(self, seconds: float) -> None:
        self.poller.poll(max(int(seconds * 1000), 0))

    @property
    def finished(self) -> bool:
        return self._finished

    def close(self) -> None:
        import ray
        for name in self.live():
            try:
                ray.get(self.nodes[name].shutdown.remote(), timeout=STOP_GRACE)
            except Exception:  # noqa: BLE001 - a node already gone has nothing to stop
                log.warning("a machine did not shut down in time")
        ray.shutdown()
        self.control.close()
        self.ctx.term()
        self.dd.update_state(pid=None, ended=self.ended, stopped=time.time())
        if self.run_dir is not None:
            remove_run_dir(self.run_dir)
        self.lock.release()
        log.info("cluster hive stopped: %s", self.ended or "stopped")


class RayMachines:
    """A cluster resize's machines (hive/procs/cluster_resize.py), reached through their
    node actors' ``resize`` (hive/procs/cluster_node.py)."""

    def __init__(self, nodes: Mapping[str, Any]) -> None:
        self.nodes = nodes

    def call(self, calls: Sequence[Call]) -> list[Any]:
        return list(self._get([self.nodes[name].resize.remote(step, *args)
                               for name, step, args in calls]))

    def pipe(self, source: Call, dest: Call) -> Any:
        name, step, args = source
        ref = self.nodes[name].resize.remote(step, *args)
        name, step, args = dest
        # The ref as an argument: Ray hands its value to the destination's actor directly,
        # from the source's machine, not through this process.
        return self._get(self.nodes[name].resize.remote(step, *args, ref))

    @staticmethod
    def _get(refs: Any) -> Any:
        """The steps' results; a step's error as itself (a HiveError names it), without
        Ray's traceback."""
        import ray
        from ray.exceptions import RayTaskError
        try:
            return ray.get(refs)
        except RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, HiveError | OSError):
                raise HiveError(f"cluster resize: {cause}") from None
            raise
