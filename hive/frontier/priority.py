"""The default prioritizer: a URL record and its host's history to a level 1..k.

Mercator leaves the prioritizer pluggable; hive loads it from the dotted path in
``frontier.prioritizer``. Any callable ``(record, host) -> int`` works; the
frontier clamps the result to 1..levels. The default favours what a batch crawl
wants first: seeds and pages near them, short paths without queries, hosts that
answer. An explicit ``record.hint`` (seeds, ``hive add``, a recrawl's planned URLs) wins.

A recrawl (``recrawl.order = "change_rate"``) queues each planned URL at the level
``change_level`` gives its probability of having changed since its last capture
(hive.core.prior: Cho and Garcia-Molina's estimator over its history across crawls),
as its hint: the URLs most likely to have changed first, those known not to change
last, and the links a recrawl discovers by the prioritizer as in any crawl.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from hive.core.record import UrlRecord
from hive.plugins import load_object


class HostHistory(Protocol):
    """What a prioritizer may know of the URL's host."""

    admitted: int
    fetched: int
    failures: int


Prioritizer = Callable[[UrlRecord, HostHistory], int]


def default_priority(record: UrlRecord, host: HostHistory) -> int:
    """Depth from the seed first (seeds: 1), then penalties: query, deep path, failing host."""
    if record.hint:
        return record.hint
    level = 1 + min(record.depth, 3)
    url = record.url
    if "?" in url:
        level += 1
    if url.count("/") > 8:
        level += 1
    if host.failures >= 3:
        level += 2
    return level


def change_level(probability: float, levels: int) -> int:
    """The level of a planned URL that changed since its last capture with this
    probability: 1 for certain change, ``levels`` for none, linear between."""
    p = min(max(probability, 0.0), 1.0)
    return 1 + round((1.0 - p) * (levels - 1))


def load_prioritizer(path: str) -> Prioritizer:
    """The prioritizer ``frontier.prioritizer`` names (hive.plugins loads it)."""
    prioritizer: Prioritizer = load_object("frontier.prioritizer", path)
    return prioritizer
