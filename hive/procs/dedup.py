"""Seeding a worker's payload index from a prior crawl's CDXJ index (``--dedup-from``,
``warc.dedup_from``), a batch of lines a turn of its frontier thread.

What a line becomes is the payload index's (hive.fetch.revisits, ``PayloadIndex.seed``);
this is the reading: SEED_BATCH lines a turn (``step``), committed with the place reached
(hive.procs.reading, ``meta`` ``dedup_from``), so that a prior crawl of millions of
payloads never holds the worker unreporting past ``hive.hung_after``, and a restart goes
on from the last commit rather than from the start. A batch read again after a kill puts
the same entries again (``put`` does not overwrite): each is in the index once. The
worker leases nothing until the index is read whole, as when it was read before the
worker's loop: a page fetched before its prior capture's line was read would be archived
whole. An unreadable file is logged and the crawl goes on without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from hive.fetch.revisits import PayloadIndex
from hive.frontier.frontier import Frontier
from hive.procs.reading import Reading
from hive.storage.schema import META_DEDUP_FROM

log = logging.getLogger(__name__)

# Lines read a turn of the frontier thread, their entries committed with the place reached:
# about 0.1 s of it (about 20 us a line), so the worker reports between batches and a
# prior index of millions of lines never holds it past hive.hung_after.
SEED_BATCH = 5000


class DedupSeeding:
    """One worker's reading of the CDXJ at ``path`` into ``payloads`` (the module
    docstring)."""

    def __init__(self, frontier: Frontier, payloads: PayloadIndex, path: Path) -> None:
        self.frontier = frontier
        self.payloads = payloads
        self.path = path
        self.reading = Reading(frontier.store, path, META_DEDUP_FROM)
        self.done = False
        self._told = False

    def step(self, owns: Callable[[str], bool], now: float, lines: int = SEED_BATCH) -> bool:
        """Seed the entries of the next ``lines`` lines and commit them with the place
        reached; True once the index is read whole."""
        if self.done:
            return True
        reading = self.reading
        try:
            f = reading.open()
            if f is not None:
                if not self._told:
                    log.info("seeding the payload index from %s, from line %d, %d lines a "
                             "turn", self.path, reading.lines + 1, lines)
                    self._told = True
                first = reading.lines
                reading.lines += self.payloads.seed(
                    f, lines, owns, lambda n: f"{self.path}:{first + n}")
        except OSError as exc:
            log.error("warc.dedup_from: cannot read %s: %s", self.path, exc)
            f = None
        if f is None:
            self.close()
            self.done = True
            return True
        whole = reading.keep()
        self.frontier.commit(now)
        if whole:
            counts = self.payloads.stats()
            log.info("payload index seeded from %s: %d lines read, %d entries put since "
                     "this start, %d lines malformed", self.path, reading.lines,
                     counts.get("revisits/seeded", 0), counts.get("revisits/seed/malformed", 0))
            self.close()
            self.done = True
        return self.done

    def close(self) -> None:
        self.reading.close()
