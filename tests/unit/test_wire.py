"""The wire format: every kind round-trips; anything malformed is a WireError, nothing else."""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.core import wire
from hive.core.record import UrlRecord
from hive.core.wire import (
    MAX_FRAME_BYTES,
    MAX_RECORDS,
    MAX_SEQ,
    SUPERVISOR_ORIGIN,
    Ack,
    Admit,
    Batch,
    Command,
    Stats,
    WireError,
    decode,
    encode_ack,
    encode_admit,
    encode_admit_data,
    encode_batch,
    encode_batch_data,
    encode_command,
    encode_records,
    encode_stats,
)
from hive.errors import HiveError

U32 = struct.Struct(">I")
KINDS = [b"BATCH", b"ADMIT", b"ACK", b"STATS", b"COMMAND"]


def rec(
    url: str = "http://a.example/x", host_key: str = "http://a.example", **kw: Any
) -> UrlRecord:
    return UrlRecord(url, host_key, **kw)


def records_frame(*payloads: bytes, count: int | None = None) -> bytes:
    """A records frame from raw record payloads, with an optionally lying count."""
    body = b"".join(U32.pack(len(p)) + p for p in payloads)
    return U32.pack(len(payloads) if count is None else count) + body


RECORDS = (
    rec(),
    rec("http://a.example/é?q=1", depth=3, via="http://a.example/", hops=1, attempts=2, hint=5),
    rec("https://b.example:8443/", "https://b.example:8443", depth=65535, hint=255),
    rec("http://a.example/s.css", via="http://a.example/", hint=1, path="LLE"),
    rec("http://a.example/f.woff", path="12+LLLLLLLLLLLLEEE"),
)


# --- round trips -------------------------------------------------------------------------------


def test_every_frame_is_bytes() -> None:
    messages = [
        encode_batch(1, 2, RECORDS),
        encode_admit(1, 2, 0, 1, RECORDS),
        encode_ack(1, 2, 0, 1),
        encode_stats(3, {"fetch/ok": 1}),
        encode_command("stop"),
    ]
    for frames in messages:
        assert all(type(frame) is bytes for frame in frames)
    assert [frames[0] for frames in messages] == KINDS


def test_batch_round_trips() -> None:
    assert decode(encode_batch(7, MAX_SEQ, RECORDS)) == Batch(7, MAX_SEQ, RECORDS)
    assert decode(encode_batch(SUPERVISOR_ORIGIN, 0, [])) == Batch(SUPERVISOR_ORIGIN, 0, ())


def test_admit_round_trips() -> None:
    assert decode(encode_admit(3, 99, 2, 5, RECORDS)) == Admit(3, 99, 2, 5, RECORDS)
    assert decode(encode_admit(0, 0, 65534, 65535, [])) == Admit(0, 0, 65534, 65535, ())


def test_ack_round_trips() -> None:
    assert decode(encode_ack(SUPERVISOR_ORIGIN, 12, 0, 1)) == Ack(SUPERVISOR_ORIGIN, 12, 0, 1)


def test_epochs_round_trip_with_their_sender() -> None:
    """A cluster's messages carry their sender and its machine's epoch (hive/procs/fence.py);
    epoch 0 adds no frame, so one machine's messages are as before."""
    data = encode_records(RECORDS)
    assert decode(encode_ack(3, 12, 0, 1, 7, 5)) == Ack(3, 12, 0, 1, 7, 5)
    assert decode(encode_admit_data(3, 9, 1, 2, [r.encode() for r in RECORDS], 2**32 - 1, 3)) \
        == Admit(3, 9, 1, 2, RECORDS, 2**32 - 1, 3)
    assert decode(encode_batch_data(3, 9, data, 4, 3)) == Batch(3, 9, RECORDS, 4, 3)
    assert len(encode_ack(3, 12, 0, 1, 0, 5)) == 2
    with pytest.raises(WireError):
        encode_ack(3, 12, 0, 1, 2**32, 5)


