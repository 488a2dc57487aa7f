"""The wire format: every message hive sends over ZeroMQ, as bytes frames.

This is the only module that knows the byte layout of a message; process roles
call ``encode_*`` and :func:`decode` and never touch frames. Nothing is
pickled: a peer is never trusted to hand us code. Integers are big-endian.

Frames of each kind (the first frame names it)::

    BATCH    origin:u16 seq:u64                  | records   a sender -> splitter
    ADMIT    origin:u16 seq:u64 part:u16 parts:u16 | records  splitter -> owner
    ACK      origin:u16 seq:u64 part:u16 parts:u16            owner -> splitter -> origin
    STATS    worker:u16 | JSON object of str -> number, bool or null
    COMMAND  JSON object with a string "cmd"
    ADDRASK  sender:u16 epoch:u64 | JSON {"asks": [[address, want, owner_epoch,
                                          [grant id, ...], single], ...]}  holder -> owner
    ADDRGRANT sender:u16 epoch:u64 | JSON {"grants": [[address, holder_epoch, grant id,
                                                       wait, hold, every], ...]}  owner -> holder

ADDRASK and ADDRGRANT carry address politeness (hive/core/addressledger.py,
addressstock.py): ``epoch`` names the sender's process life, ``wait``,
``hold`` and ``every`` are seconds (durations, so the two clocks need not agree),
``single`` a boolean (the holder has seen one host at the address).

    records = count:u32, then count times (length:u32, UrlRecord.encode() bytes)

BATCH, ADMIT and ACK may end in one more frame, ``sender:u16 epoch:u32``: the
worker that sent it and the epoch of its machine in a cluster (``hive start
--cluster``; hive/procs/fence.py refuses one older than that machine's current
epoch). A message without it has epoch 0 and sender :data:`SUPERVISOR_ORIGIN`,
as on one machine, where nothing is fenced.

The records frame is also the byte form an outbox keeps until the batch is
acknowledged (:func:`encode_records`, :func:`encode_batch_data`).

``origin`` is the worker that sent the batch, or :data:`SUPERVISOR_ORIGIN` for
seeds and ``hive add``. A batch split by owner becomes ``parts`` ADMIT messages,
each acknowledged on its own (``0 <= part < parts``).

Policy: :func:`decode` trusts nothing. Anything malformed (an unknown kind, a
wrong frame count, a frame over :data:`MAX_FRAME_BYTES`, a length that points
past its frame, trailing bytes, more than :data:`MAX_RECORDS` records, a record
that does not decode, invalid UTF-8 or JSON, a non-finite number) raises
:class:`WireError` and nothing else, so a receiver can log the message, count
it and drop it. Encoders refuse, with the same error, what the decoder would
refuse, so a sender never keeps a message in its outbox that no peer can read.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from hive.core.record import KINDS, UrlRecord, check_parts, separators
from hive.errors import HiveError

SUPERVISOR_ORIGIN = 0xFFFF
MAX_RECORDS = 100_000
MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_SEQ = 2**64 - 1
MAX_U16 = 0xFFFF

KIND_BATCH = b"BATCH"
KIND_ADMIT = b"ADMIT"
KIND_ACK = b"ACK"
KIND_STATS = b"STATS"
KIND_COMMAND = b"COMMAND"
KIND_ADDRASK = b"ADDRASK"
KIND_ADDRGRANT = b"ADDRGRANT"
MAX_LIFE = 2**64 - 1  # an address message's process life: its time_ns at start
MAX_ADDRESS_CHARS = 64

_BATCH_HEAD = struct.Struct(">HQ")
_PART_HEAD = struct.Struct(">HQHH")
_WORKER = struct.Struct(">H")
_EPOCH = struct.Struct(">HI")
MAX_EPOCH = 2**32 - 1
_SENDER = struct.Struct(">HQ")
_U32 = struct.Struct(">I")
# The fixed header of UrlRecord's byte form, measured so record.py stays its only owner.
_RECORD_HEAD_SIZE = len(UrlRecord("u", "h").encode()) - len(b"u\0h\0")

JsonScalar = int | float | bool | None


class WireError(HiveError, ValueError):
    """A message that cannot be encoded or decoded; ``reason`` is a short kind."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True, slots=True)
