"""Address politeness's pure cores on a fixed clock: the owner's ledger (its limits, its
quiet after a restart, stale holders, bounded memory), the holder's stock (waiting leases,
grants used in their window, given back), and their messages on the wire."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hive.core import wire
from hive.core.addressledger import AddressLedger, Granted
from hive.core.addressstock import AddressStock, Slot
from hive.errors import ConfigError
from hive.netspec import resolve_entries

A = "192.0.2.1"
B = "192.0.2.2"


def ledger(now: float = 0.0, concurrency: int = 2, min_delay: float = 0.1,
           hold: float = 0.5, quiet: bool = False) -> AddressLedger:
    led = AddressLedger(concurrency=concurrency, min_delay=min_delay, hold=hold,
                        fetch_life=10.0, epoch=7, now=now)
    if not quiet:
        led.quiet_until = now
    return led


def test_at_most_concurrency_grants_spaced_by_the_delay() -> None:
    led = ledger()
    for holder in (1, 2, 3):
        assert led.ask(A, holder, 100, 2, [], 7, 0.0)
    granted = led.grant(0.0)
    assert len(granted) == 2 and led.outstanding(A) == 2
    starts = sorted(g.wait for g in granted)
    assert starts == pytest.approx([0.0, 0.1])
    assert led.grant(1.0) == []  # none back yet: nothing more


def test_a_return_frees_a_slot_and_the_spacing_holds_across_it() -> None:
    led = ledger()
    led.ask(A, 1, 100, 1, [], 7, 0.0)
    (first,) = led.grant(0.0)
    led.ask(A, 1, 100, 1, [first.grant_id], 7, 0.01)  # returned at once, the next wanted
    (second,) = led.grant(0.01)
    assert second.wait == pytest.approx(0.09)  # 0.1 after the first's start, not after its end


def test_first_come_first_served_between_holders() -> None:
    led = ledger(concurrency=1)
    led.ask(A, 1, 100, 1, [], 7, 0.0)
    led.ask(A, 2, 200, 1, [], 7, 0.0)
    (g1,) = led.grant(0.0)
    assert g1.holder == 1
    led.ask(A, 1, 100, 1, [g1.grant_id], 7, 0.2)  # holder 1 wants again: behind holder 2
    (g2,) = led.grant(0.2)
    assert g2.holder == 2


def test_an_unreturned_grant_expires_after_its_life() -> None:
    led = ledger(concurrency=1)
    led.ask(A, 1, 100, 1, [], 7, 0.0)
    led.grant(0.0)
    led.ask(A, 2, 200, 1, [], 7, 0.0)  # holder 1 was killed mid-fetch
    assert led.grant(10.0) == []
    assert led.next_due(10.0) == pytest.approx(10.5)
    (g,) = led.grant(10.5)
    assert g.holder == 2 and led.counts["address/expired"] == 1


def test_a_restarted_owner_grants_nothing_for_one_life() -> None:
    led = ledger(now=50.0, quiet=True)
    led.ask(A, 1, 100, 1, [], 7, 50.0)
    assert led.grant(50.0) == []
    assert led.grant(60.6) == []
    assert len(led.grant(60.7)) == 1  # 50 + life (0.5 + 10) + 2 x 0.1


def test_a_stale_holder_life_is_refused_and_its_wants_dropped() -> None:
    led = ledger(concurrency=1)
    led.ask(A, 1, 100, 1, [], 7, 0.0)
    (g,) = led.grant(0.0)
    assert led.ask(B, 1, 200, 1, [], 7, 0.1)  # holder 1 restarted (epoch 200)
    assert not led.ask(A, 1, 100, 1, [g.grant_id], 7, 0.2)
    assert led.counts["address/stale_asks"] == 1
    assert led.outstanding(A) == 1  # its old grant runs out, never freed by the old life


def test_returns_to_another_life_of_the_owner_are_ignored() -> None:
    led = ledger(concurrency=1)
    led.ask(A, 1, 100, 1, [], 7, 0.0)
    (g,) = led.grant(0.0)
    led.ask(A, 1, 100, 0, [g.grant_id], 6, 0.1)
    assert led.outstanding(A) == 1
    led.ask(A, 2, 300, 0, [g.grant_id], 7, 0.1)  # not its grant
    assert led.outstanding(A) == 1 and led.counts["address/unknown_returns"] == 1


def test_memory_holds_only_addresses_in_use() -> None:
    led = ledger()
    rng = random.Random(5)
    now = 0.0
    for _ in range(2000):
        now += 0.01
        address = f"10.0.{rng.randrange(256)}.{rng.randrange(256)}"
        led.ask(address, 1, 100, 1, [], 7, now)
        for g in led.grant(now):
            led.ask(g.address, 1, 100, 0, [g.grant_id], 7, now)
    led.grant(now + 1.0)
    assert len(led) == 0


def test_never_more_than_concurrency_nor_faster_than_the_delay_under_churn() -> None:
    """Random holders asking and returning at random: the grants' windows never overlap
    beyond the limits (seed 11, 3000 steps)."""
    led = ledger(concurrency=2, min_delay=0.1)
    rng = random.Random(11)
    now = 0.0
    out: list[Granted] = []
    holding: list[tuple[int, Granted]] = []
    starts: list[float] = []
    for _ in range(3000):
        now += rng.uniform(0.0, 0.05)
        holder = rng.randrange(4)
        if holding and rng.random() < 0.4:
            h, g = holding.pop(rng.randrange(len(holding)))
            led.ask(A, h, 1, rng.randrange(3), [g.grant_id], 7, now)
        else:
            led.ask(A, holder, 1, rng.randrange(1, 3), [], 7, now)
        for g in led.grant(now):
            out.append(g)
            holding.append((g.holder, g))
            starts.append(now + g.wait)
        assert led.outstanding(A) <= 2
    assert len(out) > 100
    starts.sort()
    assert min(b - a for a, b in zip(starts, starts[1:], strict=False)) >= 0.1 - 1e-9


def stock() -> AddressStock[str]:
    return AddressStock(concurrency=2, resend=1.0)


def test_a_lease_waits_for_a_grant_and_goes_in_its_window() -> None:
    st = stock()
    st.wait(A, 3, "h1", 0.0, host="h1")
    (ask,) = st.asks(0.0)
    assert (ask.owner, ask.address, ask.want, ask.returned) == (3, A, 1, ())
    assert st.take(0.0) == [] and st.waiting() == {A: 1}
    st.granted(3, 9, A, 41, 0.2, 0.5, 0.0)
    assert st.take(0.1) == []  # not before its time
    ((job, slot),) = st.take(0.2)
    assert job == "h1" and (slot.grant_id, slot.not_before, slot.start_by) == (41, 0.2, 0.7)
    st.done(slot, 0.3)
    (back,) = st.asks(0.3)
    assert back.returned == (41,) and back.want == 0 and back.owner_epoch == 9


def test_a_fetch_end_returns_its_grant_and_asks_the_next_in_one_ask() -> None:
    st = stock()
    for host in ("h1", "h2", "h3"):
        st.wait(A, 3, host, 0.0, host=host)
    assert st.asks(0.0)[0].want == 2
    st.granted(3, 9, A, 1, 0.0, 0.5, 0.0)
    st.granted(3, 9, A, 2, 0.1, 0.5, 0.0)
    ((_, s1),) = st.take(0.0)
    ((_, s2),) = st.take(0.1)
    st.done(s1, 0.15)
    (ask,) = st.asks(0.15)
    assert ask.returned == (1,) and ask.want == 2  # one in use, one waiting


def test_a_grant_past_its_window_goes_back_unused() -> None:
    st = stock()
    st.granted(3, 9, A, 5, 0.0, 0.5, 0.0)  # nobody waits for it
    assert st.take(0.1) == [] and st.asks(0.1) == []  # not looked at again before its end
    assert st.next_due(0.1) == 0.5
    assert st.take(0.6) == []
    (ask,) = st.asks(0.6)
    assert ask.returned == (5,) and st.counts["address/unused"] == 1
    assert st.asks(0.7) == [] and st.waiting() == {}


def test_a_spoiled_lease_waits_again_first_and_its_grant_goes_back() -> None:
    st = stock()
    st.wait(A, 3, "h1", 0.0, host="h1")
    st.wait(A, 3, "h2", 0.0, host="h2")
    st.asks(0.0)
    st.granted(3, 9, A, 5, 0.0, 0.5, 0.0)
    ((job, slot),) = st.take(0.0)
    st.spoiled(job, slot, 0.6)
    assert st.waiting() == {A: 2}
    (ask,) = st.asks(0.6)
    assert ask.returned == (5,)
    st.granted(3, 9, A, 6, 0.0, 0.5, 0.6)
    ((again, _),) = st.take(0.6)
    assert again == "h1"


def test_an_unanswered_ask_is_sent_again_after_resend() -> None:
    st = stock()
    st.wait(A, 3, "h1", 0.0, host="h1")
    assert len(st.asks(0.0)) == 1
    assert st.asks(0.5) == []
    assert [a.want for a in st.asks(1.0)] == [1]
    assert st.next_due(1.0) == pytest.approx(2.0)


def test_a_restarted_owner_s_old_grants_are_not_returned_to_it() -> None:
    st = stock()
    st.wait(A, 3, "h1", 0.0, host="h1")
    st.asks(0.0)
    st.granted(3, 9, A, 5, 0.0, 0.5, 0.0)
    ((_, slot),) = st.take(0.0)
    st.granted(3, 10, A, 1, 0.0, 0.5, 0.1)  # the owner's next life
    st.done(slot, 0.2)
    asks = st.asks(0.2)
    assert all(5 not in a.returned for a in asks)


def test_ask_and_grant_messages_round_trip() -> None:
    asks = [wire.AddressAsk(A, 2, 9, (1, 2), True), wire.AddressAsk("2001:db8::1", 0, 0, ())]
    message = wire.decode(wire.encode_address_asks(3, 2**63, asks))
    assert message == wire.AddressAsks(3, 2**63, tuple(asks))
    grants = [wire.AddressGrant(A, 5, 77, 0.25, 0.5), wire.AddressGrant(B, 5, 78, 0, 0.5, 0.1)]
    assert wire.decode(wire.encode_address_grants(1, 9, grants)) == wire.AddressGrants(
        1, 9, tuple(grants))


@pytest.mark.parametrize("body", [
    b'{"asks": [["192.0.2.1", -1, 0, [], false]]}',
    b'{"asks": [["192.0.2.1", 1, 0, [true], false]]}',
    b'{"asks": [["", 1, 0, [], false]]}',
    b'{"asks": [["192.0.2.1", 1, 0, []]]}',
    b'{"asks": [["192.0.2.1", 1, 0, [], 1]]}',
    b'{"asks": [], "more": 1}',
    b'{"grants": [["192.0.2.1", 1, 2, 0.1, 0.5, 0]]}',
])
def test_a_malformed_ask_is_a_wire_error(body: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode([wire.KIND_ADDRASK, b"\0\1" + b"\0" * 8, body])


@pytest.mark.parametrize("body", [
    b'{"grants": [["192.0.2.1", 1, 2, -0.1, 0.5, 0]]}',
    b'{"grants": [["192.0.2.1", 1, 2, 1e9, 0.5, 0]]}',
    b'{"grants": [["192.0.2.1", 1, 2, "0", 0.5, 0]]}',
    b'{"grants": [["192.0.2.1", 1, 2, 0, 0.5, -1]]}',
    b'{"grants": [["192.0.2.1", 1, 2, 0, 0.5]]}',
])
def test_a_malformed_grant_is_a_wire_error(body: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode([wire.KIND_ADDRGRANT, b"\0\1" + b"\0" * 8, body])



def test_resolve_entries_read_a_file_of_many_names_to_many_addresses(tmp_path: Path) -> None:
    names = tmp_path / "names.txt"
    names.write_text("# a shared server\na.test=192.0.2.1\n\nb.test = 192.0.2.1 # too\n"
                     "*.c.test=192.0.2.2,2001:db8::1\n")
    assert resolve_entries(["x.test=192.0.2.9", f"@{names}"]) == [
        "x.test=192.0.2.9", "a.test=192.0.2.1", "b.test = 192.0.2.1",
        "*.c.test=192.0.2.2,2001:db8::1"]
    names.write_text("a.test=192.0.2.1\nb.test=999.0.0.1\n")
    with pytest.raises(ConfigError, match=r"names.txt:2: dns.resolve: bad address '999.0.0.1'"):
        resolve_entries([f"@{names}"])
    with pytest.raises(ConfigError, match="cannot read"):
        resolve_entries([f"@{tmp_path / 'missing'}"])


def test_a_remote_address_keeps_one_grant_in_reserve_after_a_fetch() -> None:
    """At another worker's address, a fetch's end asks for a grant more than the leases
    waiting, for ``reserve`` seconds: the host's next lease finds it in hand."""
    st: AddressStock[str] = AddressStock(concurrency=2, resend=1.0, me=0, reserve=0.5)
    st.wait(A, 3, "h1", 0.0, host="h1")
    st.asks(0.0)
    st.granted(3, 9, A, 1, 0.0, 0.5, 0.0)
    ((_, slot),) = st.take(0.0)
    st.done(slot, 0.1)
    (ask,) = st.asks(0.1)
    assert ask.returned == (1,) and ask.want == 1  # the reserve
    st.granted(3, 9, A, 2, 0.0, 0.5, 0.11)
    st.wait(A, 3, "h1", 0.13, host="h1")  # its next lease, after its delay
    ((job, reserved),) = st.take(0.13)
    assert job == "h1" and reserved.grant_id == 2
    st.done(reserved, 0.15)
    st.asks(0.15)
    st.granted(3, 9, A, 3, 0.0, 0.5, 0.16)
    assert st.take(0.7) == []  # nobody came: the reserve goes back, and no more is asked
    (back,) = st.asks(0.7)
    assert back.returned == (3,) and back.want == 0


