"""A small CONNECT proxy on loopback for tests: it records each tunnel asked for and relays."""

from __future__ import annotations

import contextlib
import socket
import threading


class ConnectProxy:
    """Opens tunnels with CONNECT (refusing targets in ``refuse``) and records the requests."""

    def __init__(self, host: str = "127.0.0.1", refuse: frozenset[str] = frozenset()) -> None:
        self.refuse = refuse
        self.heads: list[bytes] = []
        self.targets: list[str] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self.listener = socket.create_server((host, 0))
        self.host = host
        self.port: int = self.listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._socks.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = sock.recv(4096)
            if not data:
                sock.close()
                return
            head += data
        target = head.split(b" ", 2)[1].decode()
        with self._lock:
            self.heads.append(head)
            self.targets.append(target)
        if not head.startswith(b"CONNECT ") or target in self.refuse:
            sock.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            sock.close()
            return
        address, _, port = target.rpartition(":")
        upstream = socket.create_connection((address.strip("[]"), int(port)), timeout=5)
        with self._lock:
            self._socks.append(upstream)
        sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=self._relay, args=(upstream, sock), daemon=True).start()
        self._relay(sock, upstream)

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for sock in self._socks:
                with contextlib.suppress(OSError):
                    sock.close()
