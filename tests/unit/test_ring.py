"""The consistent-hash ring: balance, minimal movement, determinism, validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.core.ring import DEFAULT_VNODES, MAX_PROCS, MAX_SEED, MAX_VNODES, Ring

HOSTS = [f"host{i}.example{i % 97}.com" for i in range(100_000)]


@pytest.fixture(scope="module")
def rings() -> dict[int, Ring]:
    return {n: Ring(n) for n in (2, 3, 4, 5, 8, 9, 16)}


def test_default_vnodes_is_the_documented_value() -> None:
    assert DEFAULT_VNODES == 2048
    assert Ring(3).vnodes == DEFAULT_VNODES


def test_sixteen_workers_each_own_their_share_within_ten_percent(rings: dict[int, Ring]) -> None:
    ring = rings[16]
    counts = [0] * 16
    for host in HOSTS:
        counts[ring.owner(host)] += 1
    share = len(HOSTS) / 16
    assert all(abs(c - share) <= 0.10 * share for c in counts), counts


@pytest.mark.parametrize("n", [3, 4, 8])
def test_growing_moves_about_one_share_and_only_to_the_new_worker(
    rings: dict[int, Ring], n: int
) -> None:
    old, new = rings[n], rings[n + 1]
    moved = old.moved(new, HOSTS)
    expected = len(HOSTS) / (n + 1)
    # Tolerance: ±10 % of the new worker's share (observed within ±2.1 %).
    assert abs(len(moved) - expected) <= 0.10 * expected, (len(moved), expected)
    assert all(new.owner(host) == n for host in moved)


@pytest.mark.parametrize("n", [3, 4, 5, 9])
def test_shrinking_moves_only_the_removed_workers_hosts(rings: dict[int, Ring], n: int) -> None:
    old, new = rings[n], rings[n - 1]
    moved = old.moved(new, HOSTS)
    assert moved == [host for host in HOSTS if old.owner(host) == n - 1]
    assert all(new.owner(host) != n - 1 for host in moved)


def test_moved_keeps_input_order_and_is_empty_for_the_same_ring(rings: dict[int, Ring]) -> None:
    assert rings[4].moved(Ring(4), HOSTS[:1000]) == []
    moved = rings[4].moved(rings[5], HOSTS[:1000])
    assert moved == sorted(moved, key=HOSTS.index)


def test_one_worker_owns_everything() -> None:
    ring = Ring(1, vnodes=1)
    assert {ring.owner(host) for host in HOSTS[:1000]} == {0}


# Pinned owners: if these change, every existing data directory's hosts move.
PINNED = [
    (Ring(16), "example.com", 11),
    (Ring(16), "www.example.com", 1),
    (Ring(16), "a.b.c", 8),
    (Ring(16), "é.fr", 4),
]


@pytest.mark.parametrize(("ring", "host", "owner"), PINNED)
def test_owner_formula_is_pinned(ring: Ring, host: str, owner: int) -> None:
    assert ring.owner(host) == owner


def test_same_params_give_the_same_owner_in_other_processes() -> None:
    hosts = HOSTS[:2000]
    ring = Ring(5, 64, 42)
    here = [ring.owner(h) for h in hosts]
    code = (
        "import json, sys\n"
        "from hive.core.ring import Ring\n"
        "ring = Ring(5, 64, 42)\n"
        "print(json.dumps([ring.owner(h) for h in json.load(sys.stdin)]))\n"
    )
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(hosts),
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        assert json.loads(out.stdout) == here


def test_seed_and_vnodes_change_the_ring() -> None:
    base, seeded, sparse = Ring(8), Ring(8, seed=1), Ring(8, vnodes=64)
    assert base.moved(seeded, HOSTS[:1000])
    assert base.moved(sparse, HOSTS[:1000])


def test_params_round_trip_and_equality() -> None:
    ring = Ring(7, 128, 99)
    assert ring.params == {"procs": 7, "vnodes": 128, "seed": 99, "key": "host"}
    again = Ring.from_params(json.loads(json.dumps(ring.params)))
    assert again == ring
    assert hash(again) == hash(ring)
    assert again != Ring(7, 128, 98)
    assert again != Ring(7, 128, 99, "domain")
    assert ring != "Ring(7)"
    assert repr(ring) == "Ring(procs=7, vnodes=128, seed=99, key='host')"
    domain = Ring(7, 128, 99, "domain")
    assert Ring.from_params(json.loads(json.dumps(domain.params))) == domain


def test_params_recorded_without_a_key_are_a_host_ring() -> None:
    """hive.json of a crawl made before the scheme was recorded names no key: its hosts
    keep their places (the ring of the host key)."""
    old = Ring.from_params({"procs": 5, "vnodes": 64, "seed": 3})
    assert old == Ring(5, 64, 3, "host")
    assert [old.owner(h) for h in HOSTS[:500]] == [
        Ring(5, 64, 3).owner(h) for h in HOSTS[:500]]


@pytest.mark.parametrize(
    "args",
    [
        (0,),
        (-1,),
        (MAX_PROCS + 1,),
        (2, 0),
        (2, MAX_VNODES + 1),
        (2, 16, -1),
        (2, 16, MAX_SEED + 1),
        (True,),
        (2.0,),
        ("2",),
        (2, None),
        (2, 16, 0, "address"),
    ],
)
def test_invalid_params_raise_value_error(args: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="ring"):
        Ring(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "params",
    [
        {"procs": 2, "vnodes": 16},
        {"procs": 2, "vnodes": 16, "seed": 0, "extra": 1},
        {"procs": "2", "vnodes": 16, "seed": 0},
        {"procs": 2, "vnodes": 16, "seed": -5},
        {"procs": 2, "vnodes": 16, "seed": 0, "key": "address"},
        {"procs": 2, "vnodes": 16, "seed": 0, "key": 1},
    ],
)
def test_invalid_recorded_params_raise_value_error(params: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="ring"):
        Ring.from_params(params)


@settings(max_examples=200, deadline=None)
@given(
    procs=st.integers(1, 12),
    seed=st.integers(0, MAX_SEED),
    hosts=st.lists(st.text(max_size=40), max_size=30),
)
def test_any_key_has_an_owner_and_growth_only_feeds_the_new_worker(
    procs: int, seed: int, hosts: list[str]
) -> None:
    old, new = Ring(procs, 16, seed), Ring(procs + 1, 16, seed)
    for host in hosts:
        assert 0 <= old.owner(host) < procs
        assert new.owner(host) in (old.owner(host), procs)
