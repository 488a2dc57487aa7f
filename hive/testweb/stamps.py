"""The kernel's time stamps of a served connection: when a request arrived, when a
response's last byte went out.

A handler that stamps an event with ``time.time()`` stamps it when its thread
runs again after the event: after a send returns, the thread may wait for the
GIL or for a CPU (two cores shared by many processes under load) for
milliseconds, so the end of a response is stamped late and the gap to the next
request looks shorter than it was. The kernel stamps both events as they
happen, on the clock ``time.time()`` reads (CLOCK_REALTIME):

- ``SO_TIMESTAMPNS``: each receive carries when its data arrived; the first
  receive of a request is when the request arrived;
- ``SO_TIMESTAMPING`` with ``TX_SOFTWARE`` and ``OPT_ID``: the kernel queues, on
  the socket's error queue, when the last byte of each send left for the
  device, keyed by that byte's offset in the stream; the stamp whose offset is
  the response's last byte is when the response was sent whole (on loopback,
  when the client's socket had it).

Linux only; elsewhere (or where the kernel refuses the options) the stamps are
None and the request log keeps the handler's own.
"""

from __future__ import annotations

import contextlib
import io
import select
import socket
import struct
import time
from typing import Any

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
# linux/net_tstamp.h
_TX_SOFTWARE = 1 << 1
_SOFTWARE = 1 << 4
_OPT_ID = 1 << 7
_OPT_TSONLY = 1 << 11
# linux/errqueue.h: struct sock_extended_err, and the origin of a time stamp in it.
_EXTENDED_ERR = struct.Struct("=IBBBBII")
_ORIGIN_TIMESTAMPING = 4
_RECVERR = {(socket.SOL_IP, 11), (getattr(socket, "SOL_IPV6", 41), 25)}  # IP(V6)_RECVERR
_TIMESPEC = struct.Struct("=qq")
_ANCILLARY = 512
# How long the stamp of a response's last byte is waited for (it normally comes with the
# send; a client that went away leaves bytes that are never sent, and no stamp).
SENT_WAIT = 1.0


def _timespec(data: bytes) -> float | None:
    if len(data) < _TIMESPEC.size:
        return None
    seconds, nanos = _TIMESPEC.unpack_from(data)
    return seconds + nanos / 1e9 if seconds or nanos else None


def listen_stamped(sock: socket.socket) -> None:
    """Stamp arrivals on a listening socket, so that its connections have the stamp of a
    request that came before they were accepted (they inherit the option)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


class Stamps:
    """A connection's reader and writer, with the kernel's stamps of its traffic."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                            _TX_SOFTWARE | _SOFTWARE | _OPT_ID | _OPT_TSONLY)
            self.enabled = True
        except OSError:
            self.enabled = False
        self.reader = _Reader(sock)
        self.writer = _Writer(sock)

    def arrived(self) -> float | None:
        """When the current request arrived (its first receive), and start over for the next."""
        stamp, self.reader.arrived = self.reader.arrived, None
        return stamp if self.enabled else None

    def sent(self) -> float | None:
        """When the last byte written so far left for the device; None if no stamp came
        within SENT_WAIT (or none is kept)."""
        if not self.enabled or not self.writer.written:
            return None
        want = (self.writer.written - 1) & 0xFFFFFFFF
        sock = self.sock
        timeout = sock.gettimeout()
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLERR)
        deadline = time.monotonic() + SENT_WAIT
        sock.settimeout(0.0)
        try:
            while True:
                try:
                    _, ancillary, _, _ = sock.recvmsg(1, _ANCILLARY, socket.MSG_ERRQUEUE)
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    events = poller.poll(max(left, 0.0) * 1000) if left > 0 else []
                    if not any(event & select.POLLERR for _, event in events):
                        return None
                    continue
                stamp, offset = _transmitted(ancillary)
                if stamp is not None and offset == want:
                    return stamp
        except OSError:
            return None
        finally:
            sock.settimeout(timeout)


def _transmitted(ancillary: list[tuple[int, int, bytes]]) -> tuple[float | None, int]:
    """(stamp, byte offset) of one error-queue message; (None, -1) if it is not a stamp."""
    stamp, offset = None, -1
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING:
            stamp = _timespec(data)  # the first of three: the software stamp
        elif (level, kind) in _RECVERR and len(data) >= _EXTENDED_ERR.size:
            _, origin, _, _, _, _, data_field = _EXTENDED_ERR.unpack_from(data)
            if origin == _ORIGIN_TIMESTAMPING:
                offset = data_field
    return (stamp, offset) if offset >= 0 else (None, -1)


class _Reader(io.RawIOBase):
    """Receives with ``recvmsg``, keeping the arrival stamp of the first receive since the
    last :meth:`Stamps.arrived`."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.arrived: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n, ancillary, _, _ = self.sock.recvmsg_into([buffer], _ANCILLARY)
        if n and self.arrived is None:
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    self.arrived = _timespec(data)
        return n


class _Writer(io.BufferedIOBase):
    """Sends every write whole (as socketserver's unbuffered writer does), counting bytes."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.sock.sendall(data)
        with memoryview(data) as view:
            self.written += view.nbytes
            return view.nbytes

    def fileno(self) -> int:
        return self.sock.fileno()