def test_an_own_address_keeps_no_reserve() -> None:
    st: AddressStock[str] = AddressStock(concurrency=2, resend=1.0, me=3, reserve=0.5)
    st.wait(A, 3, "h1", 0.0, host="h1")
    st.asks(0.0)
    st.granted(3, 9, A, 1, 0.0, 0.5, 0.0)
    ((_, slot),) = st.take(0.0)
    st.done(slot, 0.1)
    (ask,) = st.asks(0.1)
    assert ask.want == 0


def test_a_dropped_owner_s_addresses_pass_to_a_live_one_and_are_asked_afresh() -> None:
    st = stock()
    st.wait(A, 3, "h1", 0.0, host="h1")
    st.wait("10.0.0.9", 1, "h2", 0.0, host="h2")
    st.asks(0.0)
    st.granted(3, 9, A, 1, 5.0, 0.5, 0.0)  # in hand from the owner that is gone
    assert st.reown(lambda address: 2 if address == A else 1) == 1
    (ask,) = st.asks(0.1)  # only the moved address asks again, of its new owner
    assert (ask.owner, ask.address, ask.want, ask.owner_epoch, ask.returned) == (2, A, 1, 0, ())
    assert st.take(5.0) == []  # the old owner's grant is forgotten
    st.granted(2, 4, A, 7, 0.0, 0.5, 5.0)
    ((job, slot),) = st.take(5.0)
    assert job == "h1" and slot.owner == 2