def test_stats_round_trip() -> None:
    values = {"frontier/admitted": 10, "fetch/seconds": 1.5, "idle": True, "rss": None}
    assert decode(encode_stats(4, values)) == Stats(4, values)
    assert decode(encode_stats(0, {})) == Stats(0, {})


def test_command_round_trips() -> None:
    assert decode(encode_command("stop")) == Command("stop", {})
    deny = encode_command("deny", {"patterns": ["*.example", "é"], "n": 2})
    assert decode(deny) == Command("deny", {"patterns": ["*.example", "é"], "n": 2})


def test_a_kept_records_frame_is_sent_as_is() -> None:
    data = encode_records(RECORDS)
    assert wire.decode_records(data) == list(RECORDS)
    frames = encode_batch_data(SUPERVISOR_ORIGIN, 5, data)
    assert frames == encode_batch(SUPERVISOR_ORIGIN, 5, RECORDS)
    assert decode(frames) == Batch(SUPERVISOR_ORIGIN, 5, RECORDS)
    with pytest.raises(WireError, match="bad_field"):
        encode_batch_data(SUPERVISOR_ORIGIN + 1, 5, data)
    with pytest.raises(WireError, match="truncated"):
        wire.decode_records(data[:-1])


def test_concatenated_records_frames_hold_both() -> None:
    joined = wire.concat_records(encode_records(RECORDS[:1]), encode_records(RECORDS[1:]))
    assert joined == encode_records(RECORDS)
    assert wire.concat_records(encode_records([]), joined) == joined


def test_messages_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Ack(1, 2, 0, 1).seq = 3  # type: ignore[misc]


def test_wire_error_is_a_hive_error_and_a_value_error() -> None:
    error = WireError("truncated", "at 4")
    assert isinstance(error, HiveError) and isinstance(error, ValueError)
    assert error.reason == "truncated" and str(error) == "truncated: at 4"


def test_max_records_is_accepted_and_one_more_refused() -> None:
    many = [rec()] * MAX_RECORDS
    assert len(decode(encode_batch(0, 0, many)).records) == MAX_RECORDS  # type: ignore[union-attr]
    with pytest.raises(WireError, match="too_many_records"):
        encode_batch(0, 0, [*many, rec()])


text = st.text(st.characters(codec="utf-8", exclude_characters="\0"))
url_records = st.builds(
    UrlRecord,
    url=text.filter(bool),
    host_key=text.filter(bool),
    depth=st.integers(0, 0xFFFF),
    via=text,
    hops=st.integers(0, 0xFF),
    attempts=st.integers(0, 0xFF),
    hint=st.integers(0, 0xFF),
    path=text,
)


@settings(max_examples=100, deadline=None)
@given(
    origin=st.integers(0, 0xFFFF),
    seq=st.integers(0, MAX_SEQ),
    parts=st.integers(1, 0xFFFF),
    data=st.data(),
    records=st.lists(url_records, max_size=20),
)
def test_any_valid_message_round_trips(
    origin: int, seq: int, parts: int, data: st.DataObject, records: list[UrlRecord]
) -> None:
    part = data.draw(st.integers(0, parts - 1))
    assert decode(encode_batch(origin, seq, records)) == Batch(origin, seq, tuple(records))
    admit = decode(encode_admit(origin, seq, part, parts, records))
    assert admit == Admit(origin, seq, part, parts, tuple(records))
    assert decode(encode_ack(origin, seq, part, parts)) == Ack(origin, seq, part, parts)


# --- encoders refuse what no peer could read ---------------------------------------------------


