"""The address politeness shell of a worker, on a real store and a real ring: asks and grants
between two workers' Addresses carried as wire frames, refusals of what cannot be believed,
and the marker that makes an owner that did not close cleanly wait one grant's life."""

from __future__ import annotations

from pathlib import Path

from hive import config
from hive.core import wire
from hive.core.lease import Lease, LeaseKind
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.core.urls import host_hash
from hive.fetch.dns import Resolution
from hive.procs.addresses import Addresses
from hive.storage.store import Store

CFG = config.load(environ={}).replace(
    politeness={"ip_concurrency": 1, "ip_min_delay": 0.1, "ip_grant_hold": 0.5},
    fetch={"total_timeout": 2.0})
RING = Ring(2, 64, 0)


def address_owned_by(worker: int) -> str:
    return next(f"192.0.2.{i}" for i in range(1, 255) if RING.owner(f"192.0.2.{i}") == worker)


def lease(host: str) -> Lease:
    return Lease(LeaseKind.PAGE, host_hash(host), UrlRecord(f"http://{host}/", host), b"k")


def shell(tmp: Path, worker: int, table: dict[str, str], now: float = 0.0
          ) -> tuple[Addresses, list[tuple[int, list[bytes]]], Store]:
    store = Store(tmp / f"worker-{worker}", sync_interval=0.0)
    sent: list[tuple[int, list[bytes]]] = []

    def resolved(host: str, _: float) -> Resolution | None:
        return Resolution(host, (table[host],)) if host in table else None

    addresses = Addresses(CFG, store, worker, RING, resolved, lambda host: None, now)
    addresses.send = lambda peer, frames: sent.append((peer, frames))
    store.commit(now)
    return addresses, sent, store


def test_a_lease_at_another_worker_s_address_goes_with_its_grant(tmp_path: Path) -> None:
    address = address_owned_by(1)
    holder, to_owner, _ = shell(tmp_path, 0, {"a.test": address})
    owner, to_holder, _ = shell(tmp_path, 1, {})
    assert not holder.start((lease("a.test"), None), 0.0)
    assert holder.turn(0.0) == [] and holder.waiting_hosts() == {lease("a.test").host_hash: address}
    ((peer, frames),) = to_owner
    assert peer == 1
    ask = wire.decode(frames)
    assert isinstance(ask, wire.AddressAsks)
    owner.receive(ask, 0.01)
    assert owner.turn(0.01) == []
    ((peer, frames),) = to_holder
    grants = wire.decode(frames)
    assert peer == 0 and isinstance(grants, wire.AddressGrants)
    holder.receive(grants, 0.02)
    ((pending, slot),) = holder.turn(0.02)
    assert pending[0] == lease("a.test") and slot.address == address


def test_what_cannot_be_believed_is_refused_and_counted(tmp_path: Path) -> None:
    mine, other = address_owned_by(0), address_owned_by(1)
    worker, _, _ = shell(tmp_path, 0, {})
    worker.receive(wire.AddressAsks(7, 1, (wire.AddressAsk(mine, 1, 0, ()),)), 0.0)
    worker.receive(wire.AddressAsks(1, 1, (wire.AddressAsk(other, 1, 0, ()),)), 0.0)
    worker.receive(wire.AddressGrants(0, 1, (wire.AddressGrant(other, worker.epoch, 1, 0, 1),)),
                   0.0)
    worker.receive(wire.AddressGrants(1, 1, (wire.AddressGrant(other, 5, 1, 0, 1),)), 0.0)
    worker.receive(wire.AddressAsks(1, 50, (wire.AddressAsk(mine, 1, 0, ()),)), 0.0)
    worker.receive(wire.AddressAsks(1, 40, (wire.AddressAsk(mine, 1, 0, ()),)), 0.0)
    stats = worker.stats()
    assert stats["address/refused/unknown_sender"] == 1
    assert stats["address/refused/not_owner"] == 2
    assert stats["address/refused/stale_grant"] == 1
    assert stats["address/refused/stale_sender"] == 1


def test_an_owner_that_did_not_close_waits_one_grant_s_life(tmp_path: Path) -> None:
    address = address_owned_by(0)
    _, _, store = shell(tmp_path, 0, {"a.test": address})
    store.close(0.0)  # killed: its marker stays
    again, _, store = shell(tmp_path, 0, {"a.test": address}, now=100.0)
    again.start((lease("a.test"), None), 100.0)
    assert again.turn(100.0) == [] and again.turn(105.0) == []
    assert again.turn(106.0) != []  # 100 + 0.5 + 2 x 2 + 1 + 0.1
    again.close()
    store.close(106.0)
    clean, _, _ = shell(tmp_path, 0, {"a.test": address}, now=200.0)
    clean.start((lease("a.test"), None), 200.0)
    assert clean.turn(200.0) != []  # closed cleanly: no wait


def test_a_lone_host_at_another_worker_s_address_fetches_again_in_its_window_unasked(
        tmp_path: Path) -> None:
    address = address_owned_by(1)
    holder, to_owner, _ = shell(tmp_path, 0, {"a.test": address})
    owner, to_holder, _ = shell(tmp_path, 1, {})
    holder.start((lease("a.test"), None), 0.0)
    holder.turn(0.0)
    owner.receive(wire.decode(to_owner.pop()[1]), 0.0)
    owner.turn(0.0)
    grants = wire.decode(to_holder.pop()[1])
    assert isinstance(grants, wire.AddressGrants) and grants.grants[0].every == 0.1
    holder.receive(grants, 0.0)
    for start in (0.0, 0.11, 0.22, 0.33):  # four fetches, 0.11 s apart, in the 0.5 s window
        ((pending, _),) = holder.turn(start)
        holder.finished(pending[0], start, start + 0.05)
        holder.start((lease("a.test"), None), start + 0.06)
        assert holder.turn(start + 0.06) == []  # not before 0.1 after the last start
    assert to_owner == [] and holder.address_of("a.test", 0.0) == address