def test_a_lone_holder_of_one_host_gets_a_window_and_the_next_grant_waits_its_end() -> None:
    led = ledger()
    led.ask(A, 1, 100, 1, [], 7, 0.0, single=True)
    (window,) = led.grant(0.0)
    assert window.every == pytest.approx(0.1) and window.hold == 0.5
    led.ask(A, 2, 200, 1, [], 7, 0.1, single=True)  # another holder: behind the window's end
    (after,) = led.grant(0.1)
    assert after.every == 0.0 and after.wait == pytest.approx(0.5 + 0.1 - 0.1)
    led.ask(B, 1, 100, 2, [], 7, 0.0, single=True)  # wants two: one start each
    led.ask(B + "0", 1, 100, 1, [], 7, 0.0)  # has seen more than one host there
    assert {g.every for g in led.grant(0.0)} == {0.0}


def test_a_window_is_used_again_every_apart_without_an_ask_and_goes_back_at_its_end() -> None:
    st: AddressStock[str] = AddressStock(concurrency=2, resend=1.0, me=0, reserve=0.5)
    st.wait(A, 3, "h1", 0.0, host="h1")
    (ask,) = st.asks(0.0)
    assert ask.single and ask.want == 1
    st.granted(3, 9, A, 1, 0.0, 0.5, 0.0, every=0.1)
    ((_, slot),) = st.take(0.0)
    st.done(slot, 0.03, started=0.01)
    assert st.asks(0.03) == []  # back in hand: nothing to return, nothing to ask
    st.wait(A, 3, "h1", 0.05, host="h1")
    assert st.take(0.1) == []  # 0.1 after the last start, not before
    ((_, again),) = st.take(0.11)
    assert again.grant_id == 1 and st.asks(0.11) == []
    st.done(again, 0.2, started=0.11)
    st.wait(A, 3, "h2", 0.3, host="h2")  # a second host at the address: the window serves it
    ((job, third),) = st.take(0.3)
    assert job == "h2" and st.asks(0.3) == []
    st.done(third, 0.35, started=0.3)
    assert st.take(0.51) == []  # past its start_by: it goes back, used
    (back,) = st.asks(0.51)
    assert back.returned == (1,) and st.counts["address/unused"] == 0
    assert not back.single  # the next grant there is one start