@pytest.mark.parametrize(
    "encode",
    [
        lambda: encode_batch(-1, 0, []),
        lambda: encode_batch(65536, 0, []),
        lambda: encode_batch(0, MAX_SEQ + 1, []),
        lambda: encode_batch(True, 0, []),
        lambda: encode_admit(0, 0, 1, 1, []),
        lambda: encode_admit(0, 0, 0, 0, []),
        lambda: encode_ack(0, 0, 65535, 65535),
        lambda: encode_ack(0, 0, 0, 65536),
        lambda: encode_ack(0, -1, 0, 1),
        lambda: encode_stats(65536, {}),
    ],
)
def test_encoders_refuse_out_of_range_fields(encode: Any) -> None:
    with pytest.raises(WireError, match="bad_field"):
        encode()


@pytest.mark.parametrize(
    "record",
    [
        rec(url=""),
        rec(host_key=""),
        rec(url="http://a.example/\0x"),
        rec(host_key="a\0b"),
        rec(via="v\0"),
        rec(via="v\0", path="L"),
        rec(path="L\0E"),
        rec(url="http://a.example/\udc80"),
        rec(depth=-1),
        rec(hint=-3),
    ],
)
def test_encoders_refuse_records_that_would_not_decode(record: UrlRecord) -> None:
    with pytest.raises(WireError, match="bad_record"):
        encode_batch(0, 0, [rec(), record])
    with pytest.raises(WireError, match="bad_record"):
        encode_admit(0, 0, 0, 1, [record])


@pytest.mark.parametrize(
    "values",
    [
        {"a": "text"},
        {"a": [1]},
        {"a": {"b": 1}},
        {"a": float("nan")},
        {"a": float("inf")},
        {1: 2},
    ],
)
def test_encode_stats_refuses_anything_but_finite_scalars(values: Any) -> None:
    with pytest.raises(WireError, match="bad_stats"):
        encode_stats(0, values)


def test_encode_command_refuses_bad_commands() -> None:
    with pytest.raises(WireError, match="bad_command"):
        encode_command("")
    with pytest.raises(WireError, match="bad_command"):
        encode_command(5)  # type: ignore[arg-type]
    with pytest.raises(WireError, match="bad_command"):
        encode_command("stop", {"cmd": "other"})
    with pytest.raises(WireError, match="bad_json"):
        encode_command("deny", {"patterns": {1, 2}})
    with pytest.raises(WireError, match="bad_json"):
        encode_command("deny", {"x": float("nan")})
    with pytest.raises(WireError, match="bad_json"):
        encode_command("deny", {"x": "\ud800"})


def test_encoders_refuse_oversized_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_FRAME_BYTES", 1000)
    big = rec(url="http://a.example/" + "x" * 600)
    assert decode(encode_batch(0, 0, [big])) == Batch(0, 0, (big,))
    with pytest.raises(WireError, match="frame_too_large"):
        encode_batch(0, 0, [big, big])
    with pytest.raises(WireError, match="frame_too_large"):
        encode_batch_data(0, 0, b"\0" * 1001)
    with pytest.raises(WireError, match="frame_too_large"):
        encode_command("deny", {"patterns": ["x" * 1000]})


# --- decode refuses the malformed --------------------------------------------------------------

HEAD = struct.pack(">HQ", 1, 2)
PART = struct.pack(">HQHH", 1, 2, 0, 1)
GOOD = rec().encode()