class Batch:
    """Discovered links or seeds from ``origin``, numbered ``seq`` by it."""

    origin: int
    seq: int
    records: tuple[UrlRecord, ...]
    epoch: int = 0
    sender: int = SUPERVISOR_ORIGIN


@dataclass(frozen=True, slots=True)
class Admit:
    """Part ``part`` of ``parts`` of batch ``(origin, seq)``: the records one worker owns."""

    origin: int
    seq: int
    part: int
    parts: int
    records: tuple[UrlRecord, ...]
    epoch: int = 0
    sender: int = SUPERVISOR_ORIGIN


@dataclass(frozen=True, slots=True)
class Ack:
    """The owner has committed part ``part`` of ``parts`` of batch ``(origin, seq)``."""

    origin: int
    seq: int
    part: int
    parts: int
    epoch: int = 0
    sender: int = SUPERVISOR_ORIGIN


@dataclass(frozen=True, slots=True)
class Stats:
    """A worker's counters and flags."""

    worker: int
    values: dict[str, JsonScalar]


@dataclass(frozen=True, slots=True)
class Command:
    """An order to a worker: ``cmd`` and its arguments (the object's other keys)."""

    cmd: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AddressAsk:
    """One address's part of an ADDRASK: the grants given back and the holder's want."""

    address: str
    want: int
    owner_epoch: int
    returned: tuple[int, ...]
    single: bool = False  # the holder has seen one host at the address: a window would do


@dataclass(frozen=True, slots=True)
class AddressAsks:
    """A holder's asks to one owner (``sender``, in its life ``epoch``)."""

    sender: int
    epoch: int
    asks: tuple[AddressAsk, ...]


@dataclass(frozen=True, slots=True)
class AddressGrant:
    """One grant: start at ``address`` after ``wait`` seconds, within ``hold`` more (a
    window, ``every`` above 0: again and again within them, ``every`` apart)."""

    address: str
    holder_epoch: int
    grant_id: int
    wait: float
    hold: float
    every: float = 0.0


@dataclass(frozen=True, slots=True)
class AddressGrants:
    """An owner's (``sender``, in its life ``epoch``) grants to one holder."""

    sender: int
    epoch: int
    grants: tuple[AddressGrant, ...]


Message = Batch | Admit | Ack | Stats | Command | AddressAsks | AddressGrants


def encode_batch(origin: int, seq: int, records: Sequence[UrlRecord]) -> list[bytes]:
    _check_int("origin", origin, MAX_U16)
    _check_int("seq", seq, MAX_SEQ)
    return [KIND_BATCH, _BATCH_HEAD.pack(origin, seq), encode_records(records)]


def encode_batch_data(origin: int, seq: int, data: bytes, epoch: int = 0,
                      sender: int = SUPERVISOR_ORIGIN) -> list[bytes]:
    """A BATCH around a records frame made earlier by :func:`encode_records` (an outbox's)."""
    _check_int("origin", origin, MAX_U16)
    _check_int("seq", seq, MAX_SEQ)
    if len(data) > MAX_FRAME_BYTES:
        raise WireError("frame_too_large", f"{len(data)} bytes")
    return _with_epoch([KIND_BATCH, _BATCH_HEAD.pack(origin, seq), data], epoch, sender)


def encode_admit(
    origin: int, seq: int, part: int, parts: int, records: Sequence[UrlRecord]
) -> list[bytes]:
    return [KIND_ADMIT, _part_head(origin, seq, part, parts), encode_records(records)]


def encode_ack(origin: int, seq: int, part: int, parts: int, epoch: int = 0,
               sender: int = SUPERVISOR_ORIGIN) -> list[bytes]:
    return _with_epoch([KIND_ACK, _part_head(origin, seq, part, parts)], epoch, sender)


def _with_epoch(frames: list[bytes], epoch: int, sender: int) -> list[bytes]:
    """``frames`` with the sender and its epoch as the last frame (none for epoch 0)."""
    _check_int("epoch", epoch, MAX_EPOCH)
    _check_int("sender", sender, MAX_U16)
    if epoch:
        frames.append(_EPOCH.pack(sender, epoch))
    return frames


def _epoch(frames: Sequence[bytes], count: int) -> tuple[int, int]:
    """The (epoch, sender) of a message of ``count`` frames without them: (0, the
    supervisor) if absent."""
    if len(frames) == count + 1:
        sender, epoch = _unpack(_EPOCH, frames[count])
        if epoch == 0:
            raise WireError("bad_epoch", "an epoch frame holds 0")
        return epoch, sender
    _expect_frames(frames, count)
    return 0, SUPERVISOR_ORIGIN


