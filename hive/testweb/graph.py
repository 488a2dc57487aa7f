"""The synthetic web's site graph: its hosts, pages, robots.txt files and hostile hosts.

:class:`Web` is a pure function of its parameters and seed: it answers a
request (:meth:`Web.respond`: a :class:`Response` or a :class:`Stream`) and
knows the expected answers of a crawl (:meth:`Web.seeds`,
:meth:`Web.in_scope_urls`, :meth:`Web.disallowed_urls`, :meth:`Web.strays`).
hive.testweb.server serves it.

**Names.** Normal hosts are ``h000.<domain>``, ``h001.<domain>`` … with pages
``/`` and ``/p/1.html`` … ``/p/<pages-1>.html``, and ``/private/0.html`` …
``/private/2.html``. A crawler reaches every name by resolving ``*.<domain>`` to
the server's address (:attr:`WebServer.resolve` is the override for hive's DNS
cache). URLs carry the server's port unless it is 80, so the expected answers
take the port.

**Pages.** Page *i* links to page *i+1* (so every page is reachable from ``/``)
and ``/`` links to every private page; the rest of the ~``links`` links are
random: absolute, scheme-relative, root-relative and ``../`` spellings, upper-case
host names, fragments, repeats, and a ``cross_host`` share to other hosts.
Padding text brings a page to ~``page_bytes``.

**robots.txt** (:attr:`Web.robots`, host -> kind; ``h000`` is always standard)::

    standard      a ``badbot`` group disallowing all; ``*`` disallows /private/
    crawl-delay   ``*`` with Crawl-delay (:attr:`Web.crawl_delay`) and /private/
    bom           a UTF-8 BOM, then ``*`` disallowing /private/ (a parser that
                  keeps the BOM loses the group and would fetch /private/)
    missing       404: allow all, so its private pages are in scope
    error         500: the host must not be crawled at all
    unavailable   503 with Retry-After: 1 to the first request, then standard

**Broken pages** (``broken``; none by default): each normal host's ``/`` also
links to ``/broken/0.html`` … ``/broken/<broken-1>.html``, which answer 500 for
ever (a page's own failure, which a crawler retries without slowing its host).

**Hostile hosts** (:attr:`Web.hostile`, host -> kind, named ``<kind>.<domain>``,
all linked from ``h000``'s ``/``; their robots.txt allows all)::

    gzip-bomb         Content-Encoding: gzip, ~260 KB inflating to 256 MiB of zeros
    endless           chunked body of 64 KiB chunks, ended at 200 MiB or 60 s
    drip              Content-Length: 1000, one byte every 0.5 s, cut at 60 s
    redirect-loop     / -> /a -> /b -> /a ...
    redirect-private  /loopback, /decimal, /mapped, /localhost -> the tripwire;
                      /metadata -> 169.254.169.254; /private-net -> 10.0.0.1
    rate-limited      429 with Retry-After: 2 to every page
    calendar          /cal/2024/01/15 links the next day, month and year, forever
    huge              a 30 MiB HTML page
    binary            64 KiB of random bytes with NULs, labelled text/html

**Requisites** (``requisites=True``; off by default, so a page is as above):
every page of a normal host embeds stylesheets, images, a script and a font,
on its host and on the static host ``static.<domain>`` (hive.testweb.requisites;
:meth:`Web.requisite_urls` are what a crawl must fetch of them,
:meth:`Web.forbidden_requisites` what the static host's robots.txt forbids).

``h000``'s ``/`` also links to non-public addresses (:meth:`Web.private_links`).
The loopback ones point at the *tripwire*, a second listener on 127.0.0.1 that
serves nothing: bind the web to 127.0.0.2 and allow only that address, and any
request a crawler makes to a private address it should have refused shows up
in :meth:`Web.strays`.
"""

from __future__ import annotations

import calendar
import codecs
import datetime
import functools
import random
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus

from hive.testweb import farm
from hive.testweb import requisites as req
from hive.testweb.requestlog import Request

