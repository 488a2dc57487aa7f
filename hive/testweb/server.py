"""Serving a :class:`~hive.testweb.graph.Web` on loopback, with its request log.

:class:`WebServer` (made by :func:`serve`) is a threaded HTTP/1.1 server in
this process that routes by the ``Host`` header and records every request as
a :class:`~hive.testweb.requestlog.Request`; beside it runs the *tripwire*, a
listener on TRIPWIRE_ADDRESS that serves nothing. :class:`WebProcess` serves a
web from ``python -m hive.testweb`` in a process of its own. With ``sitemaps``
(off by default, so other tests and benchmarks see the same web), the server
also answers for the sitemap and feed hosts of hive.testweb.sitemaps
(``sm-<kind>.<domain>``, on the same port); given a ``CookieWeb``, for its cookie
hosts (``ck-<i>.<domain>``, hive.testweb.cookies); given a ``PowerWeb``, for its
hosts (``pl<i>.<domain>``, hive.testweb.powerlaw). It always answers for the text
host, ``text.<domain>`` (hive.testweb.texts), which no page links to: only a crawl
seeded with it goes there.
"""

from __future__ import annotations

import contextlib
import io
import select
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from socketserver import TCPServer
from types import TracebackType
from typing import Any, TextIO

from hive.testweb import texts
from hive.testweb.cookies import CookieWeb
from hive.testweb.graph import STREAM_SECONDS, Response, Stream, Web
from hive.testweb.powerlaw import PowerWeb
from hive.testweb.requestlog import Request, hostname, load_log
from hive.testweb.sitemaps import SitemapWeb
from hive.testweb.stamps import Stamps, listen_stamped

TRIPWIRE_ADDRESS = "127.0.0.1"