def test_a_lone_host_at_a_remote_address_costs_an_ask_a_window_not_a_fetch() -> None:
    """One host at another worker's address, fetching as fast as its 0.02 s delay allows
    for 10 s: the asks sent are a window's (0.5 s), not a fetch's."""
    led = ledger(min_delay=0.02)
    st: AddressStock[str] = AddressStock(concurrency=2, resend=1.0, me=0, reserve=0.5)
    now, fetches, asks = 0.0, 0, 0
    st.wait(A, 3, "h1", now, host="h1")
    while now < 10.0:
        for ask in st.asks(now):
            asks += 1
            led.ask(A, 0, 1, ask.want, list(ask.returned), ask.owner_epoch, now,
                    single=ask.single)
        for g in led.grant(now):
            st.granted(3, 7, A, g.grant_id, g.wait, g.hold, now, g.every)
        for _, slot in st.take(now):
            fetches += 1
            st.done(slot, now + 0.005, started=now)
            st.wait(A, 3, "h1", now + 0.025, host="h1")
        now += 0.005
    assert fetches > 300
    assert asks < 2 * 10.0 / 0.5 + 2


def test_windows_and_one_start_grants_mixed_keep_both_limits_at_the_address() -> None:
    """Three holders, some with one host at the address (windows), some with two, leases
    coming and fetches ending at random (seed 5, 20 s in 5 ms steps): the times granted (a
    one-start grant's ``not_before``, each start in a window) at least ``min_delay`` apart,
    at most ``(1 + hold) / min_delay + 1`` starts in any second, at most ``concurrency`` in
    flight."""
    rng = random.Random(5)
    led = ledger(concurrency=2, min_delay=0.1)
    stocks = [AddressStock[str](concurrency=2, resend=1.0, me=h, reserve=0.5) for h in range(3)]
    hosts = [["a"], ["b", "c"], ["d"]]
    running: list[tuple[float, float, int, Slot]] = []  # (ends, started, holder, slot)
    queued: set[tuple[int, str]] = set()
    starts: list[float] = []
    granted: list[float] = []
    now = 0.0
    while now < 20.0:
        for ends, started, h, slot in [r for r in running if r[0] <= now]:
            running.remove((ends, started, h, slot))
            stocks[h].done(slot, now, started=started)
        for h, names in enumerate(hosts):
            busy = int(now / 2) % 3 == h or rng.random() < 0.01  # each holder has its turn
            for name in names:
                if busy and (h, name) not in queued and rng.random() < 0.05:
                    queued.add((h, name))
                    stocks[h].wait(A, 9, name, now, host=name)
            for ask in stocks[h].asks(now):
                led.ask(A, h, 1, ask.want, list(ask.returned), ask.owner_epoch, now,
                        single=ask.single)
        for g in led.grant(now):
            stocks[g.holder].granted(9, 7, A, g.grant_id, g.wait, g.hold, now, g.every)
        for h in range(3):
            for name, slot in stocks[h].take(now):
                queued.discard((h, name))
                starts.append(now)
                granted.append(now if slot.every else slot.not_before)
                running.append((now + rng.uniform(0.001, 0.3), now, h, slot))
        assert len(running) <= 2
        now += 0.005
    assert len(starts) > 100 and led.counts["address/windows"] > 5
    granted.sort()
    assert min(b - a for a, b in zip(granted, granted[1:], strict=False)) >= 0.1 - 1e-9
    assert max(sum(1 for t in starts if s <= t < s + 1.0) for s in starts) <= 16
