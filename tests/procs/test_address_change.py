"""A host whose DNS answer changes while the hive runs is polite at each address it is
fetched at: its next lease waits for a grant at the new address, beside that address's
other hosts, and the fetch goes to the address granted (issue 28: "a host that moves to
another address stays polite across the change")."""

from __future__ import annotations

from pathlib import Path

from hive import config
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
RING = Ring(1, 64, 0)
OLD, NEW = "192.0.2.1", "192.0.2.2"


def lease(host: str, path: str = "/") -> Lease:
    return Lease(LeaseKind.PAGE, host_hash(host), UrlRecord(f"http://{host}{path}", host), b"k")


def test_a_host_that_moves_waits_its_turn_at_its_new_address(tmp_path: Path) -> None:
    table = {"moving.test": OLD, "resident.test": NEW}

    def resolved(host: str, _: float) -> Resolution | None:
        return Resolution(host, (table[host],)) if host in table else None

    store = Store(tmp_path / "worker-0", sync_interval=0.0)
    addresses = Addresses(CFG, store, 0, RING, resolved, lambda host: None, 0.0)
    try:
        first = lease("moving.test")
        addresses.start((first, None), 0.0)
        ((pending, slot),) = addresses.turn(0.0)
        assert pending[0] == first and slot.address == OLD
        addresses.finished(first, 0.0, 0.05)

        resident = lease("resident.test")
        addresses.start((resident, None), 0.06)
        ((pending, slot),) = addresses.turn(0.06)
        assert slot.address == NEW  # in flight at the new address

        table["moving.test"] = NEW  # the host's DNS entry changes
        second = lease("moving.test", "/next")
        addresses.start((second, None), 0.3)
        assert addresses.turn(0.3) == [], "one in flight at the new address already"
        assert addresses.waiting_hosts() == {second.host_hash: NEW}
        addresses.finished(resident, 0.06, 0.4)
        ((pending, slot),) = addresses.turn(0.4)
        assert pending[0] == second and slot.address == NEW  # the fetch goes where granted
        # and it starts no sooner than ip_min_delay after the resident host's start
        assert slot.not_before >= 0.06 + 0.1
    finally:
        addresses.close()
        store.close(1.0)