MALFORMED: list[tuple[str, list[bytes]]] = [
    ("no_frames", []),
    ("unknown_kind", [b""]),
    ("unknown_kind", [b"batch", HEAD, records_frame()]),
    ("unknown_kind", [b"PICKLE", b"\x80\x04"]),
    ("frame_count", [b"BATCH"]),
    ("frame_count", [b"BATCH", HEAD]),
    ("bad_header", [b"BATCH", HEAD, records_frame(), b""]),
    ("bad_header", [b"ACK", PART, b""]),
    ("frame_count", [b"BATCH", HEAD, records_frame(), struct.pack(">HI", 1, 1), b""]),
    ("frame_count", [b"ACK", PART, struct.pack(">HI", 1, 1), b""]),
    ("bad_epoch", [b"ADMIT", PART, records_frame(), struct.pack(">HI", 1, 0)]),
    ("bad_epoch", [b"ACK", PART, struct.pack(">HI", 1, 0)]),
    ("frame_count", [b"COMMAND"]),
    ("bad_header", [b"BATCH", HEAD[:-1], records_frame()]),
    ("bad_header", [b"BATCH", HEAD + b"\0", records_frame()]),
    ("bad_header", [b"ADMIT", HEAD, records_frame()]),
    ("bad_header", [b"ADMIT", struct.pack(">HQHH", 1, 2, 1, 1), records_frame()]),
    ("bad_header", [b"ACK", struct.pack(">HQHH", 1, 2, 0, 0)]),
    ("bad_header", [b"STATS", b"\0", b"{}"]),
    ("truncated", [b"BATCH", HEAD, b""]),
    ("truncated", [b"BATCH", HEAD, b"\0\0\0"]),
    ("truncated", [b"BATCH", HEAD, records_frame(GOOD, count=2)]),
    ("too_many_records", [b"BATCH", HEAD, records_frame(count=0xFFFFFFFF)]),
    ("truncated", [b"BATCH", HEAD, U32.pack(1) + U32.pack(len(GOOD) + 1) + GOOD]),
    ("truncated", [b"BATCH", HEAD, records_frame(GOOD, count=2) + U32.pack(0xFFFFFFFF)]),
    ("truncated", [b"ADMIT", PART, U32.pack(1) + U32.pack(len(GOOD))]),
    ("too_many_records", [b"BATCH", HEAD, U32.pack(MAX_RECORDS + 1) + b"\0" * 4 * MAX_RECORDS]),
    ("trailing_bytes", [b"BATCH", HEAD, records_frame(GOOD) + b"\0"]),
    ("trailing_bytes", [b"BATCH", HEAD, records_frame(GOOD, count=0)]),
    ("bad_record", [b"BATCH", HEAD, records_frame(b"")]),
    ("bad_record", [b"BATCH", HEAD, records_frame(b"\0\0\0\0\0url\0host")]),
    ("bad_record", [b"BATCH", HEAD, records_frame(b"\0\0\0\0\0url\0host\0via\0LE\0more")]),
    ("bad_record", [b"BATCH", HEAD, records_frame(b"\0\0\0\0\0url\0host\0via\0")]),
    ("bad_record", [b"BATCH", HEAD, records_frame(b"\0\0\0\0\0\0host\0")]),
    ("bad_record", [b"ADMIT", PART, records_frame(GOOD, b"\0\0\0\0\0\xffurl\0host\0")]),
    ("bad_json", [b"STATS", b"\0\1", b""]),
    ("bad_json", [b"STATS", b"\0\1", b"\xff{}"]),
    ("bad_json", [b"STATS", b"\0\1", "{}".encode("utf-16")]),
    ("bad_json", [b"STATS", b"\0\1", b"[1]"]),
    ("bad_json", [b"STATS", b"\0\1", b'{"a": NaN}']),
    ("bad_json", [b"STATS", b"\0\1", b'{"a": -Infinity}']),
    ("bad_json", [b"STATS", b"\0\1", b'{"a": 1e999}']),
    ("bad_json", [b"STATS", b"\0\1", b'{"a": ' + b"1" * 5000 + b"}"]),
    ("bad_json", [b"STATS", b"\0\1", b'{"\\ud800": 1}']),
    ("bad_json", [b"COMMAND", b"[" * 100_000]),
    ("bad_json", [b"COMMAND", b'{"cmd": "stop"']),
    ("bad_json", [b"COMMAND", b'"stop"']),
    ("bad_stats", [b"STATS", b"\0\1", b'{"a": "1"}']),
    ("bad_stats", [b"STATS", b"\0\1", b'{"a": [1]}']),
    ("bad_stats", [b"STATS", b"\0\1", b'{"a": {}}']),
    ("bad_command", [b"COMMAND", b"{}"]),
    ("bad_command", [b"COMMAND", b'{"cmd": ""}']),
    ("bad_command", [b"COMMAND", b'{"cmd": 1}']),
    ("bad_command", [b"COMMAND", b'{"cmd": null, "patterns": []}']),
]