class _Site:
    """What the handlers share: the web, the ports, the request log and the live connections."""

    def __init__(self, web: Web, log: TextIO | None) -> None:
        self.web = web
        self.sitemaps: SitemapWeb | None = None
        self.cookies: CookieWeb | None = None
        self.power: PowerWeb | None = None
        self.port = 0
        self.tripwire = 0
        self.stopping = threading.Event()
        self.records: list[Request] = []
        self._log = log
        self._asked: Counter[tuple[str, str]] = Counter()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self.lock = threading.Lock()

    def ask(self, host: str, path: str) -> int:
        """Count a request of (host, path); return how many came before it."""
        with self.lock:
            asked = self._asked[host, path]
            self._asked[host, path] = asked + 1
            return asked

    def record(self, request: Request) -> None:
        line = request.to_json() + "\n"
        with self.lock:
            self.records.append(request)
            if self._log is not None:
                self._log.write(line)

    def reset(self) -> None:
        with self.lock:
            self.records.clear()
            self._asked.clear()

    def detach_log(self) -> None:
        with self.lock:
            self._log = None

    def track(self, connection: socket.socket, thread: threading.Thread | None) -> None:
        with self.lock:
            if thread is None:
                self._connections.pop(connection, None)
            else:
                self._connections[connection] = thread

    def connections(self) -> list[tuple[socket.socket, threading.Thread]]:
        with self.lock:
            return list(self._connections.items())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A connection idle (or not reading) this long is dropped.
    timeout = STREAM_SECONDS
    server: _HTTPServer

    def setup(self) -> None:
        """The connection's reader and writer, with the kernel's stamps (hive.testweb.stamps)."""
        super().setup()
        self.rfile.close()
        self.stamps = Stamps(self.connection)
        self.rfile = io.BufferedReader(self.stamps.reader)
        self.wfile = self.stamps.writer

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing: the request log is the record."""

    def do_GET(self) -> None:
        self._reply(send_body=True)

    def do_HEAD(self) -> None:
        self._reply(send_body=False)

    def _reply(self, send_body: bool) -> None:
        start = time.time()
        site = self.server.site
        host = self.headers.get("Host", "").strip().lower()
        asked = site.ask(host, self.path)
        cookie_host = site.cookies.respond(hostname(host), self.path) if site.cookies else None
        reply: Response | Stream
        if cookie_host is not None:
            reply = cookie_host
        elif site.sitemaps is not None and hostname(host).startswith("sm-"):
            found = site.sitemaps.respond(hostname(host), self.path)
            if found is not None and found.delay:
                site.stopping.wait(found.delay)
            reply = (Response(404, b"not found\n", "text/plain") if found is None
                     else Response(found.status, found.body, found.content_type))
        elif site.power is not None and site.power.serves(hostname(host)):
            reply = site.power.respond(hostname(host), self.path, site.port)
        elif hostname(host) == f"{texts.LABEL}.{site.web.domain}":
            reply = texts.respond(self.path)
        else:
            reply = site.web.respond(
                hostname(host), self.path, port=site.port, tripwire=site.tripwire, asked=asked
            )
        try:
            if isinstance(reply, Stream):
                self._stream(reply, send_body, start)
            else:
                self.wfile.write(reply.wire(send_body))
        except OSError:
            self.close_connection = True
        finally:
            end = time.time()
            client = f"{self.client_address[0]}:{self.client_address[1]}"
            site.record(Request(
                host, self.path, self.command, reply.status, start, end, client,
                self.headers.get("Cookie", ""), self.stamps.arrived(), self.stamps.sent(),
                self.server.server_name,
            ))

    def _stream(self, reply: Stream, send_body: bool, start: float) -> None:
        self.close_connection = True
        self.wfile.write(reply.head())
        if not send_body:
            return
        stopping = self.server.site.stopping
        for chunk in reply.chunks:
            if reply.length is None:
                chunk = b"%x\r\n%b\r\n" % (len(chunk), chunk)
            self.wfile.write(chunk)
            if stopping.wait(reply.interval) or time.time() - start > STREAM_SECONDS:
                return
        if reply.length is None:
            self.wfile.write(b"0\r\n\r\n")


class _HTTPServer(HTTPServer):
    """One listener; a daemon thread per connection, tracked so close() can end it."""

    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], site: _Site) -> None:
        self.site = site
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the FQDN (reverse DNS) for a name unused here.
        TCPServer.server_bind(self)
        self.server_name, self.server_port = self.socket.getsockname()[:2]
        listen_stamped(self.socket)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address), daemon=True
        )
        self.site.track(request, thread)
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except OSError:
            pass  # the client went away mid-request
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.site.track(request, None)
            self.shutdown_request(request)


class _Served:
    """What a served web answers about itself: its URLs on the port it listens on."""

    web: Web
    address: str
    port: int

    @property
    def resolve(self) -> str:
        """The ``dns.resolve`` entry sending every name of the web here."""
        return f"*.{self.web.domain}={self.address}"

    def url(self, host: str, path: str = "/") -> str:
        return self.web.url(host, path, self.port)

    def seeds(self) -> list[str]:
        return self.web.seeds(self.port)

    def in_scope_urls(self) -> set[str]:
        return self.web.in_scope_urls(self.port)


class WebServer(_Served):
    """A :class:`Web` served on a loopback address, with its request log; see :func:`serve`."""

    def __init__(
        self, web: Web, host: str = "127.0.0.1", port: int = 0, log: Path | None = None,
        sitemaps: bool = False, cookies: CookieWeb | None = None, power: PowerWeb | None = None,
        also: tuple[str, ...] = (),
    ) -> None:
        self.web = web
        self._log = log.open("a", encoding="utf-8", buffering=1) if log is not None else None
        self._site = _Site(web, self._log)
        self._site.cookies = self.cookies = cookies
        self._site.power = self.power = power
        self._servers: list[_HTTPServer] = []
        self._threads: list[threading.Thread] = []
        try:
            for address in ((host, port), (TRIPWIRE_ADDRESS, 0)):
                self._servers.append(_HTTPServer(address, self._site))
            for extra in also:  # the same web at more addresses, on the same port
                self._servers.append(_HTTPServer((extra, self._servers[0].server_port),
                                                 self._site))
        except OSError:
            self.close()
            raise
        self.address = host
        self.port = self._servers[0].server_port
        self.tripwire = self._servers[1].server_port
        self._site.port, self._site.tripwire = self.port, self.tripwire
        self.sitemaps = SitemapWeb(web.domain, self.port) if sitemaps else None
        self._site.sitemaps = self.sitemaps
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever, args=(0.05,), name="testweb", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    @property
    def requests(self) -> list[Request]:
        """A copy of the request log so far."""
        with self._site.lock:
            return list(self._site.records)


    def disallowed_urls(self) -> set[str]:
        return self.web.disallowed_urls(self.port)

    def reset(self) -> None:
        """Forget the request log and the request counts (the 503 robots.txt answers 503 again)."""
        self._site.reset()

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving, end every open connection and its thread, and close the log file."""
        self._site.stopping.set()
        for server in self._servers:
            if self._threads:
                server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        deadline = time.monotonic() + timeout
        for connection, thread in self._site.connections():
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            thread.join(max(0.0, deadline - time.monotonic()))
        self._site.detach_log()
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> WebServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class WebProcess(_Served):
    """A :class:`Web` served by ``python -m hive.testweb`` in a process of its own.

    What tests and benchmarks that measure politeness use: a server sharing the
    crawler's GIL would stamp a response's end late by up to a thread switch
    interval (5 ms) and see gaps shorter than they were. The kernel's stamps
    (``Request.arrived``, ``Request.sent``: hive.testweb.stamps) are not late at all.
    """

    def __init__(self, web: Web, log: Path, host: str = "127.0.0.1", timeout: float = 20.0,
                 sitemaps: bool = False, cookies: CookieWeb | None = None,
                 also: tuple[str, ...] = ()) -> None:
        self.web = web
        self.cookies = cookies
        self.address = host
        self.log = log
        command = [
            sys.executable, "-m", "hive.testweb", "--host", host, "--seed", str(web.seed),
            "--hosts", str(web.hosts), "--pages", str(web.pages), "--links", str(web.links),
            "--cross-host", str(web.cross_host), "--page-bytes", str(web.page_bytes),
            "--domain", web.domain, "--crawl-delay", str(web.robots_crawl_delay), "--log", str(log),
            "--copies", str(web.copies), "--broken", str(web.broken),
            "--farm", str(web.farm), "--farm-domain", web.farm_domain,
        ]
        if not web.hostile_enabled:
            command.append("--no-hostile")
        if web.requisites:
            command.append("--requisites")
        if sitemaps:
            command.append("--sitemaps")
        for extra in also:
            command += ["--also", extra]
        if cookies is not None:
            command += ["--cookie-hosts", str(cookies.hosts), "--cookie-count", str(cookies.count),
                        "--cookie-bytes", str(cookies.size), "--cookie-pages", str(cookies.pages)]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], timeout)
        line = self._process.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"hive.testweb did not start (printed {line!r})")
        self.port = int(line)
        self.sitemaps = SitemapWeb(web.domain, self.port) if sitemaps else None

    @property
    def requests(self) -> list[Request]:
        return load_log(self.log) if self.log.exists() else []


    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> WebProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    web: Web, host: str = "127.0.0.1", port: int = 0, log: Path | None = None,
    sitemaps: bool = False, cookies: CookieWeb | None = None, power: PowerWeb | None = None,
    also: tuple[str, ...] = (),
) -> WebServer:
    """Serve ``web`` on ``host:port`` (0: any free port) from background threads; with
    ``sitemaps``, the sitemap and feed hosts too (hive.testweb.sitemaps), with ``cookies``
    its cookie hosts (hive.testweb.cookies, of ``web``'s domain), with ``power`` the hosts
    of a power-law web (hive.testweb.powerlaw, of the same domain).

    Also opens the tripwire on ``127.0.0.1``, and serves the same web at the ``also``
    addresses (on the same port): which names go where is the crawler's ``--resolve``.
    Every request is logged in memory and, when ``log`` is given, appended to that file
    as JSON lines.
    """
    return WebServer(web, host, port, log, sitemaps, cookies, power, also)
