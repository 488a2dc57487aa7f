"""Per registered domain at the frontier (hive.frontier.domains): the hosts and pages
caps refuse past them, counted under the domain; the rows are the sums over the host
records (hive verify), survive kill -9, and are made for a store of before them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lmdb

from hive.frontier import domains
from hive.frontier.frontier import Frontier
from hive.frontier.verify import verify_store
from hive.outcome import Kind, Outcome
from hive.storage.schema import DB_NAMES
from tests.frontier.conftest import Opener, rec

FARM = [f"http://s{i}.farm.example.com/" for i in range(40)]
OK = Outcome(Kind.OK, 200)


def row(f: Frontier, domain: str) -> domains.Domain:
    return domains.read(f.store, domain)


def verified(path: Path) -> None:
    report = verify_store(path)
    assert report.ok, report.summary()


def test_hosts_past_the_cap_are_refused_and_counted_under_the_domain(
        opener: Callable[..., Opener]) -> None:
    o = opener(scope={"max_hosts_per_domain": 5, "max_pages_per_domain": 0},
               robots={"enabled": False})
    f = o.open()
    assert f.admit([rec(url) for url in FARM] + [rec("http://www.other.com/")], 0.0) == 6
    assert row(f, "example.com") == domains.Domain(5, 5, 0)
    assert row(f, "other.com") == domains.Domain(1, 1, 0)
    stats = f.stats()
    assert stats["refusals/max_hosts_per_domain"] == 35
    assert stats["refusals/max_hosts_per_domain/example.com"] == 35
    assert stats["frontier/capped/max_hosts_per_domain"] == 35
    assert {reason for _, reason, _ in f.refused} == {"max_hosts_per_domain"}
    # A host admitted before the cap keeps taking pages; the blog of a platform in the
    # list's private section is a domain of its own.
    admitted = f.admit([rec(FARM[0] + "more"), rec("http://x.blogspot.com/")], 1.0)
    assert admitted == 2
    # Fetches count; kill -9 keeps it all; a new host of the full domain is still refused.
    lease = f.pop_ready(2.0).lease
    assert lease is not None
    f.done(lease, OK, 2.0, 2.1)
    f.commit(3.0)
    f = o.reopen(3.0, crash=True)
    assert sum(row(f, d).fetched for d in ("example.com", "other.com", "x.blogspot.com")) == 1
    assert f.admit([rec("http://s99.farm.example.com/")], 4.0) == 0
    assert row(f, "example.com").hosts == 5
    f.close(5.0)
    verified(o.path)


def test_pages_past_the_budget_are_refused(opener: Callable[..., Opener]) -> None:
    o = opener(scope={"max_hosts_per_domain": 0, "max_pages_per_domain": 7})
    f = o.open()
    urls = [f"http://h{h}.example.co.uk/{p}" for p in range(4) for h in range(3)]
    assert f.admit([rec(url) for url in urls], 0.0) == 7
    # Admitted host by host: h0 takes 4, h1 3, and h2 none (no page, no host record).
    assert row(f, "example.co.uk") == domains.Domain(2, 7, 0)
    assert f.stats()["refusals/max_pages_per_domain/example.co.uk"] == 5
    # Found again, a refused URL is refused again (counted, not recorded); a duplicate of
    # an admitted one is only a duplicate.
    assert f.admit([rec(urls[-1]), rec(urls[0])], 1.0) == 0
    assert f.stats()["refusals/max_pages_per_domain"] == 6
    f.close(2.0)
    verified(o.path)


def test_verify_finds_a_row_that_is_not_the_sum(opener: Callable[..., Opener]) -> None:
    o = opener()
    f = o.open()
    f.admit([rec(url) for url in FARM[:3]], 0.0)
    f.store.put("domains", b"example.com", b"\x00\x00\x00\x04" + bytes(16))
    f.store.put("domains", b"ghost.com", b"\x00\x00\x00\x01" + bytes(16))
    f.close(1.0)
    problems = "\n".join(verify_store(o.path).problems)
    assert "domain example.com: its row says 4 hosts, 0 pages" in problems
    assert "domain ghost.com: its row says 1 hosts" in problems


def test_a_store_of_before_the_rows_gets_them_when_opened(opener: Callable[..., Opener]) -> None:
    o = opener(scope={"max_hosts_per_domain": 3})
    f = o.open()
    f.admit([rec(url) for url in FARM[:3]], 0.0)
    f.close(1.0)
    # As a hive of before: no rows, no mark.
    env = lmdb.open(str(o.path), max_dbs=len(DB_NAMES) + 2)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"domains", txn=txn), delete=True)
        txn.delete(domains.META_DOMAINS, db=env.open_db(b"meta", txn=txn))
    env.close()
    verified(o.path)  # no rows to check yet
    f = o.open(2.0)
    assert row(f, "example.com") == domains.Domain(3, 3, 0)
    assert f.admit([rec(FARM[5])], 3.0) == 0, "the hosts held before count"
    f.close(4.0)
    verified(o.path)