@pytest.mark.parametrize(("reason", "frames"), MALFORMED)
def test_decode_refuses_malformed_messages(reason: str, frames: list[bytes]) -> None:
    with pytest.raises(WireError) as caught:
        decode(frames)
    assert caught.value.reason == reason


def test_decode_refuses_frames_over_the_cap() -> None:
    huge = b"\0" * (MAX_FRAME_BYTES + 1)
    for frames in ([b"BATCH", HEAD, huge], [huge], [b"COMMAND", huge]):
        with pytest.raises(WireError) as caught:
            decode(frames)
        assert caught.value.reason == "frame_too_large"


def test_decode_refuses_every_truncation_of_a_valid_records_frame() -> None:
    kind, head, body = encode_admit(1, 2, 0, 1, RECORDS)
    for cut in range(len(body)):
        with pytest.raises(WireError):
            decode([kind, head, body[:cut]])


# --- fuzz: decode raises WireError or nothing --------------------------------------------------


def valid_messages() -> st.SearchStrategy[list[bytes]]:
    return st.one_of(
        st.builds(
            encode_batch,
            st.integers(0, 0xFFFF),
            st.integers(0, MAX_SEQ),
            st.lists(url_records, max_size=4),
        ),
        st.builds(
            encode_admit,
            st.integers(0, 0xFFFF),
            st.integers(0, MAX_SEQ),
            st.just(0),
            st.integers(1, 0xFFFF),
            st.lists(url_records, max_size=4),
        ),
        st.builds(
            encode_ack,
            st.integers(0, 0xFFFF),
            st.integers(0, MAX_SEQ),
            st.just(0),
            st.integers(1, 3),
        ),
        st.builds(
            encode_stats,
            st.integers(0, 0xFFFF),
            st.dictionaries(text, st.one_of(st.none(), st.booleans(), st.integers())),
        ),
        st.builds(encode_command, text.filter(bool)),
    )


def frame_lists() -> st.SearchStrategy[list[bytes]]:
    first = st.one_of(st.sampled_from(KINDS), st.binary(max_size=10))
    rest = st.lists(
        st.one_of(st.binary(max_size=64), st.sampled_from([HEAD, PART, b"{}", b'{"cmd":"x"}'])),
        max_size=5,
    )
    return st.one_of(st.just([]), st.tuples(first, rest).map(lambda t: [t[0], *t[1]]))


@settings(max_examples=400, deadline=None)
@given(frames=frame_lists())
def test_decode_of_arbitrary_frames_raises_only_wire_error(frames: list[bytes]) -> None:
    assert_routes_agree(frames)
    try:
        message = decode(frames)
    except WireError:
        return
    assert isinstance(message, Batch | Admit | Ack | Stats | Command)


