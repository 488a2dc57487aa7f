"""The busiest registered domains, read from the workers' stores: each domain's hosts, its
pages admitted and fetched (the ``domains`` rows, hive.frontier.domains) and the URLs its
caps refused (the refusals tally, where the frontier counts them under the domain).

Read as hive.report.pending reads the stores: read-only, with LMDB's reader lock, the
stores :meth:`hive.storage.datadir.DataDir.workers` lists, a store that cannot be read
named in ``problems``. Bounded: each store gives its ``TOP_FACTOR * n`` domains with the
most fetches, and those are summed across stores (a crawl that places hosts by domain
holds each domain in one store, so its sums are whole; one that places them by host
may split a domain, and a share left out of a store's top is left out of its sum). A
store of before the rows has none to give.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hive.errors import StoreError
from hive.frontier import domains
from hive.frontier.refusals import Refusals
from hive.storage.datadir import DataDir
from hive.storage.modes import read_only
from hive.storage.schema import META_REFUSALS

TOP_FACTOR = 4


@dataclass
class DomainRow:
    domain: str
    hosts: int = 0
    pages: int = 0
    fetched: int = 0
    refused_hosts: int = 0
    refused_pages: int = 0


@dataclass
class Domains:
    top: list[DomainRow] = field(default_factory=list)
    # Refusals by the domain caps in all (whatever domain), by reason.
    refused: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def busiest_domains(data_dirs: Sequence[Path], n: int) -> Domains:
    """The ``n`` registered domains with the most pages fetched across the stores of
    ``data_dirs`` (one, or a cluster's machines')."""
    out = Domains()
    rows: dict[str, DomainRow] = {}
    refused: dict[tuple[str, str], int] = {}
    for _, store in (s for data_dir in data_dirs for s in DataDir(data_dir).workers()):
        if not DataDir.store_data(store).is_file():
            continue
        try:
            _read(store, n * TOP_FACTOR, rows, refused, out.refused)
        except (StoreError, ValueError, struct.error) as exc:
            out.problems.append(f"{store.name}: {exc}")
    for (reason, domain), count in refused.items():
        row = rows.get(domain)
        if row is not None:
            if reason == domains.MAX_HOSTS:
                row.refused_hosts += count
            else:
                row.refused_pages += count
    out.top = heapq.nlargest(n, rows.values(), key=lambda r: (r.fetched, r.pages, r.hosts))
    return out


def _read(store: Path, n: int, rows: dict[str, DomainRow], refused: dict[tuple[str, str], int],
          totals: dict[str, int]) -> None:
    with read_only(store, live=True) as txn:
        top = heapq.nlargest(n, ((key, domains.decode(value))
                                 for key, value in txn.items("domains")),
                             key=lambda kv: (kv[1].fetched, kv[1].pages, kv[1].hosts))
        tally = Refusals.decode(txn.get("meta", META_REFUSALS), 0)
    for key, row in top:
        name = key.decode("utf-8", "replace")
        kept = rows.setdefault(name, DomainRow(name))
        kept.hosts += row.hosts
        kept.pages += row.pages
        kept.fetched += row.fetched
    for reason in domains.REASONS:
        if reason in tally.totals:
            totals[reason] = totals.get(reason, 0) + tally.totals[reason]
    for (reason, domain), count in tally.by_host.items():
        if reason in domains.REASONS:
            refused[reason, domain] = refused.get((reason, domain), 0) + count