PRIVATE_PAGES = 3
ROBOTS_VARIANTS = ("crawl-delay", "bom", "missing", "error", "unavailable")
UNAVAILABLE_TIMES = 1
UNAVAILABLE_RETRY_AFTER = 1
HOSTILE_KINDS = (
    "gzip-bomb", "endless", "drip", "redirect-loop", "redirect-private",
    "rate-limited", "calendar", "huge", "binary",
)
BOMB_INFLATED = 256 << 20
ENDLESS_BYTES = 200 << 20
STREAM_SECONDS = 60.0
DRIP_BYTES = 1000
DRIP_INTERVAL = 0.5
RATE_LIMIT_RETRY_AFTER = 2
CALENDAR_START = "/cal/2024/01/15"
HUGE_BYTES = 30 << 20
BINARY_BYTES = 64 << 10
PAGE_CACHE = 8192

# Shares of a page's random links; the rest are same-host pages (or cross-host ones).
_REPEAT_SHARE = 0.08
_PRIVATE_SHARE = 0.04
_FRAGMENT_SHARE = 0.15
_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_ALLOW_ALL = b"User-agent: *\nDisallow:\n"
_STANDARD = "User-agent: badbot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n"
_PAGE = re.compile(r"/p/([1-9][0-9]{0,8})\.html")
_PRIVATE = re.compile(r"/private/([0-9])\.html")
_COPY = re.compile(r"/copy/([0-9]{1,6})\.html")
_BROKEN = re.compile(r"/broken/([0-9]{1,6})\.html")
_DAY = re.compile(r"/cal/([0-9]{4})/([0-9]{2})/([0-9]{2})")
_WORDS = (
    "lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do",
    "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim",
    "ad", "minim", "veniam", "quis", "nostrud", "exercitation", "ullamco", "laboris", "nisi",
)


@dataclass(frozen=True, slots=True)
class Response:
    """A complete response, sent with Content-Length."""

    status: int
    body: bytes = b""
    content_type: str = _HTML
    headers: tuple[tuple[str, str], ...] = ()

    def wire(self, send_body: bool = True) -> bytes:
        """Status line, headers and (unless for HEAD) the body, as bytes to write."""
        head = _head(self.status, self.content_type, len(self.body), self.headers)
        return head + self.body if send_body else head


@dataclass(frozen=True, slots=True)
class Stream:
    """A response written chunk by chunk, ``interval`` seconds apart, on a closing connection.

    ``length`` None means the chunked transfer coding. The server cuts a stream
    after ``STREAM_SECONDS`` or when it closes.
    """

    chunks: Iterator[bytes]
    length: int | None
    interval: float = 0.0
    status: int = 200

    def head(self) -> bytes:
        return _head(self.status, _HTML, self.length, (("Connection", "close"),))


