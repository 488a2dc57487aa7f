"""The fence of a cluster's machine (hive/procs/fence.py) and the recipe of its peers."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive.core import wire
from hive.procs.endpoints import Endpoints
from hive.procs.fence import Fence


def test_one_machine_is_not_fenced() -> None:
    fence = Fence(enabled=False)
    assert fence.holds(1e12) and fence.accepts(3, 0) and fence.accepts(3, 1)
    assert not fence.counts


def test_a_cluster_worker_takes_nothing_before_its_first_fence() -> None:
    fence = Fence(enabled=True)
    assert not fence.holds(0.0)
    assert not fence.accepts(1, 1)
    assert fence.accepts(wire.SUPERVISOR_ORIGIN, 0)  # its own machine's seeds
    assert fence.counts["fence/unfenced"] == 1


def test_the_lease_holds_until_its_end_and_old_epochs_are_refused() -> None:
    fence = Fence(enabled=True)
    fence.update({"until": 100.0, "epoch": 2, "epochs": [2, 2, 5, 5]})
    assert fence.holds(99.9) and not fence.holds(100.0)
    assert fence.accepts(0, 2) and fence.accepts(2, 5) and fence.accepts(2, 6)
    assert not fence.accepts(2, 4)  # worker 2's machine rejoined as epoch 5: 4 is its old self
    assert not fence.accepts(4, 5)  # no such worker
    assert fence.counts["fence/stale"] == 2
    # A grant older than the one held (a late reply) changes nothing.
    fence.update({"until": 200.0, "epoch": 1, "epochs": [1, 1, 1, 1]})
    assert fence.until == 100.0 and fence.counts["fence/stale_grant"] == 1


@pytest.mark.parametrize("args", [
    {}, {"until": 1.0, "epoch": 0, "epochs": []}, {"until": float("nan"), "epoch": 1,
                                                  "epochs": []},
    {"until": 1.0, "epoch": 1, "epochs": [-1]}, {"until": "1", "epoch": 1, "epochs": []},
])
def test_a_bad_fence_is_refused(args: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="bad fence"):
        Fence(enabled=True).update(args)


def test_a_cluster_recipe_names_each_peer_and_its_server_key(tmp_path: Path) -> None:
    peers = {0: ("tcp://127.0.0.1:17103", "k" * 40), 1: ("tcp://127.0.0.2:17203", "j" * 40)}
    ends = Endpoints.tcp(17100, "127.0.0.1", tmp_path, peers)
    assert ends.worker(1) == "tcp://127.0.0.2:17203" and ends.server_key(1) == b"j" * 40
    assert ends.control == "tcp://127.0.0.1:17102"
    assert Endpoints.from_dict(ends.to_dict()) == ends
    assert hash(Endpoints.from_dict(ends.to_dict())) == hash(ends)
    with pytest.raises(ValueError, match="no peer"):
        ends.worker(2)
    with pytest.raises(ValueError, match="need CURVE keys"):
        Endpoints.tcp(17100, "127.0.0.1", None, peers)
    with pytest.raises(ValueError, match="bad peer"):
        Endpoints.from_dict({**ends.to_dict(), "peers": {"x": ["tcp://a:1", ""]}})
    assert Endpoints.tcp(17100).server_key(0) is None


def test_cluster_lease_book_loses_a_silent_machine_and_raises_its_epoch() -> None:
    from hive.procs.cluster_head import LeaseBook

    book = LeaseBook(["a", "b"], lease=3.0)
    a, b = book.join("a", 0.0), book.join("b", 0.0)
    assert (a, b) == (1, 2)
    assert book.renew("a", a, 2.0) and book.renew("b", b, 2.0)
    assert book.renew("a", a, 4.5)  # b has been silent 2.5 s: within its lease
    assert book.sweep(5.1) == ["b"] and book.machines["b"].lost
    assert book.machines["b"].epoch == 3  # what b's old processes still send is refused
    assert not book.renew("b", b, 5.2)  # the old epoch renews nothing, even once back
    assert book.join("b", 6.0) == 4 and book.renew("b", 4, 6.5)
    assert book.sweep(7.0) == [] and book.lapses == 1
    with pytest.raises(ValueError, match="no machine"):
        book.join("z", 0.0)


def test_a_dropped_machine_s_workers_are_named_once_and_their_keys_pass_to_live_ones() -> None:
    from hive.core.ring import Ring

    fence = Fence(enabled=True)
    assert fence.update({"until": 10.0, "epoch": 2, "epochs": [2, 2, 3, 3]}) == frozenset()
    assert fence.update({"until": 11.0, "epoch": 2, "epochs": [2, 2, 5, 5],
                         "dropped": [2, 3]}) == {2, 3}
    # Dropped for good: named again (or left out by a late grant), nothing changes.
    assert fence.update({"until": 12.0, "epoch": 2, "epochs": [2, 2, 5, 5],
                         "dropped": [2, 3]}) == frozenset()
    assert fence.update({"until": 13.0, "epoch": 2, "epochs": [2, 2, 5, 5]}) == frozenset()
    assert fence.dropped == {2, 3}
    ring = Ring(4, 16, 0)
    keys = [f"10.0.0.{i}" for i in range(200)]
    moved = [k for k in keys if ring.owner(k) in (2, 3)]
    assert moved and all(fence.owner(ring, k) in (0, 1) for k in keys)
    assert all(fence.owner(ring, k) == ring.owner(k) for k in keys if k not in moved)
    with pytest.raises(ValueError, match="bad fence"):
        fence.update({"until": 1.0, "epoch": 2, "epochs": [2, 2], "dropped": [2]})
    with pytest.raises(ValueError, match="bad fence"):  # every machine dropped: none to own
        fence.update({"until": 1.0, "epoch": 2, "epochs": [2, 2], "dropped": [0, 1]})


def test_cluster_lease_book_drops_only_a_lost_machine_and_for_good() -> None:
    from hive.procs.cluster_head import LeaseBook

    book = LeaseBook(["a", "b"], lease=3.0)
    a, b = book.join("a", 0.0), book.join("b", 0.0)
    with pytest.raises(ValueError, match="machine b is not lost"):
        book.drop("b", 1.0)
    assert book.renew("a", a, 2.0) and book.renew("a", a, 3.5)
    assert book.drop("b", 3.5)  # silent past its lease: lost, then dropped
    assert book.machines["b"].dropped and book.machines["b"].epoch > b
    assert not book.drop("b", 4.0) and book.dropped() == ["b"]
    assert book.join("b", 5.0) == 0  # back under its name: it may not join again
    assert not book.renew("b", b, 5.0)
    assert book.sweep(100.0) == ["a"]  # a dropped machine never lapses again
    with pytest.raises(ValueError, match="no machine"):
        book.drop("z", 100.0)
