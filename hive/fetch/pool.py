"""The idle keep-alive connections the fetch threads share, and one open connection.

Idle connections wait in one pool shared by the fetch threads, keyed by
(scheme, address, port) and, for https, the host name too, because a TLS
connection is authenticated for one name, and by the proxy tunnelled through.
The pool keeps ``pool_connections`` in all and drops the least recently used.
It is shared because a polite crawl comes back to a host seconds later from
whichever thread is free: per-thread pools would find the host's connection in
the right thread only one time in T. A connection taken from the pool is
checked first: one the server closed while it sat idle, or that holds stray
bytes, is closed instead of reused.
"""

from __future__ import annotations

import io
import os
import select
import socket
import threading
from collections import OrderedDict

from hive.fetch.response import CHUNK, DeadlineReader

# (scheme, address, port, TLS name or "", proxy address or "")
PoolKey = tuple[str, str, int, str, str]


class _Buffered(io.BufferedReader):
    """The connection's buffered reader; http.client 'closes' it after each response."""

    def close(self) -> None:
        """Ignored: the reader lives as long as its connection (see ``Connection.close``)."""

    def flush(self) -> None:
        """Nothing to flush; a response collected after its connection closed calls it."""


class Connection:
    """One open connection: its socket, its reader and its pool key."""

    __slots__ = ("key", "sock", "raw", "reader", "_poller", "_fd")

    def __init__(self, key: PoolKey, sock: socket.socket) -> None:
        self.key = key
        self.sock = sock
        self.raw = DeadlineReader(sock)
        self.reader = _Buffered(self.raw, CHUNK)
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        # A TLS socket's bytes must go through its SSL object; only a plain one is written raw.
        self._fd = sock.fileno() if type(sock) is socket.socket else -1

    def makefile(self, mode: str) -> _Buffered:
        """What http.client.HTTPResponse reads from (it calls sock.makefile("rb"))."""
        return self.reader

    def send(self, data: bytes) -> None:
        """Send data whole, each wait for room bounded by the socket's timeout.

        A socket with a timeout is non-blocking underneath, and ``sendall`` polls
        before every send; a request fits the send buffer of a connection that is
        idle or new, so a plain socket is first written to at once, one system
        call fewer, and only what did not fit is left to ``sendall``."""
        if self._fd >= 0 and self.sock.gettimeout():
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        self.sock.sendall(data)

    def idle_and_open(self) -> bool:
        """True if nothing arrived while idle: no EOF from the server, no stray bytes."""
        return not self._poller.poll(0)

    def close(self) -> None:
        io.BufferedReader.close(self.reader)
        self.sock.close()


class IdlePool:
    """Idle keep-alive connections by key, capped in all, least recently used out first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._by_key: dict[PoolKey, list[Connection]] = {}
        self._lru: OrderedDict[Connection, None] = OrderedDict()
        self._closed = False

    def take(self, key: PoolKey) -> Connection | None:
        """The most recently used idle connection for key that still looks open, or None."""
        while True:
            with self._lock:
                conns = self._by_key.get(key)
                if not conns:
                    return None
                conn = conns.pop()
                if not conns:
                    del self._by_key[key]
                del self._lru[conn]
            if conn.idle_and_open():
                return conn
            conn.close()

    def give(self, conn: Connection) -> None:
        """Keep conn for reuse, closing the least recently used one beyond capacity."""
        evicted: list[Connection] = []
        with self._lock:
            if self._closed:
                evicted.append(conn)
            else:
                self._by_key.setdefault(conn.key, []).append(conn)
                self._lru[conn] = None
                while len(self._lru) > self._capacity:
                    old, _ = self._lru.popitem(last=False)
                    olds = self._by_key[old.key]
                    olds.remove(old)
                    if not olds:
                        del self._by_key[old.key]
                    evicted.append(old)
        for old in evicted:
            old.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._lru)
            self._lru.clear()
            self._by_key.clear()
        for conn in conns:
            conn.close()
