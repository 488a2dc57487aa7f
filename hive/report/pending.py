"""Pending URLs per host, read from the workers' stores: the one thing the crawl log lacks.

The stores are the worker stores :meth:`hive.storage.datadir.DataDir.workers`
lists, never one a resize retired (``worker-NN.retired-…``: what it held went to
the stores that own it now). They are opened read-only through the storage
layer, with LMDB's reader lock so a running crawl's writer does not reuse the
pages being read. Each host's state in ``hosts`` counts the URLs in its back
queue (``HostState.queued``); URLs still in the front queues have no host yet,
and URLs waiting for a retry are out of their host's queue: both are counted in
total only. A store that cannot be read is named in
``problems`` and the others are still read. The only code of the report that
knows the store's layout.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from hive.errors import StoreError
from hive.frontier.hosts import HostState
from hive.storage.datadir import DataDir
from hive.storage.modes import read_only


@dataclass
class Pending:
    top: list[tuple[str, int]] = field(default_factory=list)
    queued: int = 0
    front: int = 0
    retrying: int = 0
    stores: int = 0
    problems: list[str] = field(default_factory=list)
    # URLs pending (queued, in the front queues, waiting for a retry) by data directory.
    by_dir: dict[Path, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.queued + self.front + self.retrying


def pending_by_host(data_dirs: Sequence[Path], n: int) -> Pending:
    """The ``n`` hosts with the most URLs queued across the stores of ``data_dirs`` (one, or
    a cluster's machines')."""
    pending = Pending()
    counts: list[tuple[str, int]] = []
    for data_dir in data_dirs:
        before = pending.total
        for _, store in DataDir(data_dir).workers():
            if not DataDir.store_data(store).is_file():
                continue
            try:
                counts = heapq.nlargest(n, chain(counts, _queued(store, pending)),
                                        key=lambda r: r[1])
            except (StoreError, ValueError, struct.error) as exc:
                pending.problems.append(f"{store.name}: {exc}")
                continue
            pending.stores += 1
        pending.by_dir[data_dir] = pending.total - before
    pending.top = [(host, queued) for host, queued in counts if queued]
    return pending


def _queued(store: Path, pending: Pending) -> Iterator[tuple[str, int]]:
    with read_only(store, live=True) as txn:
        pending.front += txn.entries("front")
        pending.retrying += txn.entries("retries")
        for _, value in txn.items("hosts"):
            state = HostState.decode(value)
            pending.queued += state.pending
            yield state.host_key, state.pending