def encode_stats(worker: int, values: Mapping[str, JsonScalar]) -> list[bytes]:
    _check_int("worker", worker, MAX_U16)
    for key, value in values.items():
        _check_stat(key, value)
    return [KIND_STATS, _WORKER.pack(worker), _dump_json(dict(values))]


def encode_command(cmd: str, args: Mapping[str, object] | None = None) -> list[bytes]:
    body = dict(args or {})
    if not isinstance(cmd, str) or not cmd or "cmd" in body:
        raise WireError("bad_command", "cmd must be a non-empty string given once")
    return [KIND_COMMAND, _dump_json({"cmd": cmd, **body})]


def encode_address_asks(sender: int, epoch: int, asks: Sequence[AddressAsk]) -> list[bytes]:
    _check_int("sender", sender, MAX_U16)
    _check_int("epoch", epoch, MAX_LIFE)
    body = [[a.address, a.want, a.owner_epoch, list(a.returned), a.single] for a in asks]
    _check_asks(body)
    return [KIND_ADDRASK, _SENDER.pack(sender, epoch), _dump_json({"asks": body})]


def encode_address_grants(sender: int, epoch: int,
                          grants: Sequence[AddressGrant]) -> list[bytes]:
    _check_int("sender", sender, MAX_U16)
    _check_int("epoch", epoch, MAX_LIFE)
    body = [[g.address, g.holder_epoch, g.grant_id, g.wait, g.hold, g.every] for g in grants]
    _check_grants(body)
    return [KIND_ADDRGRANT, _SENDER.pack(sender, epoch), _dump_json({"grants": body})]


