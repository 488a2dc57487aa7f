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

Seeding is once per version of the file (its path, size and time, in ``meta``): a
restart does not read it again, and a kill before the mark reads it again, which is
harmless (admission is idempotent, an entry is put again whole).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from hive.config import Config
from hive.core.prior import Prior, read_plan
from hive.core.record import UrlRecord
from hive.core.urls import fingerprint, host_hash, host_key
from hive.errors import URLError
from hive.frontier.frontier import Frontier
from hive.frontier.priority import change_level
from hive.storage.schema import META_RECRAWL_FROM, url_key
from hive.storage.store import Store

log = logging.getLogger(__name__)

# URLs admitted and committed at a time while seeding; the first NAMED malformed lines are
# logged with their numbers (the rest counted).
PLAN_BATCH = 5000
NAMED = 10


def prior_key(url: str) -> bytes:
    """A URL's key in ``prior``: its host's hash and its own, as in the seen set."""
    return url_key(host_hash(host_key(url)), fingerprint(url))


class Plan:
    """One worker's side of a recrawl's plan (see the module docstring)."""

    def __init__(self, store: Store, cfg: Config) -> None:
        self.store = store
        self.levels = cfg.frontier.levels
        self.by_rate = cfg.recrawl.order == "change_rate"

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

    def seed(self, path: Path, frontier: Frontier, owns: Callable[[str], bool]) -> Counter[str]:
        """Queue the plan's URLs that ``owns`` accepts (the module docstring); the counts
        (``recrawl/plan/...``). An unreadable file is logged, not fatal: the crawl goes on
        without it."""
        counts: Counter[str] = Counter()
        try:
            stat = path.stat()
        except OSError as exc:
            log.error("recrawl.plan: cannot read %s: %s", path, exc)
            return counts
        mark = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
        if self.store.get("meta", META_RECRAWL_FROM) == mark:
            return counts
        now = time.time()
        batch: list[UrlRecord] = []
        try:
            with path.open("rb") as f:
                for number, prior, why in read_plan(f):
                    if prior is None:
                        counts[f"recrawl/plan/malformed/{why}"] += 1
                        if counts["recrawl/plan/malformed"] < NAMED:
                            log.warning("%s:%d: line skipped, %s", path, number, why)
                        counts["recrawl/plan/malformed"] += 1
                        continue
                    if not owns(prior.url):
                        continue
                    self.store.put("prior", prior_key(prior.url), prior.encode())
                    hint = (change_level(prior.change_probability(now), self.levels)
                            if self.by_rate else 0)
                    batch.append(UrlRecord(prior.url, host_key(prior.url), prior.depth,
                                           prior.via, 0, 0, hint, prior.kind, prior.path))
                    counts["recrawl/plan/queued"] += 1
                    if len(batch) >= PLAN_BATCH:
                        frontier.admit(batch, now)
                        frontier.commit(now)
                        batch = []
        except OSError as exc:
            log.error("recrawl.plan: cannot read %s: %s", path, exc)
            return counts
        frontier.admit(batch, now)
        self.store.put("meta", META_RECRAWL_FROM, mark)
        frontier.commit(now)
        log.info("recrawl plan %s: %d URLs of this worker queued", path,
                 counts["recrawl/plan/queued"])
        return counts
