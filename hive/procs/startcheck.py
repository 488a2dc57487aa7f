"""What a start checks before any child runs: no dying hive still writes a store, every
store is whole, and every store that ``hive.json`` names is there.

A worker store that went missing would be created empty and its hosts' pages fetched
again: that takes ``recreate_missing``. A fresh data directory gets its stores made
here, before ``hive.json`` names them, so a crash during start-up never leaves a named
store missing.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hive.errors import StoreError
from hive.procs.lifecycle import Lock, LockedError
from hive.procs.stats import pages
from hive.storage.datadir import DataDir
from hive.storage.modes import read_only
from hive.storage.schema import MetaState
from hive.storage.store import Store, check_file

log = logging.getLogger(__name__)

# How long a start waits for a worker of a killed hive to let its store go: it dies with its
# supervisor (die_with_parent) but may still be finishing a commit when the next start looks.
STORE_RELEASE_WAIT = 10.0


def pages_done(store: Path) -> int:
    """Pages a stopped worker's store has recorded as fetched (hive.procs.stats.pages)."""
    if not DataDir.store_data(store).exists():
        return 0
    try:
        with read_only(store) as txn:
            return pages(MetaState.load(txn).counts)
    except StoreError:
        return 0


@contextlib.contextmanager
def store_released(directory: Path, what: str, wait: float = STORE_RELEASE_WAIT) -> Iterator[None]:
    """Hold a store's lock, waiting up to ``wait`` seconds for a dying holder to let it go:
    a store is judged only when no process writes it (a commit seen half-way looks like a
    truncated file). StoreError if it is still held then."""
    if not directory.is_dir():
        yield
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            lock = Lock(DataDir.store_lock(directory), what)
            break
        except LockedError as exc:
            if time.monotonic() > deadline:
                raise StoreError(f"{exc}; is another hive running on this data?") from exc
            time.sleep(0.05)
        except OSError:
            # A lock that cannot be taken at all is the worker's to report when it starts
            # (as "could not start"); nobody can be writing through it.
            yield
            return
    try:
        yield
    finally:
        lock.release()


def check_stores(dd: DataDir, procs: int, previous: dict[str, Any] | None, *,
                 recreate_missing: bool) -> None:
    """Refuse to start on a damaged worker store, or without one that hive.json names
    (StoreError); make the stores of a fresh data directory."""
    ring = previous.get("ring") if previous is not None else None
    named = ring.get("procs") if isinstance(ring, dict) else None
    if previous is not None and not isinstance(named, int):
        raise StoreError(f"{dd.state_file} is damaged: it names no ring")
    for i in range(max(procs, named or 0)):
        directory = dd.worker(i)
        with store_released(directory, f"the store of worker {i}"):
            check_file(directory)
        if DataDir.store_data(directory).exists():
            continue
        if named is not None and i < named and not recreate_missing:
            raise StoreError(
                f"the store of worker {i} is missing ({DataDir.store_data(directory)}) though "
                f"{dd.state_file} names it; start with --recreate-missing to "
                "start it empty (the pages its hosts had fetched will be fetched again)"
            )
        if i < procs:
            Store(directory, sync_interval=0.0).close(time.time())
            if named is not None and i < named:
                log.warning("made an empty store for worker %d at %s", i, directory)
