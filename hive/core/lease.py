"""A lease: one URL handed out for fetching, what the frontier gives and the fetch
pipeline carries back with its outcome.

A lease is of one of two kinds (``LeaseKind``): ``PAGE`` (a URL of the host's back
queue, sitemaps and feeds included; ``key`` is its back-queue key) or ``ROBOTS``
(the robots.txt of the origin of the host's head URL; ``key`` is empty, which is
how the ``leases`` database tells it, hive/storage/schema.py). It lives in the
core so the fetch path knows it without loading the frontier or its store.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hive.core.record import UrlRecord


class LeaseKind(Enum):
    """What a lease fetches: a URL of the host's back queue, or its origin's robots.txt."""

    PAGE = "page"
    ROBOTS = "robots"


@dataclass(frozen=True, slots=True)
class Lease:
    """A URL handed out for fetching; ``key`` is its back-queue key (empty for robots.txt)."""

    kind: LeaseKind
    host_hash: int
    record: UrlRecord
    key: bytes
