"""A recrawl's plan at one worker: its URLs queued again, what it says of each kept for
their fetch.

``hive start --recrawl-from`` writes the plan (hive.export.recrawl): one ``Prior``
(hive.core.prior) per URL the prior crawls fetched. Each worker reads it when it opens
(``seed``) and takes the lines whose URL's host it owns, as ``--dedup-from`` seeding
does: it keeps each line in its store (``prior``, keyed as the seen set is) and admits
the URL at its depth and hop path, at the level ``recrawl.order`` gives it
(``change_rate``: its probability of change, hive.frontier.priority.change_level;
``plain``: the prioritizer's, as when it was first found). A fetch thread reads the
entry back (``load``, a read transaction of its own, as the payload index's look-up) to
send the URL's validators and tell what changed.

The plan is read a batch of lines a turn of the worker's frontier thread (``step``), not
all at once (hive.procs.reading: the place reached committed in ``meta`` ``recrawl_from``
with the batch), and its fetches start meanwhile (a URL admitted later still goes ahead of
those of lower levels not fetched yet). Reading a batch again after a kill is harmless:
admission is idempotent, an entry is put again whole. The worker is not idle while a plan
is being read, so the batch does not end before it is.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO

from hive.config import Config
from hive.core.prior import Prior, read_plan
from hive.core.record import UrlRecord
from hive.core.urls import fingerprint, host_hash, host_key
from hive.errors import URLError
from hive.frontier.frontier import Frontier
from hive.frontier.priority import change_level
from hive.procs.reading import Reading
from hive.storage.schema import META_RECRAWL_FROM, url_key
from hive.storage.store import Store

log = logging.getLogger(__name__)

# Lines read a turn of the frontier thread (their URLs admitted and committed with the place
# reached): about 0.1 s of it, so the worker reports, leases and applies outcomes meanwhile,
# and a plan of millions of lines never holds it past hive.hung_after. The first NAMED
# malformed lines are logged with their numbers (the rest counted).
PLAN_BATCH = 2000
NAMED = 10


def prior_key(url: str) -> bytes:
    """A URL's key in ``prior``: its host's hash and its own, as in the seen set."""
    return url_key(host_hash(host_key(url)), fingerprint(url))


class Plan:
    """One worker's side of a recrawl's plan at ``path`` (see the module docstring)."""

    def __init__(self, store: Store, cfg: Config, path: Path) -> None:
        self.store = store
        self.path = path
        self.levels = cfg.frontier.levels
        self.by_rate = cfg.recrawl.order == "change_rate"
        self.counts: Counter[str] = Counter()
        self.done = False
        self.reading = Reading(store, path, META_RECRAWL_FROM)

    def load(self, url: str) -> Prior | None:
        """For any thread: what the plan says of url (committed), if anything."""
        try:
            value = self.store.read_committed("prior", prior_key(url))
        except URLError:
            return None
        if value is None:
            return None
        try:
            return Prior.decode(value)
        except ValueError:
            return None

    def step(self, frontier: Frontier, owns: Callable[[str], bool], now: float,
             lines: int = PLAN_BATCH) -> bool:
        """Queue the URLs of the plan's next ``lines`` lines that ``owns`` accepts (the
        module docstring) and commit them with the place the reading got to; True once the
        plan is read whole. An unreadable file is logged, not fatal: the crawl goes on
        without it."""
        if self.done:
            return True
        try:
            f = self.reading.open()
            batch = self._read(f, owns, now, lines) if f is not None else []
        except OSError as exc:
            log.error("recrawl.plan: cannot read %s: %s", self.path, exc)
            f = None
        if f is None:
            self.close()
            self.done = True
            return True
        frontier.admit(batch, now)
        whole = self.reading.keep()
        frontier.commit(now)
        if whole:
            log.info("recrawl plan %s read: %d URLs of this worker queued", self.path,
                     self.counts["recrawl/plan/queued"])
            self.close()
            self.done = True
        return self.done

    def _read(self, f: IO[bytes], owns: Callable[[str], bool], now: float,
              lines: int) -> list[UrlRecord]:
        """The records of the next ``lines`` lines' URLs that ``owns`` accepts, each line's
        Prior put in ``prior``."""
        batch: list[UrlRecord] = []
        counts, first = self.counts, self.reading.lines
        for number, prior, why in read_plan(f):
            self.reading.lines = first + number
            if prior is None:
                counts[f"recrawl/plan/malformed/{why}"] += 1
                if counts["recrawl/plan/malformed"] < NAMED:
                    log.warning("%s:%d: line skipped, %s", self.path, self.reading.lines, why)
                counts["recrawl/plan/malformed"] += 1
            elif owns(prior.url):
                self.store.put("prior", prior_key(prior.url), prior.encode())
                hint = (change_level(prior.change_probability(now), self.levels)
                        if self.by_rate else 0)
                batch.append(UrlRecord(prior.url, host_key(prior.url), prior.depth,
                                       prior.via, 0, 0, hint, prior.kind, prior.path))
                counts["recrawl/plan/queued"] += 1
            if number >= lines:
                break
        return batch

    def close(self) -> None:
        self.reading.close()