def _is_int(value: object, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high


def _is_address(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ADDRESS_CHARS


def _entries(body: dict[str, Any], key: str, size: int) -> list[list[Any]]:
    entries = body.get(key)
    if (not isinstance(entries, list) or len(body) != 1 or len(entries) > MAX_RECORDS
            or not all(isinstance(e, list) and len(e) == size for e in entries)):
        raise WireError("bad_address_message", f"expected {{{key!r}: [[{size} fields], ...]}}")
    return entries


def _check_asks(body: list[list[Any]]) -> tuple[AddressAsk, ...]:
    out = []
    for address, want, owner_epoch, returned, single in body:
        if not (_is_address(address) and _is_int(want, MAX_U16)
                and _is_int(owner_epoch, MAX_LIFE) and isinstance(returned, list)
                and len(returned) <= MAX_U16
                and all(_is_int(g, MAX_SEQ) for g in returned) and isinstance(single, bool)):
            raise WireError("bad_address_message", f"bad ask {[address, want]!r}"[:200])
        out.append(AddressAsk(address, want, owner_epoch, tuple(returned), single))
    return tuple(out)


def _check_grants(body: list[list[Any]]) -> tuple[AddressGrant, ...]:
    out = []
    for address, holder_epoch, grant_id, wait, hold, every in body:
        if not (_is_address(address) and _is_int(holder_epoch, MAX_LIFE)
                and _is_int(grant_id, MAX_SEQ)
                and all(isinstance(v, int | float) and not isinstance(v, bool)
                        and math.isfinite(v) and 0 <= v <= 3600 for v in (wait, hold, every))):
            raise WireError("bad_address_message", f"bad grant {[address, grant_id]!r}"[:200])
        out.append(AddressGrant(address, holder_epoch, grant_id, float(wait), float(hold),
                                float(every)))
    return tuple(out)


def decode(frames: Sequence[bytes]) -> Message:
    """Decode one multipart message; raises :class:`WireError` if it is malformed."""
    if not frames:
        raise WireError("no_frames")
    for frame in frames:
        if len(frame) > MAX_FRAME_BYTES:
            raise WireError("frame_too_large", f"{len(frame)} bytes")
    kind = frames[0]
    if kind == KIND_BATCH:
        epoch, sender = _epoch(frames, 3)
        origin, seq = _unpack(_BATCH_HEAD, frames[1])
        return Batch(origin, seq, tuple(decode_records(frames[2])), epoch, sender)
    if kind == KIND_ADMIT:
        epoch, sender = _epoch(frames, 3)
        origin, seq, part, parts = _unpack_part(frames[1])
        return Admit(origin, seq, part, parts, tuple(decode_records(frames[2])), epoch, sender)
    if kind == KIND_ACK:
        epoch, sender = _epoch(frames, 2)
        return Ack(*_unpack_part(frames[1]), epoch, sender)
    if kind == KIND_STATS:
        _expect_frames(frames, 3)
        (worker,) = _unpack(_WORKER, frames[1])
        values = _load_json(frames[2])
        for key, value in values.items():
            _check_stat(key, value)
        return Stats(worker, values)
    if kind == KIND_COMMAND:
        _expect_frames(frames, 2)
        body = _load_json(frames[1])
        cmd = body.pop("cmd", None)
        if not isinstance(cmd, str) or not cmd:
            raise WireError("bad_command", "no string 'cmd'")
        return Command(cmd, body)
    if kind in (KIND_ADDRASK, KIND_ADDRGRANT):
        _expect_frames(frames, 3)
        sender, epoch = _unpack(_SENDER, frames[1])
        body = _load_json(frames[2])
        if kind == KIND_ADDRASK:
            return AddressAsks(sender, epoch, _check_asks(_entries(body, "asks", 5)))
        return AddressGrants(sender, epoch, _check_grants(_entries(body, "grants", 6)))
    raise WireError("unknown_kind", repr(kind[:16]))


def encode_records(records: Sequence[UrlRecord]) -> bytes:
    """The records frame of ``records``; also what an outbox stores."""
    if len(records) > MAX_RECORDS:
        raise WireError("too_many_records", f"{len(records)} > {MAX_RECORDS}")
    try:
        encoded = [record.encode() for record in records]
    except (UnicodeEncodeError, struct.error) as exc:
        raise WireError("bad_record", str(exc)) from exc
    # Exactly the separators after the header (two; three with a kind; four with a hop
    # path; five with a score), a known kind and a non-empty url and host key, or the
    # receiver could not decode the record, and an undecodable batch would be resent from
    # the outbox forever.
    for record, data in zip(records, encoded, strict=True):
        if (data.count(b"\0", _RECORD_HEAD_SIZE)
                != separators(record.kind, record.path, record.score)
                or not record.url or not record.host_key or record.kind not in KINDS):
            raise WireError("bad_record", repr(record))
    frame = _frame(encoded)
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError("frame_too_large", f"{len(frame)} bytes")
    return frame


def concat_records(first: bytes, second: bytes) -> bytes:
    """One records frame holding the records of two (each made by :func:`encode_records`)."""
    (count,) = _U32.unpack_from(first)
    (more,) = _U32.unpack_from(second)
    return _U32.pack(count + more) + first[_U32.size :] + second[_U32.size :]


def decode_records(frame: bytes) -> list[UrlRecord]:
    """Inverse of :func:`encode_records`; raises :class:`WireError` if malformed."""
    decode_record = UrlRecord.decode
    records: list[UrlRecord] = []
    for pos, data in _framed(frame):
        try:
            records.append(decode_record(data))
        except ValueError as exc:
            raise WireError("bad_record", f"at {pos}: {exc}") from exc
    return records


def decode_batch_routes(frames: Sequence[bytes]) -> tuple[int, int, list[tuple[str, bytes]]]:
    """A BATCH's origin, seq and its records' routes (:func:`record_routes`). Raises
    :class:`WireError` if malformed."""
    if len(frames) != 3 or frames[0] != KIND_BATCH:
        raise WireError("bad_frames", "expected a BATCH of 3 frames")
    origin, seq = _unpack(_BATCH_HEAD, frames[1])
    return origin, seq, record_routes(frames[2])


def record_routes(frame: bytes) -> list[tuple[str, bytes]]:
    """Each record's (host key, bytes) of a records frame: what a router needs to cut a
    batch by owner, every record checked as :func:`decode_records` would but none built
    into an object. Raises :class:`WireError` if malformed."""
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError("frame_too_large", f"{len(frame)} bytes")
    routes = []
    for pos, data in _framed(frame):
        parts = data[_RECORD_HEAD_SIZE:].split(b"\0")
        wrong = "too short" if len(data) < _RECORD_HEAD_SIZE else check_parts(parts)
        if wrong:
            raise WireError("bad_record", f"at {pos}: {wrong}")
        try:
            data[_RECORD_HEAD_SIZE:].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireError("bad_record", f"at {pos}: {exc}") from exc
        routes.append((parts[1].decode("utf-8"), data))
    return routes


def encode_admit_data(
    origin: int, seq: int, part: int, parts: int, records: Sequence[bytes], epoch: int = 0,
    sender: int = SUPERVISOR_ORIGIN,
) -> list[bytes]:
    """An ADMIT of records already in byte form (from :func:`decode_batch_routes`)."""
    return _with_epoch([KIND_ADMIT, _part_head(origin, seq, part, parts), _frame(records)],
                       epoch, sender)


def _frame(records: Sequence[bytes]) -> bytes:
    """A records frame: the count, then each record's length and bytes."""
    lengths = map(_U32.pack, map(len, records))
    chunks = chain.from_iterable(zip(lengths, records, strict=True))
    return _U32.pack(len(records)) + b"".join(chunks)


def _framed(frame: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of each record of a records frame; raises :class:`WireError`
    if the framing is malformed (checked before anything is yielded)."""
    end = len(frame)
    if end < _U32.size:
        raise WireError("truncated", "no record count")
    (count,) = _U32.unpack_from(frame)
    if count > MAX_RECORDS:
        raise WireError("too_many_records", f"{count} > {MAX_RECORDS}")
    if count * _U32.size > end - _U32.size:
        raise WireError("truncated", f"{count} records cannot fit in {end} bytes")
    unpack_from = _U32.unpack_from
    spans = []
    pos = _U32.size
    for _ in range(count):
        if pos + _U32.size > end:
            raise WireError("truncated", f"record length at {pos}")
        (size,) = unpack_from(frame, pos)
        pos += _U32.size
        if pos + size > end:
            raise WireError("truncated", f"record of {size} bytes at {pos}")
        spans.append((pos, pos + size))
        pos += size
    if pos != end:
        raise WireError("trailing_bytes", f"{end - pos} bytes after {count} records")
    for start, stop in spans:
        yield start, frame[start:stop]


def _check_int(name: str, value: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise WireError("bad_field", f"{name} must be in 0..{high}, got {value!r}")


def _part_head(origin: int, seq: int, part: int, parts: int) -> bytes:
    _check_int("origin", origin, MAX_U16)
    _check_int("seq", seq, MAX_SEQ)
    _check_int("parts", parts, MAX_U16)
    _check_int("part", part, MAX_U16)
    if part >= parts:
        raise WireError("bad_field", f"part {part} not below parts {parts}")
    return _PART_HEAD.pack(origin, seq, part, parts)


def _expect_frames(frames: Sequence[bytes], count: int) -> None:
    if len(frames) != count:
        raise WireError("frame_count", f"{frames[0]!r} takes {count} frames, got {len(frames)}")


def _unpack(layout: struct.Struct, frame: bytes) -> tuple[int, ...]:
    if len(frame) != layout.size:
        raise WireError("bad_header", f"expected {layout.size} bytes, got {len(frame)}")
    values: tuple[int, ...] = layout.unpack(frame)
    return values


def _unpack_part(frame: bytes) -> tuple[int, int, int, int]:
    origin, seq, part, parts = _unpack(_PART_HEAD, frame)
    if part >= parts:
        raise WireError("bad_header", f"part {part} not below parts {parts}")
    return origin, seq, part, parts


def _check_stat(key: object, value: object) -> None:
    if not isinstance(key, str) or not _is_scalar(value):
        raise WireError("bad_stats", f"{key!r}: {value!r}")


def _is_scalar(value: object) -> bool:
    if value is None or isinstance(value, bool | int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _dump_json(value: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        frame = text.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError("bad_json", str(exc)) from exc
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError("frame_too_large", f"{len(frame)} bytes")
    return frame


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {text[:32]}")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number")


def _load_json(frame: bytes) -> dict[str, Any]:
    try:
        # Strict UTF-8 first: json.loads would also guess UTF-16 and UTF-32.
        value = json.loads(frame.decode("utf-8"), parse_float=_finite, parse_constant=_no_constant)
        # A \ud800 escape is valid JSON but not text; refuse it here rather than
        # let a lone surrogate reach code that hashes or logs strings.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError) as exc:
        raise WireError("bad_json", str(exc)[:200]) from exc
    if not isinstance(value, dict):
        raise WireError("bad_json", f"expected an object, got {type(value).__name__}")
    return value
