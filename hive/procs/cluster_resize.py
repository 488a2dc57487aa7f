"""A cluster resize: hosts moved whole between machines' stores for a new plan, offline.

``hive start --cluster`` whose plan (hive/procs/cluster_plan.py: the machines,
``--procs`` workers each, one ring over all) differs from the one the driver's
``hive.json`` records — another ring, or a worker on another machine: machines
added or removed (``--machines``), another ``--procs`` — resizes before any
machine starts (:func:`resize_if_changed`), as ``hive start`` with another
``--procs`` does on one machine (hive/procs/resize.py). The driver holds the
data directory's lock and each machine's mover holds every store's lock, so no
crawl runs meanwhile; a second ``hive start`` is refused by the lock.

Each machine's stores stay on its own disk; what leaves a machine travels
**through Ray**, as a worker store of its own (a *transfer store*), never
through a shared disk:

1. **Settle** (on every machine, in parallel): hive/procs/resize.py's mover, with
   this machine's :class:`~hive.procs.resize.Layout`, moves every host of its
   stores to where the new plan places it: its owner's store if the owner
   runs here, else the transfer store ``transfer/to-<machine>`` of the machine
   that runs it. A store the plan has no place for on this machine (a worker
   now elsewhere, a store received, a transfer for a machine no longer in the
   plan) is drained: its orphan URL states and payload-index entries go the
   same way, and each record of its unacknowledged outbox batches to the
   supervisor's outbox of the machine that owns it (here, or through that
   machine's transfer store: a supervisor's batch is acknowledged to the
   supervisor of the machine that admits it); a supervisor's outbox holding a
   record another machine now owns is split so too, set aside first as a store
   ``transfer/supervisor`` drained like one received. It is retired
   (a worker store renamed ``worker-NN.retired-<time>``, a transfer store
   removed). Same steps, same copy-before-delete transactions, same
   crash-safety as on one machine: each host is whole in one store or two,
   and the next settle finishes it by the new plan alone.
2. **Ship** each transfer store that holds anything to its machine. The
   source first seals it: renames ``to-<machine>`` to ``to-<machine>.<token>``,
   a token of its own, so no host joins a transfer once the destination may
   have it (a later settle starts a new ``to-<machine>``). The driver then asks
   the source for a compacted copy of its LMDB file (made once, kept in it) in
   chunks of :data:`CHUNK` bytes (an object ref
   each) and hands each ref to the destination's node actor, so the bytes go
   from machine to machine through Ray's object store, not through the driver.
   The destination writes ``from-<source>-<token>.part``, fsyncs it and renames
   it whole; only then does the source delete its sealed store. A transfer sent
   again after a crash is recognized by its token (the destination has it
   whole, or imported it, which leaves a ``from-<source>-<token>.done`` mark)
   and not written twice. A sealed store for a machine no longer in the plan is
   drained instead, like one received: the destination may hold a copy too, and
   both copies of a host meet at its new owner's store, where the second is
   skipped (a store holding a host keeps it).
3. **Settle again**: a received store is one the plan has no place for, so its
   hosts go to their owners' stores there. Rounds repeat until no machine holds
   a transfer store (two for one plan; at most :data:`ROUNDS`).
4. **Finish** on every machine: its ``hive.json`` records the new ring and its
   slice (or that it left the cluster), and each worker of its slice has a store.
   Then the driver records the new plan.

Before it starts, the driver writes to its ``hive.json`` every machine taking
part (the old plan's, the new plan's and those of an interrupted resize), and
clears it when the resize is done: a ``kill -9`` of the driver (or of a machine)
at any point, then ``hive start --cluster`` again, with this plan or another,
settles every machine that may hold a host; one of them not joined is refused by
name. A leaving machine keeps its WARCs, crawl logs and retired stores on its disk.

Cost: one resize pass over every machine's stores (hive/procs/resize.py), plus the
transfer stores' bytes once over the network. Which hosts move is the ring's: a
machine added last (by name) takes only what its new workers claim; removing one,
or changing ``--procs``, renumbers workers, so more move (the ring is over worker
numbers, each machine's a contiguous slice in name order).

The machine-side steps are :data:`STEPS`, run by each node actor's ``resize``
(hive/procs/cluster_node.py; the driver reaches them through hive.procs.cluster's
``RayMachines``) or in this process (:class:`LocalMachines`: tests, and any machines
whose data directories this process can reach).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hive.config import Config
from hive.core.ring import Ring
from hive.core.wire import decode_records
from hive.errors import HiveError
from hive.procs.cluster_plan import ClusterPlan
from hive.procs.resize import DRAINED, Layout, Mover, Resize
from hive.storage.datadir import DataDir, fsync_dir, write_durably
from hive.storage.modes import compact_copy, read_only
from hive.storage.store import Store

log = logging.getLogger(__name__)

CHUNK = 8 << 20  # bytes of a transfer store per object ref: bounds each node's memory
ROUNDS = 4
# Slots of a machine's layout that are not its workers' stores: the transfer store to the
# plan's k-th machine is OUTGOING - k; a store to drain that has no worker id (one received,
# or one for a machine that left the plan) is SOURCES - n.
OUTGOING = -1
SOURCES = -1_000_000
DONE = ".done"
SHIPPED = "shipped.mdb"

Call = tuple[str, str, tuple[Any, ...]]


# -- the machine-side steps ------------------------------------------------------------


def settle(data_dir: Path, cfg: Config, name: str, plan_data: Mapping[str, Any],
           now: float | None = None) -> dict[str, Any]:
    """Move every host on machine ``name`` to where the plan places it (step 1); what moved
    (hosts kept on the machine, sent, received) and the machines it holds hosts for."""
    plan = ClusterPlan.from_dict(plan_data)
    dd = DataDir(data_dir)
    ring = plan.ring()
    order = [m.name for m in plan.machines]
    mine = plan.machine(name).workers if name in order else range(0)
    slot_of_worker = [w if w in mine else OUTGOING - order.index(plan.machine_of(w).name)
                      for w in range(ring.procs)]
    paths: dict[int, Path] = {OUTGOING - k: dd.outgoing(other) for k, other in enumerate(order)}
    now = time.time() if now is None else now
    _set_aside_supervisor_outbox(dd, cfg, ring, now, slot_of_worker)
    sources: list[tuple[int, bool]] = []
    for worker, path in dd.workers():
        if DataDir.store_data(path).exists():
            paths[worker] = path
            sources.append((worker, worker not in mine))
    outgoing = set(paths.values())
    sealed = [dd.sealed(other, "") for other in order]
    for n, path in enumerate(dd.transfer_stores()):
        if path in outgoing or any(path.name.startswith(s.name) for s in sealed):
            continue  # sealed for a machine of the plan: sent (again) as it is
        paths[SOURCES - n] = path
        sources.append((SOURCES - n, True))

    def retire(slot: int, path: Path) -> str:
        if slot >= 0:
            target = dd.retired(slot)
            path.rename(target)
            return target.name
        _remove_store(path, mark=path.name.startswith("from-"))
        return f"{path.name} (imported)"

    # A record of an outbox batch goes to the supervisor's outbox of its owner's machine:
    # a supervisor's batch is acknowledged to the supervisor of the machine that admits it.
    outbox_of_worker = [dd.supervisor if slot >= 0 else paths[slot] for slot in slot_of_worker]
    layout = Layout(lambda slot: paths.get(slot) or dd.worker(slot),
                    slot_of_worker.__getitem__, outbox_of_worker.__getitem__,
                    (dd.supervisor, *(paths[OUTGOING - k] for k in range(len(order)))), retire)
    result = Resize(None, ring.procs)
    mover = Mover(layout, cfg, ring, now, lambda step: None, result)
    try:
        for slot, drain in sources:
            mover.move_out(slot, drain)
    finally:
        mover.close()
    report = _report(result, order)
    for k, other in enumerate(order):
        path = paths[OUTGOING - k]
        if path.is_dir() and _holds_nothing(path):
            _remove_store(path, mark=False)
        if path.is_dir() or _sealed(dd, other):
            report["outgoing"].append(other)
    log.info("cluster resize: machine %s: %d hosts moved within it, %s sent, %d received",
             name, report["kept"], report["sent"] or "none", report["received"])
    return report


def _set_aside_supervisor_outbox(dd: DataDir, cfg: Config, ring: Ring, now: float,
                                 slot_of_worker: list[int]) -> None:
    """A supervisor's batch is acknowledged to the supervisor of the machine whose worker
    admits it (hive/procs/cluster_machine.py), so one holding a record that another machine
    now owns could never be acknowledged here. Such an outbox goes whole, batch by batch
    (resize.py's markers), to a store of its own, ``transfer/supervisor``, which the settle
    then drains like a store received: each record to its owner's machine's supervisor."""
    if not DataDir.store_data(dd.supervisor).exists():
        return
    with read_only(dd.supervisor) as txn:
        elsewhere = False
        for _, data in txn.items("outbox"):
            try:
                records = decode_records(data)
            except ValueError:
                elsewhere = True  # the mover names it
            else:
                elsewhere = any(slot_of_worker[ring.owner(r.host_key)] < 0 for r in records)
            if elsewhere:
                break
    if not elsewhere:
        return
    aside = dd.transfers / "supervisor"
    layout = Layout(dd.worker, lambda owner: owner, lambda owner: aside, (aside,),
                    lambda slot, path: path.name)
    mover = Mover(layout, cfg, ring, now, lambda step: None, Resize(None, ring.procs))
    try:
        mover.drain_outbox(dd.supervisor)
    finally:
        mover.close()


def _report(result: Resize, order: list[str]) -> dict[str, Any]:
    sent: dict[str, int] = {}
    kept = received = 0
    for (source, dest), flow in result.flows.items():
        if dest < 0:
            sent[order[OUTGOING - dest]] = sent.get(order[OUTGOING - dest], 0) + flow.hosts
        elif source <= SOURCES:
            received += flow.hosts
        else:
            kept += flow.hosts
    return {"kept": kept, "sent": sent, "received": received,
            "outbox_batches": result.outbox_batches,
            "retired": [name for name in result.retired if name.startswith("worker-")],
            "outgoing": []}


def _holds_nothing(path: Path) -> bool:
    if not DataDir.store_data(path).exists():
        return True
    with read_only(path) as txn:
        return not any(txn.entries(db) for db in (*DRAINED, "payloads", "retries"))


def _remove_store(path: Path, mark: bool) -> None:
    """Remove a drained transfer store: its data file first (a directory left without one
    holds nothing), after its ``.done`` mark if ``mark`` (a received one)."""
    if mark:
        write_durably(path.with_name(path.name + DONE), b"", 0o600)
    DataDir.store_data(path).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)


def _sealed(dd: DataDir, target: str) -> list[str]:
    """The tokens of the stores for ``target`` whose transfer began."""
    prefix = dd.sealed(target, "").name
    return sorted(p.name.removeprefix(prefix) for p in dd.transfer_stores()
                  if p.name.startswith(prefix))


def seal(data_dir: Path, cfg: Config, name: str, target: str) -> str | None:
    """The token of the next transfer to ``target``: one begun already, else the store for
    it sealed under a new token (renamed: no host joins a transfer once it began, since the
    destination may have it already); None if there is nothing to send."""
    dd = DataDir(data_dir)
    begun = _sealed(dd, target)
    if begun:
        return begun[0]
    path = dd.outgoing(target)
    if not path.is_dir():
        return None
    made = secrets.token_hex(8)
    path.rename(dd.sealed(target, made))
    fsync_dir(dd.transfers)
    return made


def _shipped_file(sealed: Path) -> Path:
    """What a sealed store sends: a compacted copy of it, made once (LMDB's copy writes
    only the pages in use, in order: fewer bytes, and a file whose size matches its last
    page, which a store a transaction freed pages at the end of may not)."""
    shipped = sealed / SHIPPED
    if not shipped.exists():
        scratch = sealed / "compacting"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        copied = compact_copy(sealed, scratch)
        copied.rename(shipped)
        fsync_dir(sealed)
        shutil.rmtree(scratch)
    return shipped


def read(data_dir: Path, cfg: Config, name: str, target: str, token: str, offset: int,
         size: int) -> bytes:
    """``size`` bytes (fewer at its end) of transfer ``token`` to ``target``, from ``offset``."""
    with _shipped_file(DataDir(data_dir).sealed(target, token)).open("rb") as f:
        f.seek(offset)
        return f.read(size)


def _received(dd: DataDir, source: str, token: str) -> bool:
    final = dd.incoming(source, token)
    return final.is_dir() or final.with_name(final.name + DONE).exists()


def write(data_dir: Path, cfg: Config, name: str, source: str, token: str, offset: int,
          data: bytes) -> int:
    """Write a chunk of ``source``'s transfer ``token`` at ``offset``; its length, or -1 if
    this machine has the transfer already (whole, or imported)."""
    dd = DataDir(data_dir)
    if _received(dd, source, token):
        return -1
    part = dd.incoming(source, token).with_name(f"from-{source}-{token}.part")
    part.mkdir(parents=True, exist_ok=True)
    fd = os.open(DataDir.store_data(part), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if offset == 0:
            os.ftruncate(fd, 0)  # what a transfer cut short left
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)
    return len(data)


def commit(data_dir: Path, cfg: Config, name: str, source: str, token: str, size: int) -> None:
    """Make ``source``'s transfer ``token`` whole here: fsynced, then renamed."""
    dd = DataDir(data_dir)
    if _received(dd, source, token):
        return
    final = dd.incoming(source, token)
    part = final.with_name(final.name + ".part")
    data = DataDir.store_data(part)
    if not data.exists() or data.stat().st_size != size:
        raise HiveError(f"{part}: the transfer from {source} is cut short: "
                        f"{data.stat().st_size if data.exists() else 0} of {size} bytes")
    fd = os.open(data, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    part.rename(final)
    fsync_dir(final.parent)


def shipped(data_dir: Path, cfg: Config, name: str, target: str, token: str) -> None:
    """The machine ``target`` has transfer ``token`` whole: delete it here."""
    path = DataDir(data_dir).sealed(target, token)
    if path.is_dir():
        _remove_store(path, mark=False)


def finish(data_dir: Path, cfg: Config, name: str, plan_data: Mapping[str, Any]) -> None:
    """Record the new ring and this machine's slice in its ``hive.json`` (step 4), each of
    its workers with a store; a machine that left the plan records that it did."""
    plan = ClusterPlan.from_dict(plan_data)
    dd = DataDir(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    left = dd.transfer_stores()
    if left:
        raise HiveError(f"machine {name} still holds transfer stores {[p.name for p in left]}"
                        ": the cluster resize is not settled")
    shutil.rmtree(dd.transfers, ignore_errors=True)
    ring = plan.ring().params
    if name not in {m.name for m in plan.machines}:
        dd.update_state(ring=ring, procs=plan.procs, workers=[0, 0], machine=name,
                        left_cluster=True)
        return
    machine = plan.machine(name)
    for worker in machine.workers:
        directory = dd.worker(worker)
        if not DataDir.store_data(directory).exists():
            Store(directory, sync_interval=0.0).close(time.time())
    dd.update_state(ring=ring, procs=plan.procs, workers=[machine.first, machine.count],
                    machine=name, left_cluster=False)


STEPS: dict[str, Callable[..., Any]] = {
    "settle": settle, "seal": seal, "read": read, "write": write, "commit": commit,
    "shipped": shipped, "finish": finish,
}


# -- the driver's side -----------------------------------------------------------------


class Machines(Protocol):
    """How the driver runs the steps on the machines."""

    def call(self, calls: Sequence[Call]) -> list[Any]:
        """Run each (machine, step, args), at once where it can; their results in order."""

    def pipe(self, source: Call, dest: Call) -> Any:
        """Run ``dest`` with the result of ``source`` as its last argument."""


class LocalMachines:
    """Machines whose data directories this process reaches: the steps run here."""

    def __init__(self, cfg: Config, dirs: Mapping[str, Path]) -> None:
        self.cfg = cfg
        self.dirs = dirs

    def call(self, calls: Sequence[Call]) -> list[Any]:
        return [STEPS[step](self.dirs[name], self.cfg, name, *args)
                for name, step, args in calls]

    def pipe(self, source: Call, dest: Call) -> Any:
        value = self.call([source])[0]
        name, step, args = dest
        return self.call([(name, step, (*args, value))])[0]


@dataclass
class ClusterResize:
    """What a cluster resize did: hosts between machines, within them, bytes shipped."""

    old: list[str]
    new: list[str]
    procs: tuple[int, int]
    between: dict[tuple[str, str], int] = field(default_factory=dict)
    within: int = 0
    shipped_bytes: int = 0
    transfers: int = 0
    retired: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        moved = sum(self.between.values())
        flows = ", ".join(f"{a}->{b} {n:,}" for (a, b), n in sorted(self.between.items()))
        return (f"cluster resized from {','.join(self.old)} ({self.procs[0]} workers) to "
                f"{','.join(self.new)} ({self.procs[1]} workers) in {self.seconds:.1f}s: "
                f"{moved:,} hosts moved between machines ({flows or 'none'}), "
                f"{self.within:,} within one, {self.transfers} transfers of "
                f"{self.shipped_bytes:,} bytes, {self.retired} stores retired")

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.old, "to": self.new, "workers": list(self.procs),
                "between": [{"from": a, "to": b, "hosts": n}
                            for (a, b), n in sorted(self.between.items())],
                "within": self.within, "shipped_bytes": self.shipped_bytes,
                "transfers": self.transfers, "retired": self.retired,
                "seconds": round(self.seconds, 3)}


def ship(machines: Machines, source: str, target: str) -> tuple[int, int]:
    """Send ``source``'s transfer stores for ``target`` there (step 2); how many, and the
    bytes written."""
    sent = total = 0
    while (made := machines.call([(source, "seal", (target,))])[0]) is not None:
        offset = 0
        while True:
            n = machines.pipe((source, "read", (target, made, offset, CHUNK)),
                              (target, "write", (source, made, offset)))
            if n < 0:
                break
            offset += n
            if n < CHUNK:
                machines.call([(target, "commit", (source, made, offset))])
                break
        machines.call([(source, "shipped", (target, made))])
        sent += 1
        total += max(offset, 0)
    return sent, total


def run(machines: Machines, old: ClusterPlan, plan: ClusterPlan, names: Sequence[str],
        now: float | None = None) -> ClusterResize:
    """Settle, ship, settle again on ``names`` until nothing is in transit; then finish."""
    started = time.monotonic()
    result = ClusterResize([m.name for m in old.machines], [m.name for m in plan.machines],
                           (old.procs, plan.procs))
    data = plan.to_dict()
    settle_args: tuple[Any, ...] = (data,) if now is None else (data, now)
    for _ in range(ROUNDS):
        reports = machines.call([(name, "settle", settle_args) for name in names])
        outgoing = []
        for name, report in zip(names, reports, strict=True):
            result.within += report["kept"]
            result.retired += len(report["retired"])
            for target, hosts in report["sent"].items():
                if hosts:
                    result.between[name, target] = result.between.get((name, target), 0) + hosts
            outgoing += [(name, target) for target in report["outgoing"]]
        if not outgoing:
            break
        for source, target in outgoing:
            sent, size = ship(machines, source, target)
            result.transfers += sent
            result.shipped_bytes += size
    else:
        raise HiveError(f"the cluster resize did not settle in {ROUNDS} rounds")
    machines.call([(name, "finish", (data,)) for name in names])
    result.seconds = time.monotonic() - started
    return result


def recorded_plan(state: Mapping[str, Any] | None) -> ClusterPlan | None:
    """The plan a driver's ``hive.json`` records; None if it records none."""
    cluster = state.get("cluster") if state else None
    if not isinstance(cluster, Mapping) or not isinstance(cluster.get("plan"), Mapping):
        return None
    try:
        return ClusterPlan.from_dict(cluster["plan"])
    except ValueError as exc:
        raise HiveError(f"hive.json is damaged: {exc}") from exc


def taking_part(state: Mapping[str, Any] | None, chosen: Sequence[str]) -> list[str]:
    """Every machine a start must reach: those chosen, the recorded plan's, and those of a
    resize left unfinished (they may hold hosts)."""
    old = recorded_plan(state)
    names = set(chosen) | ({m.name for m in old.machines} if old is not None else set())
    pending = state.get("cluster_resize") if state else None
    if isinstance(pending, Mapping) and isinstance(pending.get("machines"), list):
        names |= {str(n) for n in pending["machines"]}
    return sorted(names)


def left_cluster(state: Mapping[str, Any] | None, names: Sequence[str] = (),
                 staying: set[str] | None = None) -> list[str]:
    """The machines that left the crawl in a resize (they keep its WARCs and crawl logs):
    those the driver's ``hive.json`` records, and ``names`` not ``staying``."""
    cluster = state.get("cluster") if state else None
    recorded = cluster.get("left") if isinstance(cluster, Mapping) else None
    left = {str(n) for n in recorded} if isinstance(recorded, list) else set()
    left |= set(names) - (staying or set(names))
    return sorted(left - (staying or set()))


def needs_resize(old: ClusterPlan, plan: ClusterPlan) -> bool:
    """True if a worker's hosts are elsewhere in ``plan``: another ring, or another slice."""
    def slices(p: ClusterPlan) -> list[tuple[str, int, int]]:
        return [(m.name, m.first, m.count) for m in p.machines]
    return old.ring() != plan.ring() or slices(old) != slices(plan)


def resize_pending(dd: DataDir, plan: ClusterPlan) -> bool:
    """True if a start with ``plan`` must resize first: the driver's ``hive.json`` records
    another plan, or a resize left unfinished."""
    state = dd.read_state()
    old = recorded_plan(state)
    return old is not None and (needs_resize(old, plan) or bool(
        (state or {}).get("cluster_resize")))


def resize_if_changed(dd: DataDir, plan: ClusterPlan, machines: Machines,
                      names: Sequence[str], now: float | None = None) -> ClusterResize | None:
    """Resize the machines ``names`` to ``plan`` if the driver's ``hive.json`` records
    another plan, or a resize left unfinished; None if there is nothing to do."""
    if not resize_pending(dd, plan):
        return None
    state = dd.read_state()
    old = recorded_plan(state)
    assert old is not None
    log.info("cluster resize: from %s to %s, on %s", [m.name for m in old.machines],
             [m.name for m in plan.machines], ", ".join(names))
    dd.update_state(cluster_resize={"machines": list(names), "to": plan.to_dict()})
    result = run(machines, old, plan, names, now)
    state = dd.read_state() or {}
    state.pop("cluster_resize", None)
    staying = {m.name for m in plan.machines}
    state["cluster"] = {**state.get("cluster", {}), "plan": plan.to_dict(),
                        "left": left_cluster(state, names, staying)}
    state.update(ring=plan.ring().params, procs=plan.procs)
    dd.write_state(state)
    log.info("%s", result.summary())
    return result
