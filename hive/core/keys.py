"""The two keys a URL is placed by: the ring key (which worker owns it) and the
politeness key (which politeness unit it waits in at that worker). Pure.

Both are functions of a record's host key (``UrlRecord.host_key``, hive.core.urls:
the host and its port if not default), which every record carries and the
frontier reads without decoding the rest of a record. Today both are the host
key itself; they are apart so that a change of one is a change of this module.

- **The ring key** is what the ring (hive.core.ring) hashes to an owner: the
  splitter routes a record by it, a worker keeps the links whose ring key it
  owns, and a resize moves what the new ring gives to another worker.
- **The politeness key** is the unit of politeness at the owner: the back queue
  a URL waits in, the host record (next-allowed time, delay, failures; and, as
  long as the key is the host, the per-host state: robots.txt, the URL and
  sitemap budgets, a ``hive deny``), the heap entry, and the lease that keeps
  one fetch in flight per key. Its hash (hive.core.urls.host_hash) is the prefix
  of the ``urls``, ``back``, ``hosts``, ``bound``, ``parked`` and ``leases``
  keys (hive/storage/schema.py), and a host record keeps the key itself.

The rule the two keep: a politeness unit lives at one owner, and a resize, which
places a host record by the ring key of the key it keeps, moves it whole. So
``ring_key(politeness_key(h)) == ring_key(h)`` for every host key ``h``; the
ring key is the politeness key or coarser. A politeness key coarser than the
host (an address, a registered domain: issue 28) therefore either changes the
ring key with it, or is kept per worker with a limit across workers above it.
"""

from __future__ import annotations


def ring_key(host_key: str) -> str:
    """The key the ring places a URL of this host key by (today the host key)."""
    return host_key


def politeness_key(host_key: str) -> str:
    """The politeness unit a URL of this host key waits in at its owner (today the host
    key): its back queue, host record, heap entry and lease."""
    return host_key
