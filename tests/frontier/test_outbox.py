"""The outbox keeps a batch until every part is acknowledged, resends, and quarantines poison."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive.core import wire
from hive.core.record import UrlRecord
from hive.core.wire import MAX_RECORDS, WireError, decode_records, encode_records
from hive.procs.outbox import (
    MAX_BATCH_BYTES,
    MAX_RESEND,
    Outbox,
    quarantined,
    replay_quarantine,
)
from hive.storage.schema import U64
from hive.storage.store import Store


def records(n: int) -> list[UrlRecord]:
    return [UrlRecord(f"http://h{i % 3}.test/{i}", f"h{i % 3}.test", depth=1) for i in range(n)]


def test_acknowledged_in_parts_then_gone(tmp_path: Path) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    seq = outbox.put(records(4), 0.0)
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


def test_a_slow_owner_is_resent_to_at_a_capped_interval_and_never_given_up(
    tmp_path: Path,
) -> None:
    """A worker paused for minutes made its peers quarantine healthy batches after 8 sends."""
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    seq = outbox.put(records(2), 0.0)
    times = (0.0, 4.9, 5.0, 14.9, 15.0, 34.9, 35.0, 74.9, 75.0, 134.9, 135.0, 194.9, 195.0)
    sends = [now for now in times if outbox.due(now)]
    assert sends == [0.0, 5.0, 15.0, 35.0, 75.0, 135.0, 195.0], "doubling, capped at a minute"
    for hour in range(1, 11):
        assert [s for s, _ in outbox.due(195.0 + 3600 * hour)] == [seq]
    assert outbox.counts["outbox/overdue"] == 1, "counted (and logged) once, when overdue"
    assert outbox.counts["outbox/quarantined"] == 0 and len(outbox) == 1
    assert outbox.next_due() == 195.0 + 36000 + MAX_RESEND
    assert outbox.ack(seq, 0, 1) and len(outbox) == 0
    store.close(0.0)


def test_a_batch_that_no_longer_decodes_is_quarantined_and_replay_keeps_it(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    good, bad = outbox.put(records(2), 0.0), outbox.put(records(3), 10.0)
    store.put("outbox", U64.pack(bad), b"\xff" * 9)  # what a damaged disk gives back
    store.close(0.0)
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    assert [seq for seq, _ in outbox.due(20.0)] == [good]
    assert outbox.counts["outbox/quarantined"] == 1 and len(outbox) == 1
    (seq, reason, size), = quarantined(store)
    assert seq == bad and reason.startswith("does not decode") and size == 9
    replayed, left = replay_quarantine(store)
    assert replayed == 0 and [s for s, _ in left] == [bad]
    store.close(0.0)


def test_replay_puts_quarantined_batches_that_decode_back_in_the_outbox(tmp_path: Path) -> None:
    """Batches an older hive quarantined as 'unacknowledged' are healthy: replay sends them."""
    store = Store(tmp_path, sync_interval=0.0)
    Outbox(store, resend_after=5.0, max_tries=3)
    data = encode_records(records(4))
    store.put("quarantine", U64.pack(7), b"unacknowledged after 8 sends\0" + data)
    assert replay_quarantine(store) == (1, [])
    assert quarantined(store) == []
    store.close(0.0)
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    assert outbox.due(0.0) == [(7, data)]
    store.close(0.0)


def test_reopen_sends_everything_again(tmp_path: Path) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    first = outbox.put(records(1), 0.0)
    outbox.put(records(2), 0.0)
    store.commit(0.0)
    outbox.due(0.0)
    outbox.ack(first, 0, 1)
    store.commit(0.0)
    store.close(0.0)
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    assert [seq for seq, _ in outbox.due(0.0)] == [first + 1]
    assert outbox.put(records(1), 0.0) == first + 2, "sequence numbers are never reused"
    store.close(0.0)


def test_pages_within_the_window_share_one_batch_sent_when_it_closes(tmp_path: Path) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3, window=0.05)
    first, second = records(5)[:2], records(5)[2:]
    seq = outbox.put(first, 10.0)
    assert outbox.put(second, 10.04) == seq, "within the window: the same batch"
    store.commit(10.04)
    assert outbox.due(10.04) == [], "the open batch waits for its window"
    assert outbox.next_due() == 10.05
    (sent_seq, data), = outbox.due(10.05)
    assert sent_seq == seq and decode_records(data) == records(5)
    assert outbox.put(records(1), 10.06) == seq + 1, "a closed batch takes no more"
    store.close(10.06)


def test_a_crash_inside_the_window_keeps_what_was_committed(tmp_path: Path) -> None:
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3, window=1.0)
    seq = outbox.put(records(2), 0.0)
    store.commit(0.0)
    outbox.put(records(4)[2:], 0.5)
    store.abandon()
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3, window=1.0)
    (sent_seq, data), = outbox.due(0.6)
    assert sent_seq == seq and decode_records(data) == records(2), "the uncommitted part is gone"
    store.close(0.6)


def test_more_links_than_a_message_carries_go_in_as_many_batches(tmp_path: Path) -> None:
    """A page of 250,001 in-scope links (over the wire's 100,000 records and the batch's
    bytes): every link is kept, in order, in batches a peer can decode."""
    store = Store(tmp_path, sync_interval=0.0, map_size_mb=256)
    outbox = Outbox(store, resend_after=5.0, max_tries=3, window=0.05)
    page = [
        UrlRecord(f"http://h.test/{i}", "h.test", 1, "http://h.test/") for i in range(250_001)
    ]
    outbox.put(page, 0.0)
    store.commit(0.0)
    batches = outbox.due(1.0)
    assert len(batches) > 250_001 // MAX_RECORDS
    kept = []
    for seq, data in batches:
        assert len(data) <= MAX_BATCH_BYTES
        message = wire.decode(wire.encode_batch_data(0, seq, data))
        assert isinstance(message, wire.Batch)
        kept += message.records
    assert kept == page
    store.close(1.0)


def test_links_the_wire_refuses_are_refused_whole(tmp_path: Path) -> None:
    """A record no peer could decode fails the put before anything of it is kept, so
    the caller can leave the page undone rather than lose part of its links."""
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    with pytest.raises(WireError):
        outbox.put([*records(MAX_RECORDS + 5), UrlRecord("http://h.test/\0", "h.test")], 0.0)
    assert len(outbox) == 0 and store.entries("outbox") == 0 and outbox.due(1.0) == []
    store.close(1.0)


def test_discard_takes_a_dropped_owner_s_records_out_and_resends_the_rest_anew(
        tmp_path: Path) -> None:
    """A machine dropped for good: its records leave every batch (returned, to be counted);
    the rest go again as a new batch, which the old cut's acknowledgements do not clear."""
    store = Store(tmp_path, sync_interval=0.0)
    outbox = Outbox(store, resend_after=5.0, max_tries=3)
    mixed = outbox.put(records(6), 0.0)
    only_kept = outbox.put([UrlRecord("http://h0.test/x", "h0.test", depth=1)], 0.0)
    store.commit(0.0)
    assert [seq for seq, _ in outbox.due(0.0)] == [mixed, only_kept]
    taken = [r for gone in outbox.discard(lambda r: r.host_key == "h2.test", 1.0) for r in gone]
    store.commit(1.0)
    assert [r.url for r in taken] == ["http://h2.test/2", "http://h2.test/5"]
    assert store.get("outbox", U64.pack(mixed)) is None and outbox.counts["outbox/discarded"] == 1
    assert not outbox.ack(mixed, 0, 2) and not outbox.ack(mixed, 1, 2)  # the old cut's
    (resent, data), = outbox.due(1.0)
    assert resent > only_kept
    assert [r.host_key for r in decode_records(data)] == ["h0.test", "h1.test"] * 2
    assert set(outbox.pending) == {only_kept, resent}
    assert list(outbox.discard(lambda r: r.host_key == "h2.test", 2.0)) == []  # nothing twice
    store.close(2.0)
    reopened = Outbox(Store(tmp_path, sync_interval=0.0), resend_after=5.0, max_tries=3)
    assert set(reopened.pending) == {only_kept, resent}
    reopened.store.close(3.0)