def _head(
    status: int, content_type: str, length: int | None, headers: Iterable[tuple[str, str]]
) -> bytes:
    size = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Content-Type: {content_type}"]
    lines.append(size)
    lines.extend(f"{name}: {value}" for name, value in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


_NOT_FOUND = Response(404, b"not found\n", _TEXT)


def _redirect(location: str) -> Response:
    return Response(302, b"", _TEXT, (("Location", location),))


def _netloc(host: str, port: int) -> str:
    return host if port == 80 else f"{host}:{port}"


def _page_path(page: int) -> str:
    return "/" if page == 0 else f"/p/{page}.html"


def _copy_path(k: int) -> str:
    return f"/copy/{k}.html"


def _private_path(k: int) -> str:
    return f"/private/{k}.html"


def _relative(rng: random.Random, here: str, target: str) -> str:
    """A relative reference from the page at ``here`` to the path ``target``."""
    base = here[: here.rfind("/") + 1]
    if base != "/" and target.startswith(base) and rng.random() < 0.5:
        return target[len(base):]
    return "../" * (base.count("/") - 1) + target[1:] or "./"


def _below(rng: random.Random, n: int) -> int:
    """A random integer in [0, n): randrange's job at a fifth of its cost."""
    return int(rng.random() * n)


class Web:
    """A deterministic web: the same parameters give the same hosts, pages and answers."""

    def __init__(
        self,
        seed: int = 0,
        hosts: int = 20,
        pages: int = 20,
        links: int = 20,
        cross_host: float = 0.2,
        page_bytes: int = 5000,
        domain: str = "web.test",
        hostile: bool = True,
        robots_crawl_delay: float = 0.5,
        copies: int = 0,
        requisites: bool = False,
        broken: int = 0,
        farm: int = 0,
        farm_domain: str = "example.com",
    ) -> None:
        """``copies``: each host's home page also links to this many copy pages
        (``/copy/N.html``), which all answer one body, the same on every host.
        ``requisites``: pages embed stylesheets, images, a script and a font, some on a
        static host (hive/testweb/requisites.py). ``broken``: each host's home page also
        links to this many pages that answer 500 for ever (``/broken/N.html``). ``farm``:
        a link farm of this many hosts of ``farm_domain`` (hive/testweb/farm.py), reached
        from :meth:`farm_seed`; none by default."""
        if hosts < 1 or pages < 1 or links < 0 or page_bytes < 0 or robots_crawl_delay < 0:
            raise ValueError("hosts and pages must be positive; links, sizes, delays not negative")
        if copies < 0 or broken < 0 or farm < 0:
            raise ValueError(f"copies and broken must not be negative, got {copies}, {broken}")
        if not 0.0 <= cross_host <= 1.0:
            raise ValueError(f"cross_host must be in [0, 1], got {cross_host}")
        self.seed = seed
        self.hosts = hosts
        self.robots_crawl_delay = robots_crawl_delay
        self.pages = pages
        self.links = links
        self.cross_host = cross_host
        self.page_bytes = page_bytes
        self.copies = copies
        self.broken = broken
        self.farm = farm
        self.farm_domain = farm_domain.lower()
        self.domain = domain.lower()
        width = max(3, len(str(hosts - 1)))
        self.names = [f"h{i:0{width}d}.{self.domain}" for i in range(hosts)]
        self._index = {name: i for i, name in enumerate(self.names)}
        rng = random.Random(f"{seed}:web")
        self.robots = dict.fromkeys(self.names, "standard")
        picks = rng.sample(range(1, hosts), min(hosts - 1, len(ROBOTS_VARIANTS)))
        for i, kind in zip(picks, ROBOTS_VARIANTS, strict=False):
            self.robots[self.names[i]] = kind
        self.crawl_delay = {
            name: robots_crawl_delay for name, kind in self.robots.items() if kind == "crawl-delay"
        }
        self.hostile_enabled = hostile
        self.hostile = {f"{kind}.{self.domain}": kind for kind in HOSTILE_KINDS} if hostile else {}
        self.requisites = requisites
        self.static = f"{req.STATIC_LABEL}.{self.domain}" if requisites else ""
        # Each word costs at least three characters, so this is at least page_bytes long.
        self._padding = " ".join(rng.choices(_WORDS, k=page_bytes // 3 + 256))
        copy = f"<!doctype html>\n<p>{self._padding[:page_bytes]}</p>\n"
        self._copy = Response(200, copy.encode())
        # Rendering a page costs ~50 us of Python; repeated crawls of one server skip it.
        self._page = functools.lru_cache(maxsize=PAGE_CACHE)(self._render)

    def url(self, host: str, path: str = "/", port: int = 80) -> str:
        """The canonical URL ``http://host[:port]/path`` (no port when it is 80)."""
        return f"http://{_netloc(host, port)}{path}"

    def seeds(self, port: int = 80) -> list[str]:
        """The root of every normal host (the robots-500 one included: it must be refused)."""
        return [self.url(name, "/", port) for name in self.names]

    def in_scope_urls(self, port: int = 80) -> set[str]:
        """Every page a polite crawler starting from :meth:`seeds` must fetch."""
        urls: set[str] = set()
        for name, kind in self.robots.items():
            if kind != "error":
                urls.update(self.url(name, _page_path(i), port) for i in range(self.pages))
                urls.update(self.url(name, _copy_path(k), port) for k in range(self.copies))
            if kind == "missing":
                urls.update(self.url(name, _private_path(k), port) for k in range(PRIVATE_PAGES))
        return urls

    def disallowed_urls(self, port: int = 80) -> set[str]:
        """Every page of a normal host that a polite crawler must never request.

        The private pages of hosts whose robots.txt disallows them, and every
        page of the host whose robots.txt answers 500 (its robots.txt itself
        may be requested).
        """
        urls: set[str] = set()
        for name, kind in self.robots.items():
            if kind == "error":
                urls.update(self.url(name, _page_path(i), port) for i in range(self.pages))
            if kind != "missing":
                urls.update(self.url(name, _private_path(k), port) for k in range(PRIVATE_PAGES))
        return urls

    def requisite_urls(self, port: int = 80) -> set[str]:
        """Every requisite a polite crawler fetching every page it may must fetch."""
        if not self.requisites:
            return set()
        on_host, on_static = req.requisite_paths(self.pages)
        urls = {self.url(self.static, path, port) for path in on_static}
        for name, kind in self.robots.items():
            if kind != "error":
                urls.update(self.url(name, path, port) for path in on_host)
        return urls

    def forbidden_requisites(self, port: int = 80) -> set[str]:
        """The requisites the static host's robots.txt disallows."""
        return {self.url(self.static, req.FORBIDDEN, port)} if self.requisites else set()

    def hostile_links(self, port: int = 80) -> list[str]:
        """The links to hostile hosts, as ``h000``'s ``/`` spells them."""
        paths = {
            "redirect-private": (
                "/loopback", "/decimal", "/mapped", "/localhost", "/metadata", "/private-net",
            ),
            "rate-limited": ("/", "/p/1.html", "/p/2.html"),
        }
        return [
            self.url(host, path, port)
            for host, kind in self.hostile.items()
            for path in paths.get(kind, ("/",))
        ]

    def farm_seed(self, port: int = 80) -> str:
        """The root of the link farm's first host."""
        return self.url(farm.host(0, self.farm_domain), "/", port)

    def farm_hosts(self, records: Iterable[Request]) -> set[str]:
        """The farm's hosts that ``records`` asked anything of."""
        return {r.hostname for r in records
                if farm.index(r.hostname, self.farm_domain, self.farm) is not None}

    def private_links(self, tripwire: int) -> list[str]:
        """Links from ``h000``'s ``/`` to non-public addresses; none may be requested."""
        if not self.hostile:
            return []
        return [
            "http://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
            f"http://127.0.0.1:{tripwire}/",
            f"http://2130706433:{tripwire}/",
            f"http://0x7f000001:{tripwire}/",
            f"http://127.1:{tripwire}/",
            f"http://[::ffff:127.0.0.1]:{tripwire}/",
            f"http://localhost:{tripwire}/",
        ]

    def strays(self, records: Iterable[Request]) -> list[Request]:
        """Requests for a name that is not in this web (an IP, ``localhost``: a tripwire hit)."""
        known = self._index.keys() | self.hostile.keys() | ({self.static} - {""})
        return [r for r in records if r.hostname not in known
                and farm.index(r.hostname, self.farm_domain, self.farm) is None]

    def respond(
        self, host: str, path: str, *, port: int, tripwire: int, asked: int = 0
    ) -> Response | Stream:
        """The answer to ``GET path`` on ``host`` (no port), served on ``port``.

        ``asked`` is how many times this URL was requested before (the
        unavailable robots.txt depends on it); ``tripwire`` is the tripwire's port.
        """
        path = path.partition("?")[0]
        kind = self.hostile.get(host)
        if kind is not None:
            if path == "/robots.txt":
                return Response(200, _ALLOW_ALL, _TEXT)
            return self._hostile(kind, path, tripwire)
        if self.requisites and (host == self.static or path.startswith("/static/")):
            return self._requisite(host, path, port)
        index = self._index.get(host)
        if index is None:
            n = farm.index(host, self.farm_domain, self.farm)
            if n is not None and path == "/":
                return Response(200, farm.page(n, self.farm_domain, self.farm, port))
            return _NOT_FOUND
        if path == "/robots.txt":
            return self._robots(host, asked)
        match = _PAGE.fullmatch(path)
        page = 0 if path == "/" else int(match.group(1)) if match else self.pages
        if page < self.pages:
            return self._page(index, page, port, tripwire)
        match = _COPY.fullmatch(path)
        if match and int(match.group(1)) < self.copies:
            return self._copy
        match = _BROKEN.fullmatch(path)
        if match and int(match.group(1)) < self.broken:
            return Response(500, b"this page is broken\n", _TEXT)
        match = _PRIVATE.fullmatch(path)
        if match and int(match.group(1)) < PRIVATE_PAGES:
            body = f"<!doctype html>\n<title>{host} {path}</title>\n<a href=\"../\">home</a>\n"
            return Response(200, body.encode())
        return _NOT_FOUND

    def _requisite(self, host: str, path: str, port: int) -> Response:
        if host == self.static and path == "/robots.txt":
            return Response(200, req.STATIC_ROBOTS, _TEXT)
        on_static = path.startswith("/cdn/")
        found = req.asset(path, _netloc(self.static, port))
        if found is None or on_static != (host == self.static) or (
            host != self.static and host not in self._index
        ):
            return _NOT_FOUND
        return Response(200, found[1], found[0])

    def _robots(self, host: str, asked: int) -> Response:
        kind = self.robots[host]
        if kind == "missing":
            return _NOT_FOUND
        if kind == "error":
            return Response(500, b"robots.txt is broken\n", _TEXT)
        if kind == "unavailable" and asked < UNAVAILABLE_TIMES:
            retry = (("Retry-After", str(UNAVAILABLE_RETRY_AFTER)),)
            return Response(503, b"busy, come back later\n", _TEXT, retry)
        if kind == "crawl-delay":
            text = f"User-agent: *\nCrawl-delay: {self.crawl_delay[host]:g}\nDisallow: /private/\n"
            return Response(200, text.encode(), _TEXT)
        if kind == "bom":
            return Response(200, codecs.BOM_UTF8 + b"User-agent: *\nDisallow: /private/\n", _TEXT)
        return Response(200, f"# robots.txt for {host}\n{_STANDARD}".encode(), _TEXT)

    def _render(self, index: int, page: int, port: int, tripwire: int) -> Response:
        rng = random.Random(f"{self.seed}:{index}:{page}")
        name, here = self.names[index], _page_path(page)
        hrefs = self._hrefs(rng, index, page, port)
        if index == 0 and page == 0:
            hrefs += self.hostile_links(port) + self.private_links(tripwire)
            hrefs += [f"mailto:webmaster@{name}", "javascript:void(0)"]
        items = "".join(f'<li><a href="{href}">{href}</a></li>\n' for href in hrefs)
        embeds = embedded = ""
        if self.requisites:
            static = _netloc(self.static, port)
            embeds, embedded = req.page_head(static), req.page_body(static, page)
        head = (
            f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{name} {here}</title>'
            f"{embeds}</head>\n<body>{embedded}<h1>{name} {here}</h1>\n<ul>\n{items}</ul>\n<p>"
        )
        tail = "</p>\n</body></html>\n"
        need = self.page_bytes - len(head) - len(tail)
        start = _below(rng, len(self._padding) - need + 1) if need > 0 else 0
        return Response(200, (head + self._padding[start : start + max(need, 0)] + tail).encode())

    def _hrefs(self, rng: random.Random, index: int, page: int, port: int) -> list[str]:
        here = _page_path(page)
        hrefs = []
        if page + 1 < self.pages:
            hrefs.append(self._spell(rng, index, here, index, _page_path(page + 1), port))
        if page == 0:
            hrefs.extend(_private_path(k) for k in range(PRIVATE_PAGES))
            hrefs.extend(_copy_path(k) for k in range(self.copies))
            hrefs.extend(f"/broken/{k}.html" for k in range(self.broken))
        while len(hrefs) < self.links:
            roll = rng.random()
            if hrefs and roll < _REPEAT_SHARE:
                hrefs.append(hrefs[_below(rng, len(hrefs))])
                continue
            target_index, target = index, _page_path(_below(rng, self.pages))
            if roll < _REPEAT_SHARE + _PRIVATE_SHARE:
                target = _private_path(_below(rng, PRIVATE_PAGES))
            elif len(self.names) > 1 and rng.random() < self.cross_host:
                target_index = _below(rng, len(self.names) - 1)
                target_index += target_index >= index
            href = self._spell(rng, index, here, target_index, target, port)
            if rng.random() < _FRAGMENT_SHARE:
                href += f"#s{_below(rng, 10)}"
            hrefs.append(href)
        return hrefs

    def _spell(
        self, rng: random.Random, index: int, here: str, target_index: int, target: str, port: int
    ) -> str:
        """One of the ways to write a link from ``here`` on host ``index`` to ``target``."""
        netloc = _netloc(self.names[target_index], port)
        roll = rng.random()
        if roll < 0.1:
            netloc = netloc.upper()
        if target_index != index:
            return f"//{netloc}{target}" if roll < 0.3 else f"http://{netloc}{target}"
        if roll < 0.2:
            return f"http://{netloc}{target}"
        if roll < 0.5:
            return target
        return _relative(rng, here, target)

    def _hostile(self, kind: str, path: str, tripwire: int) -> Response | Stream:
        match kind:
            case "gzip-bomb":
                return Response(200, _gzip_bomb(), headers=(("Content-Encoding", "gzip"),))
            case "endless":
                return Stream(_endless(), None)
            case "drip":
                return Stream(_drip(), DRIP_BYTES, DRIP_INTERVAL)
            case "redirect-loop":
                target = {"/": "/a", "/a": "/b", "/b": "/a"}.get(path)
                return _NOT_FOUND if target is None else _redirect(target)
            case "redirect-private":
                targets = {
                    "/loopback": f"http://127.0.0.1:{tripwire}/tripwire",
                    "/decimal": f"http://2130706433:{tripwire}/tripwire",
                    "/mapped": f"http://[::ffff:127.0.0.1]:{tripwire}/tripwire",
                    "/localhost": f"http://localhost:{tripwire}/tripwire",
                    "/metadata": "http://169.254.169.254/latest/meta-data/",
                    "/private-net": "http://10.0.0.1/",
                }
                location = targets.get(path)
                return _NOT_FOUND if location is None else _redirect(location)
            case "rate-limited":
                retry = (("Retry-After", str(RATE_LIMIT_RETRY_AFTER)),)
                return Response(429, b"too many requests\n", _TEXT, retry)
            case "calendar":
                return _calendar(path)
            case "huge":
                return Response(200, _huge_page())
            case _:  # binary
                magic = b"\x89PNG\r\n\x1a\n\x00\x00"
                noise = random.Random(f"{self.seed}:binary").randbytes(BINARY_BYTES - len(magic))
                return Response(200, magic + noise)


@functools.cache
def _gzip_bomb() -> bytes:
    """One gzip member of BOMB_INFLATED zeros, built from a single compressed MiB.

    A full flush byte-aligns the deflate stream and resets its window, so each
    further MiB of zeros compresses to the same bytes: repeat them.
    """
    mib = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = deflate.compress(mib) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(BOMB_INFLATED >> 20):
        crc = zlib.crc32(mib, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, BOMB_INFLATED & 0xFFFFFFFF)
    return header + block * (BOMB_INFLATED >> 20) + deflate.flush() + trailer


@functools.cache
def _huge_page() -> bytes:
    paragraph = b"<p>" + b"a huge page " * 80 + b"</p>\n"
    return b"<!doctype html>\n<html><body>\n" + paragraph * (HUGE_BYTES // len(paragraph) + 1)


def _endless() -> Iterator[bytes]:
    chunk = (b"<p>" + b"and more " * 8000)[: 1 << 16]
    for _ in range(ENDLESS_BYTES // len(chunk)):
        yield chunk


def _drip() -> Iterator[bytes]:
    body = (b"<!doctype html>\n<html><body>" + b"." * DRIP_BYTES)[:DRIP_BYTES]
    for byte in body:
        yield bytes((byte,))


def _calendar(path: str) -> Response:
    """The calendar trap: every valid day links to the next day, month and year."""
    if path == "/":
        links = [CALENDAR_START]
    else:
        match = _DAY.fullmatch(path)
        try:
            day = datetime.date(*map(int, match.groups())) if match else None
        except ValueError:
            day = None
        if day is None:
            return _NOT_FOUND
        links = [f"/cal/{d:%Y/%m/%d}" for d in _calendar_next(day)]
    items = "".join(f'<li><a href="{href}">{href}</a></li>\n' for href in links)
    return Response(200, f"<!doctype html>\n<title>{path}</title>\n<ul>\n{items}</ul>\n".encode())


def _calendar_next(day: datetime.date) -> list[datetime.date]:
    """The next day, the same day next month and next year (clamped to the month's end)."""
    out = []
    if day < datetime.date.max:
        out.append(day + datetime.timedelta(days=1))
    year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
    for y, m in ((year, month), (day.year + 1, day.month)):
        if y <= datetime.MAXYEAR:
            out.append(datetime.date(y, m, min(day.day, calendar.monthrange(y, m)[1])))
    return out
