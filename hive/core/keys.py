"""The two keys a URL is placed by: the ring key (which worker owns it) and the
politeness key (which politeness unit it waits in at that worker). Pure.

Both are functions of a record's host key (``UrlRecord.host_key``, hive.core.urls:
the host and its port if not default), which every record carries and the
frontier reads without decoding the rest of a record. The politeness key is the
host key; the ring key is the host key or its registered domain, by the crawl's
scheme (below); they are apart so that a change of one is a change of this module.

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
ring key is the politeness key or coarser.

**The ring-key scheme** is a crawl's, recorded with its ring in ``hive.json``
(``Ring.key``, hive.core.ring) when the data directory is made and never changed
after, since it places every host:

- ``"domain"`` (every crawl made since issue 28): the host's **registered
  domain**, by the Public Suffix List *with its private section* (the
  ``publicsuffixlist`` package's copy, as hive.fetch.parse and
  hive.export.urlparts read it), so ``x.blogspot.com`` is a domain of its own
  and ``a.example.co.uk`` and ``b.example.co.uk:8080`` are both
  ``example.co.uk``. All hosts of one domain then live at one worker, and a
  limit per domain (hive.frontier.domains) is local and exact. A host with no
  registered domain keeps its host key: an IP address, a public suffix itself
  (``blogspot.com``), a name under a TLD the list does not know (``a.test``,
  ``localhost``: the list cannot say where its owner's part starts, and
  guessing one label would put every ``*.test`` host of a test web, or every
  host of a private TLD, at one worker).
- ``"host"``: the host key itself, as every crawl made before; a data
  directory whose ``hive.json`` records no scheme is one of these, and keeps it.

The registered domain is computed once per host and kept (``DOMAIN_CACHE``
hosts, least recently used out); the ring keeps each host's owner besides.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

from hive.netspec import ip_literal

if TYPE_CHECKING:
    from publicsuffixlist import PublicSuffixList

HOST: Final = "host"
DOMAIN: Final = "domain"
SCHEMES: Final = (HOST, DOMAIN)
# Hosts whose registered domain is kept: a look-up is a walk of the host's labels in the
# list's table (a few microseconds), a kept one a dict read.
DOMAIN_CACHE: Final = 65536


@functools.cache
def _suffixes() -> PublicSuffixList:
    """The list, read at the first look-up (~0.2 s): the supervisor, which places no
    host, never reads it. accept_unknown=False: a name under a TLD the list lacks has no
    registered domain."""
    from publicsuffixlist import PublicSuffixList  # noqa: PLC0415

    return PublicSuffixList(only_icann=False, accept_unknown=False)


def _host_name(host_key: str) -> str:
    """The host name of a host key, its port dropped (an IPv6 literal keeps its brackets)."""
    if host_key.startswith("["):
        return host_key[: host_key.find("]") + 1]
    colon = host_key.rfind(":")
    return host_key[:colon] if colon >= 0 else host_key


@functools.lru_cache(maxsize=DOMAIN_CACHE)
def registered_domain(host_key: str) -> str:
    """The registered domain of a host key (the Public Suffix List with its private
    section), or the host key itself when it has none: an IP address, a public suffix,
    an unknown TLD."""
    name = _host_name(host_key)
    if ip_literal(name) is not None:
        return host_key
    domain = _suffixes().privatesuffix(name)
    return domain if domain else host_key


def ring_key(host_key: str, scheme: str = HOST) -> str:
    """The key the ring places a URL of this host key by, under the crawl's ring-key
    ``scheme``: the host key (``"host"``) or its registered domain (``"domain"``)."""
    if scheme == DOMAIN:
        return registered_domain(host_key)
    if scheme == HOST:
        return host_key
    raise ValueError(f"ring key scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")


def politeness_key(host_key: str) -> str:
    """The politeness unit a URL of this host key waits in at its owner (the host key):
    its back queue, host record, heap entry and lease."""
    return host_key
