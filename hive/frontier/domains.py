"""Domains: one store's hosts, pages and fetches per registered domain, and the two caps
on a domain (``scope.max_hosts_per_domain``, ``scope.max_pages_per_domain``).

A domain is the registered domain of a host (hive.core.keys.registered_domain: the
Public Suffix List with its private section; a host without one is its own domain).
Its row in the ``domains`` database (hive.storage.schema) is the sum over the host
records of the store whose host is of that domain:

- ``hosts``: how many there are;
- ``pages``: their ``admitted + listed`` (the pages admitted to them, those listed by a
  sitemap of another origin included: what the crawl means to fetch of the domain);
- ``fetched``: their ``fetched`` (pages fetched, the server contacted).

The row changes in the transaction that changes the host records (the frontier's, or
a resize's copy and delete), so it survives kill -9 as they do, a resize carries it
with each host, and ``hive verify`` checks that it is that sum (frontier.verify). A
row whose hosts are all gone is deleted. Reads and writes go to the store's open
transaction: nothing is kept in memory, so memory does not grow with the domains.

**The caps**, at admission (hive.frontier.frontier): a URL of a host the store holds no
record of is refused (``max_hosts_per_domain``) when its domain already has that many
hosts; a page is refused (``max_pages_per_domain``) when its domain already has that
many pages. Like ``max_urls_per_host``, the refusals are counted, not recorded, and
counted under the domain (``refusals/<reason>/<domain>``). 0 turns a cap off. Under the
ring-key scheme ``"domain"`` (every crawl made since issue 28) all hosts of a domain
are at one worker, so a cap holds for the whole hive; a crawl of the ``"host"`` scheme
(made before) holds it per worker, so up to ``procs`` times the cap hive-wide.

A store made before this database (ADDED_LATER) has host records and no rows: the
frontier or a resize adds them from its host records once, when it opens it
(``ensure``), and marks that in ``meta`` (``domains``) in the same transaction.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import NamedTuple, Protocol

from hive.core.keys import registered_domain
from hive.frontier.hosts import HostState

_ROW = struct.Struct(">IQQ")
# The meta key that says the rows were made from the host records (or from the start).
META_DOMAINS = b"domains"
MAX_HOSTS = "max_hosts_per_domain"
MAX_PAGES = "max_pages_per_domain"
REASONS = frozenset({MAX_HOSTS, MAX_PAGES})


class Rows(Protocol):
    """What a row is read and written through: a store or a store transaction."""

    def get(self, name: str, key: bytes) -> bytes | None: ...

    def put(self, name: str, key: bytes, value: bytes, overwrite: bool = True) -> bool: ...

    def delete(self, name: str, key: bytes) -> bool: ...


class Domain(NamedTuple):
    """One domain's row."""

    hosts: int = 0
    pages: int = 0
    fetched: int = 0


def decode(value: bytes) -> Domain:
    return Domain(*_ROW.unpack(value))


def host_row(host: HostState) -> Domain:
    """What one host record adds to its domain's row."""
    return Domain(1, host.admitted + host.listed, host.fetched)


def read(rows: Rows, domain: str) -> Domain:
    value = rows.get("domains", domain.encode("utf-8", "surrogatepass"))
    return decode(value) if value is not None else Domain()


def add(rows: Rows, domain: str, hosts: int = 0, pages: int = 0, fetched: int = 0) -> None:
    """Add to a domain's row (negative numbers take away); a row left with no host goes."""
    if not (hosts or pages or fetched):
        return
    key = domain.encode("utf-8", "surrogatepass")
    value = rows.get("domains", key)
    old = decode(value) if value is not None else Domain()
    new = Domain(old.hosts + hosts, old.pages + pages, old.fetched + fetched)
    if new.hosts <= 0:
        if value is not None:
            rows.delete("domains", key)
        return
    rows.put("domains", key, _ROW.pack(new.hosts, max(new.pages, 0), max(new.fetched, 0)))


def add_host(rows: Rows, host: HostState, sign: int = 1) -> None:
    """A host record comes into the store (``sign`` 1) or leaves it (-1)."""
    row = host_row(host)
    add(rows, registered_domain(host.host_key), sign * row.hosts, sign * row.pages,
        sign * row.fetched)


def ensure(rows: Rows, hosts: Callable[[], Iterable[HostState]]) -> int | None:
    """Make the rows of a store made before them from its host records (``hosts``), and
    mark them made, in the caller's transaction; the hosts read, or None if the rows were
    made before. Whoever opens a store to change its host records calls it first (the
    frontier, a resize), so a row never lacks a host a record holds."""
    if rows.get("meta", META_DOMAINS) is not None:
        return None
    n = 0
    for host in hosts():
        add_host(rows, host)
        n += 1
    rows.put("meta", META_DOMAINS, b"1")
    return n


def expected(hosts: Iterable[HostState]) -> dict[str, Domain]:
    """The rows the host records make (hive verify's reference; memory: one per domain)."""
    out: dict[str, Domain] = {}
    for host in hosts:
        domain = registered_domain(host.host_key)
        row, share = out.get(domain, Domain()), host_row(host)
        out[domain] = Domain(row.hosts + 1, row.pages + share.pages,
                             row.fetched + share.fetched)
    return out


class Caps:
    """The two caps of a frontier; 0 is no cap."""

    __slots__ = ("max_hosts", "max_pages")

    def __init__(self, max_hosts: int, max_pages: int) -> None:
        self.max_hosts = max_hosts
        self.max_pages = max_pages

    def host_refused(self, row: Domain) -> bool:
        """A new host of a domain with this row is refused."""
        return 0 < self.max_hosts <= row.hosts

    def page_refused(self, pages: int) -> bool:
        """A page of a domain holding ``pages`` is refused."""
        return 0 < self.max_pages <= pages
