"""The payload index's look-up: its Bloom filter of digests never hides an archived payload,
spares the store read for a new one, and has the false-positive rate a Bloom filter's
theory gives (fixed seed, stated tolerance)."""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path

import pytest

from hive.core.urls import host_key
from hive.fetch import revisits
from hive.fetch.revisits import DigestFilter, PayloadIndex, decode, encode
from hive.fetch.warc import Original


def digests(rng: random.Random, n: int) -> list[bytes]:
    return [hashlib.sha1(rng.randbytes(16)).digest() for _ in range(n)]


def test_the_filter_never_misses_and_errs_as_often_as_theory_says() -> None:
    rng = random.Random(20261201)
    bits, entries, probes = 1 << 16, 8000, 50_000
    bloom = DigestFilter(bits)
    added = digests(rng, entries)
    for sha1 in added:
        bloom.add(sha1)
    assert all(bloom.may_hold(sha1) for sha1 in added)
    false = sum(bloom.may_hold(sha1) for sha1 in digests(rng, probes))
    k = revisits.FILTER_HASHES
    expected = (1 - math.exp(-k * entries / bits)) ** k * probes  # about 1,110
    assert abs(false - expected) < 0.15 * expected, (false, expected)


def test_the_default_filter_keeps_a_million_payloads_under_one_error_in_a_thousand() -> None:
    k, m = revisits.FILTER_HASHES, revisits.FILTER_BITS
    assert (1 - math.exp(-k * 1_000_000 / m)) ** k < 1e-3
    assert m // 8 <= 4 << 20, "the filter's memory is fixed and small"


@pytest.mark.parametrize("bits", [0, 7, 1000, 3 << 10])
def test_a_filter_size_that_is_not_a_power_of_two_is_refused(bits: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        DigestFilter(bits)


class Store:
    """The two store calls the index makes, counted."""

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.reads = 0

    def read(self, key: bytes) -> bytes | None:
        self.reads += 1
        return self.values.get(key)

    def write(self, key: bytes, value: bytes) -> None:
        self.values.setdefault(key, value)


def test_a_new_payload_costs_no_store_read_and_an_old_one_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(revisits, "RECENT", 4)
    rng = random.Random(7)
    store = Store()
    old = digests(rng, 3)
    for n, sha1 in enumerate(old):  # archived by an earlier run of the worker
        store.values[sha1] = encode(Original(f"http://a.test/{n}", "2026-12-01T00:00:00Z", ""))
    index = PayloadIndex(store.read, store.write, 0, known=list(store.values), filter_bits=1 << 20)

    new = digests(rng, 1000)
    assert all(index.find(sha1) is None for sha1 in new)
    assert store.reads < 5, "only a false positive of the filter reads the store"
    assert [index.find(sha1) for sha1 in old] == [
        Original(f"http://a.test/{n}", "2026-12-01T00:00:00Z", "") for n in range(3)
    ]

    # Archived now, forgotten by the recent entries, committed: found through the store.
    fresh = [(sha1, Original(f"http://b.test/{n}", "2026-12-01T01:00:00Z", f"<urn:{n}>"))
             for n, sha1 in enumerate(new[:10])]
    for sha1, original in fresh:
        index.archived(sha1, original)
    index.persist()
    reads = store.reads
    assert [index.find(sha1) for sha1, _ in fresh] == [original for _, original in fresh]
    assert store.reads - reads == 10 - revisits.RECENT


def test_a_worker_of_a_hive_seeds_only_the_entries_of_its_hosts(tmp_path: Path) -> None:
    index = tmp_path / "prior.cdxj"
    urls = [f"http://h{n}.test/p" for n in range(6)] + ["not a url"]
    index.write_text("".join(
        f'x {20260101000000 + n} {{"url": "{url}", "digest": "sha1:{"A" * 31}{"ABCDEFG"[n]}"}}\n'
        for n, url in enumerate(urls)))
    store = Store()
    index_of = PayloadIndex(store.read, store.write, 0)
    mine = {"h1.test", "h4.test"}
    with index.open("rb") as f:
        assert index_of.seed(f, 100, lambda url: host_key(url) in mine, str) == len(urls)
    assert index_of.stats() == {"revisits/seeded": 2, "revisits/seed/skipped/other_worker": 4,
                                "revisits/seed/malformed/url": 1, "revisits/seed/malformed": 1}
    assert sorted(decode(v).uri for v in store.values.values()) == [  # type: ignore[union-attr]
        "http://h1.test/p", "http://h4.test/p"]
