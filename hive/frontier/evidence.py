"""Evidence: what a queued URL's links say of it, and the level that makes it. Pure.

Every link to a host arrives at the host's owner (its own links directly, the
others through the outbox and the routers), so the owner can count, for each of
its queued URLs, who links to it, and raise the URL while it waits. Two kinds of
evidence, kept in the URL's pending state in the seen set (hive.storage.schema
``Pending``: on disk with it, so bounded by the seen set, kept across a kill -9
and carried by a resize, which moves a host's states whole):

- **Linking hosts.** A 64-bit sketch: a link found on a page of host H sets bit
  ``mmh3(H) mod 64``. Hosts, not pages: a site's own navigation links every
  page from every page, and a link farm is one site, so each host counts once
  whatever it repeats; and the sender's recent-links cache
  (hive.core.recentlinks) then drops only the repeats a host makes, which are
  no evidence. A bit set twice is set once, so the sketch is idempotent: an
  outbox batch resent after a crash, or a page fetched again after a kill -9,
  adds nothing. Its distinct count is read by linear counting
  (``-64 ln(zeros / 64)``), within ~10 % up to ~100 hosts and saturating at
  ~266: enough to tell 1, 2, 4 … 128 linking hosts apart, which is all a level
  uses. Counts rather than OPIC cash: cash is split among a page's links as
  they are found, so it is not idempotent (a resent batch pays twice), it
  needs the linking page's own cash on every record on the wire, and it
  favours the early-found; bench/README.md measures both orders on the power-law
  test web (bench/bench_priority.py).
- **Linking pages' scores.** A page's score (hive.fetch.scoring, the
  ``priority.scorer`` hook) travels on its out-links' records (``UrlRecord.score``,
  quantized to 1..255; 0 is none); a URL keeps the best score of the pages that
  link to it (a maximum is idempotent too).

**The level** (``level``): the prioritizer's level (``base``, given once at
admission), raised ``priority.inlink_levels`` levels for each doubling of the
linking hosts, and moved by the best linking score: ``round(score_levels × (0.5
- score))`` levels (up for a score over one half, down under it; Craw4LLM's
propagation of a page's quality to its out-links), clamped to 1..levels. A URL
only ever rises by evidence (the frontier moves it when its level falls below
the one it is queued at, never down), so it moves at most ``levels - 1`` times.
"""

from __future__ import annotations

import math

import mmh3

from hive.config import PriorityConfig
from hive.core.record import SCORE_STEPS

SKETCH_BITS = 64
def linker_bit(via: str) -> int:
    """The sketch bit of the host of the page ``via`` a link was found on (0: no page,
    as for a seed). ``via`` is a canonical URL (``scheme://host[:port]/...``)."""
    if not via:
        return 0
    start = via.find("//") + 2
    end = via.find("/", start)
    host = via[start:end] if end >= 0 else via[start:]
    return 1 << (mmh3.hash(host.encode("utf-8", "surrogatepass"), signed=False)
                 & (SKETCH_BITS - 1))


def distinct(sketch: int) -> float:
    """The distinct linking hosts a sketch stands for (linear counting)."""
    zeros = SKETCH_BITS - sketch.bit_count()
    return SKETCH_BITS * math.log(SKETCH_BITS / max(zeros, 1))


class LevelRule:
    """The level a URL's evidence gives it (see the module docstring), by table: the
    in-link lift for each number of sketch bits set, the score move for each code."""

    def __init__(self, cfg: PriorityConfig, levels: int) -> None:
        self.levels = levels
        self.enabled = cfg.inlink_levels > 0 or cfg.score_levels > 0
        self.inlinks = cfg.inlink_levels > 0
        self._lift = [
            math.floor(cfg.inlink_levels * math.log2(max(distinct((1 << bits) - 1), 1.0)) + 1e-9)
            for bits in range(SKETCH_BITS + 1)
        ]
        self._move = [0] + [
            round(cfg.score_levels * (0.5 - (code - 1) / SCORE_STEPS))
            for code in range(1, SCORE_STEPS + 2)
        ]

    def level(self, base: int, sketch: int, score: int) -> int:
        """The level of a URL the prioritizer put at ``base``, with this evidence."""
        level = base - self._lift[sketch.bit_count()] + self._move[score]
        return 1 if level < 1 else self.levels if level > self.levels else level
