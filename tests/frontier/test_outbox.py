"""The outbox keeps a batch until every part is acknowledged, resends, and quarantines poison."""

from __future__ import annotations

from pathlib import Path

from hive.frontier.store import U64, Store
from hive.outbox import Outbox, RecentLinks
from hive.record import UrlRecord
from hive.wire import decode_records


def records(n: int) -> list[UrlRecord]:
    return [UrlRecord(f"http://h{i % 3}.test/{i}", f"h{i % 3}.test", depth=1) for i in range(n)]


def test_acknowledged_in_parts_then_gone(tmp_path: Path) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    seq = outbox.put(records(4))
    store.commit(0.0)
    (sent_seq, data), = outbox.due(0.0)
    assert sent_seq == seq and list(decode_records(data)) == records(4)
    assert outbox.due(1.0) == []
    assert not outbox.ack(seq, 0, 2)
    assert not outbox.ack(seq, 0, 2)
    assert outbox.ack(seq, 1, 2)
    assert len(outbox) == 0 and store.get("outbox", U64.pack(seq)) is None
    assert not outbox.ack(seq, 1, 2), "a late duplicate ack is harmless"
    store.close(0.0)


def test_resent_with_backoff_then_quarantined(tmp_path: Path) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    seq = outbox.put(records(2))
    sends = [now for now in (0.0, 4.9, 5.0, 9.9, 15.0, 40.0) if outbox.due(now)]
    assert sends == [0.0, 5.0, 15.0]
    assert outbox.due(100.0) == []
    assert len(outbox) == 0 and outbox.counts["outbox/quarantined"] == 1
    reason, _, data = (store.get("quarantine", U64.pack(seq)) or b"").partition(b"\0")
    assert reason == b"unacknowledged after 3 sends" and len(decode_records(data)) == 2
    store.close(0.0)


def test_reopen_sends_everything_again(tmp_path: Path) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    first = outbox.put(records(1))
    outbox.put(records(2))
    store.commit(0.0)
    outbox.due(0.0)
    outbox.ack(first, 0, 1)
    store.commit(0.0)
    store.close(0.0)
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    assert [seq for seq, _ in outbox.due(0.0)] == [first + 1]
    assert outbox.put(records(1)) == first + 2, "sequence numbers are never reused"
    store.close(0.0)


def test_recent_links_remember_between_half_and_all_of_their_size() -> None:
    urls = [f"http://a.test/{i}" for i in range(6)]
    recent = RecentLinks(4)
    for url in urls:
        recent.add(url)
    assert not any(url in recent for url in urls[:4]), "forgotten after two generations"
    assert all(url in recent for url in urls[4:]), "the last size / 2 are always there"


def test_recent_links_keep_what_is_touched() -> None:
    urls = [f"http://a.test/{i}" for i in range(4)]
    recent = RecentLinks(4)
    recent.add(urls[0])
    recent.add(urls[1])
    assert urls[0] in recent, "a hit in the old generation moves it to the young one"
    recent.add(urls[2])
    recent.add(urls[3])
    assert urls[0] in recent
    assert urls[1] not in recent