@settings(max_examples=300, deadline=None)
@given(frames=valid_messages(), data=st.data())
def test_decode_of_corrupted_messages_raises_only_wire_error(
    frames: list[bytes], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(frames) - 1))
    frame = bytearray(frames[i])
    at = data.draw(st.integers(0, len(frame)))
    action = data.draw(st.sampled_from(["cut", "flip", "insert", "drop"]))
    if action == "cut":
        del frame[at:]
    elif action == "flip" and at < len(frame):
        frame[at] ^= data.draw(st.integers(1, 255))
    elif action == "insert":
        frame[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    elif at < len(frame):
        del frame[at]
    frames[i] = bytes(frame)
    assert_routes_agree(frames)
    try:
        message = decode(frames)
    except WireError:
        return
    assert isinstance(message, Batch | Admit | Ack | Stats | Command)


def assert_routes_agree(frames: list[bytes]) -> None:
    """The splitter's reading of a BATCH refuses exactly what decode refuses, and routes
    each record by its host key, passing its bytes on unchanged."""
    try:
        batch = decode(frames)
    except WireError:
        batch = None
    try:
        origin, seq, routes = wire.decode_batch_routes(frames)
    except WireError:
        assert not isinstance(batch, Batch)
        return
    assert isinstance(batch, Batch)
    assert (origin, seq) == (batch.origin, batch.seq)
    assert [host for host, _ in routes] == [r.host_key for r in batch.records]
    admit = decode(wire.encode_admit_data(origin, seq, 0, 1, [data for _, data in routes]))
    assert admit == Admit(origin, seq, 0, 1, batch.records)


def test_the_splitter_routes_a_batch_without_decoding_its_records() -> None:
    assert_routes_agree(encode_batch(7, 9, RECORDS))
    assert_routes_agree(encode_batch(7, 9, []))
    bad = records_frame(b"\0\0\0\0\0\0url-without-host")
    assert_routes_agree([b"BATCH", encode_batch(7, 9, [])[1], bad])
    with pytest.raises(WireError, match="bad_frames"):
        wire.decode_batch_routes(encode_ack(1, 2, 0, 1))


def test_a_record_written_before_hop_paths_decodes_with_an_empty_path() -> None:
    """Stores and outboxes hold records of three strings; they decode, and a record with
    no path is written as they were, byte for byte."""
    old = b"\x00\x02\x00\x01\x00" + b"http://a.example/x\0http://a.example\0http://a.example/"
    record = UrlRecord.decode(old)
    assert (record.url, record.depth, record.attempts, record.path) == (
        "http://a.example/x", 2, 1, "")
    assert record.encode() == old
    batch = decode([b"BATCH", HEAD, records_frame(old)])
    assert isinstance(batch, Batch) and batch.records == (record,)
    assert_routes_agree([b"BATCH", HEAD, records_frame(old, rec(path="LE").encode())])


def test_json_frames_are_compact_utf8() -> None:
    frames = encode_command("deny", {"patterns": ["é"]})
    assert frames[1] == '{"cmd":"deny","patterns":["é"]}'.encode()
    assert json.loads(frames[1]) == {"cmd": "deny", "patterns": ["é"]}


def test_a_record_kind_survives_the_wire_and_a_page_is_written_as_before() -> None:
    """A page's bytes carry no kind (so records from before kinds decode as pages); a
    sitemap, feed or listed page carries its kind through a batch and the splitter's routes."""
    from hive.core.record import FEED, LISTED, SITEMAP, seed_kind

    page = UrlRecord("http://a.test/", "a.test", 1, "http://v.test/")
    assert page.encode()[5:].count(b"\0") == 2
    kinds = [UrlRecord(f"http://a.test/{k}", "a.test", 0, "v", 0, 0, 1, k)
             for k in (SITEMAP, FEED, LISTED)]
    frames = wire.encode_batch(3, 9, [page, *kinds])
    decoded = wire.decode(frames)
    assert isinstance(decoded, wire.Batch) and list(decoded.records) == [page, *kinds]
    _, _, routes = wire.decode_batch_routes(frames)
    assert [UrlRecord.decode(data).kind for _, data in routes] == ["", SITEMAP, FEED, LISTED]
    with pytest.raises(ValueError):
        UrlRecord.decode(page.encode() + b"\0q")
    with pytest.raises(wire.WireError):
        wire.encode_batch(3, 9, [UrlRecord("http://a.test/", "a.test", kind="q")])
    assert seed_kind("sitemap:http://a.test/s.xml") == (SITEMAP, "http://a.test/s.xml")
    assert seed_kind("http://a.test/") == ("", "http://a.test/")
