"""Sitemap and feed hosts of the synthetic web: their documents as bytes, the expected answers.

:class:`SitemapWeb` is pure: ``respond(host, path)`` gives the :class:`Document`
a host serves (None: not found), built from the names and the port alone (and
one host's lastmods from the clock), so
a server (hive.testweb) can serve it and a test can predict what a crawler
should find. Hosts are ``sm-<kind>.<domain>``; every one serves ``/`` (a page
with no links) and a robots.txt that allows all and names its sitemaps::

    orphans      /sitemap.xml lists /orphan/<i>.html, pages no link reaches
    index        /sitemap_index.xml -> /sitemap-a.xml.gz, /sitemap-b.xml.gz (gzipped,
                 application/x-gzip), /nested/index.xml (an index: its child
                 /nested/c.xml is at depth 2) and /sub/sitemap.xml.gz, which lists
                 /elsewhere/… outside its directory (refused: sitemap_path)
    text         /sitemap.txt, one URL per line
    broken       /sitemap.xml cut mid-element after BROKEN_AFTER entries
    oversize     /sitemap.xml with MAX_URLS + 1 entries (the last is past the limit)
    cross        /sitemap.xml lists pages of cross-named and cross-unnamed
    cross-named  robots.txt names cross's sitemap: its listed pages are allowed
    cross-unnamed  robots.txt names nothing: its listed pages are refused (sitemap_origin)
    feeds        / announces /feed.rss and /feed.atom, each listing /post/<i>.html
    feedlink     / announces /feed.rss and links it with <a href> too (a page link comes
                 first), served as text/plain: only how it was found says it is a feed;
                 it lists /item/<i>.html, which nothing else links
    sniffed      / links /feed.xml (application/rss+xml) and /map.xml (application/xml, a
                 urlset) with <a href> only: only what they are says what they are; each
                 lists its own /f/<i>.html or /m/<i>.html
    lister       robots.txt names /sitemap.xml, which lists victim's /secret/<i>.html
    victim       robots.txt (answered after SLOW_ROBOTS seconds) names nothing, so
                 lister's listing is refused; / links every /secret/<i>.html itself
    fresh        /sitemap.xml lists /fresh/<i>.html with a lastmod and nothing else:
                 the first half from 2001 (stale), the second half an hour before
                 the server's clock (``clock``, the one input beyond names and port)
    fanout       /sitemap_index.xml lists FANOUT child indexes /fan/<i>.xml, each
                 listing FANOUT more, /fan/<i>/<j>.xml (a urlset of one page,
                 /fan/<i>/<j>.html): millions of files, of which a crawler may
                 fetch its per-host cap (``fanout_files`` tells which it will);
                 fanout-1 to fanout-3 are three more such hosts

So a crawler that ranks a recent ``lastmod`` up fetches ``fresh``'s second
half first, against the order of the file.
"""

from __future__ import annotations

import functools
import gzip
import time
from collections.abc import Callable
from dataclasses import dataclass

# The protocol's limit (sitemaps.org), stated here too: the test web does not import the crawler.
MAX_URLS = 50_000

KINDS = ("orphans", "index", "text", "broken", "oversize", "cross", "cross-named",
         "cross-unnamed", "feeds", "fresh", "feedlink", "sniffed", "lister", "victim",
         "fanout", "fanout-1", "fanout-2", "fanout-3")
ORPHANS = 20
FRESH = 20  # pages the fresh host's sitemap lists, half of them stale
STALE_LASTMOD = "2001-01-01"
FRESH_AGE = 3600.0  # seconds before the server's clock the fresh half was modified
BROKEN_AFTER = 5
FANOUT = MAX_URLS  # children of each index on the fanout host
POSTS = 4
ITEMS = 3  # what the feedlink and sniffed hosts' feeds and sitemap list each
SECRETS = 100  # victim's pages, linked from its / and listed by lister's sitemap
SLOW_ROBOTS = 2.0  # seconds victim's robots.txt takes to answer
XML = "application/xml"
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


@dataclass(frozen=True, slots=True)
class Document:
    status: int
    content_type: str
    body: bytes
    delay: float = 0.0  # seconds the server waits before answering


def _urlset(urls: list[str]) -> bytes:
    entries = "".join(
        f"<url><loc>{url}</loc><lastmod>2024-01-{1 + i % 28:02d}</lastmod>"
        f"<priority>0.{i % 10}</priority><changefreq>daily</changefreq></url>\n"
        for i, url in enumerate(urls)
    )
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{SITEMAP_NS}">\n'
            f"{entries}</urlset>\n").encode()


def _lastmod_urlset(urls: list[tuple[str, str]]) -> bytes:
    """A urlset of (loc, lastmod) entries, with no priority or changefreq."""
    entries = "".join(f"<url><loc>{url}</loc><lastmod>{lastmod}</lastmod></url>\n"
                      for url, lastmod in urls)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{SITEMAP_NS}">\n'
            f"{entries}</urlset>\n").encode()


def _index(urls: list[str]) -> bytes:
    entries = "".join(f"<sitemap><loc>{url}</loc></sitemap>\n" for url in urls)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{SITEMAP_NS}">\n'
            f"{entries}</sitemapindex>\n").encode()


def _page(head: str = "", body: str = "no links") -> bytes:
    return f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode()


def _home(kind: str) -> bytes:
    """A host's ``/``: the feeds it announces and the links it has (module docstring)."""
    if kind == "feeds":
        return _page('<link rel="alternate" type="application/rss+xml" href="/feed.rss">'
                     '<link rel="alternate" type="application/atom+xml" href="/feed.atom">')
    if kind == "feedlink":
        return _page('<link rel="alternate" type="application/rss+xml" href="/feed.rss">',
                     '<a href="/feed.rss">our feed</a>')
    if kind == "sniffed":
        return _page(body='<a href="/feed.xml">feed</a> <a href="/map.xml">map</a>')
    if kind == "victim":
        return _page(body="".join(f'<a href="/secret/{i}.html">{i}</a> '
                                  for i in range(SECRETS)))
    return _page()


class SitemapWeb:
    """The sitemap hosts under ``domain``, with URLs spelled for ``port``."""

    def __init__(self, domain: str = "test", port: int = 80,
                 clock: Callable[[], float] = time.time) -> None:
        self.domain = domain
        self.port = port
        self.clock = clock

    def host(self, kind: str) -> str:
        return f"sm-{kind}.{self.domain}"

    def url(self, kind: str, path: str) -> str:
        netloc = self.host(kind) if self.port == 80 else f"{self.host(kind)}:{self.port}"
        return f"http://{netloc}{path}"

    # Expected answers.
    def robots_sitemaps(self, kind: str) -> list[str]:
        """The sitemap URLs a host's robots.txt names."""
        paths = {
            "orphans": ["/sitemap.xml"], "index": ["/sitemap_index.xml"],
            "text": ["/sitemap.txt"], "broken": ["/sitemap.xml"],
            "oversize": ["/sitemap.xml"], "cross": ["/sitemap.xml"],
            "fresh": ["/sitemap.xml"], "lister": ["/sitemap.xml"],
        }.get(kind, ["/sitemap_index.xml"] if kind.startswith("fanout") else [])
        named = [self.url(kind, path) for path in paths]
        return [self.url("cross", "/sitemap.xml")] if kind == "cross-named" else named

    def listed(self, kind: str) -> list[str]:
        """The page URLs a host's sitemaps list, in order (allowed or not)."""
        if kind == "orphans":
            return [self.url(kind, f"/orphan/{i}.html") for i in range(ORPHANS)]
        if kind == "index":
            return [self.url(kind, f"/{part}/{i}.html") for part in ("a", "b", "nested/c")
                    for i in range(3)] + self.refused_paths()
        if kind == "text":
            return [self.url(kind, f"/t/{i}.html") for i in range(ORPHANS)]
        if kind == "broken":
            return [self.url(kind, f"/b/{i}.html") for i in range(BROKEN_AFTER)]
        if kind == "oversize":
            return [self.url(kind, f"/o/{i}") for i in range(MAX_URLS + 1)]
        if kind == "cross":
            return [self.url(k, f"/x/{i}.html") for k in ("cross-named", "cross-unnamed")
                    for i in range(3)]
        if kind == "feeds":
            return [self.url(kind, f"/post/{i}.html") for i in range(POSTS)]
        if kind == "fresh":
            return [self.url(kind, f"/fresh/{i}.html") for i in range(FRESH)]
        if kind == "feedlink":
            return [self.url(kind, f"/item/{i}.html") for i in range(ITEMS)]
        if kind == "sniffed":
            return [self.url(kind, f"/{part}/{i}.html") for part in ("f", "m")
                    for i in range(ITEMS)]
        if kind == "lister":
            return [self.url("victim", f"/secret/{i}.html") for i in range(SECRETS)]
        return []

    def fresh(self) -> list[str]:
        """The fresh host's pages whose lastmod is recent (the second half of its list)."""
        return self.listed("fresh")[FRESH // 2:]

    def fanout_files(self, cap: int, kind: str = "fanout") -> list[str]:
        """The files of a fanout host a crawler that fetches at most ``cap`` sitemap files
        a host, in the order they are listed, fetches: the index, then its first children."""
        return [self.url(kind, "/sitemap_index.xml")] + [
            self.url(kind, f"/fan/{i}.xml") for i in range(min(cap, FANOUT + 1) - 1)]

    def refused_paths(self) -> list[str]:
        """Pages the index host's subdirectory child lists outside its directory."""
        return [self.url("index", f"/elsewhere/{i}.html") for i in range(2)]

    # Serving.
    def respond(self, host: str, path: str) -> Document | None:
        kind = host.removeprefix("sm-").removesuffix(f".{self.domain}")
        if kind not in KINDS or host != self.host(kind):
            return None
        if path == "/robots.txt":
            lines = "".join(f"Sitemap: {url}\n" for url in self.robots_sitemaps(kind))
            return Document(200, "text/plain", f"User-agent: *\nAllow: /\n{lines}".encode(),
                            SLOW_ROBOTS if kind == "victim" else 0.0)
        if path == "/":
            return Document(200, "text/html", _home(kind))
        body = self._file(kind, path)
        if body is not None:
            return body
        if path.endswith(".html") or kind == "oversize":
            return Document(200, "text/html", _page())
        return None

    def _file(self, kind: str, path: str) -> Document | None:
        listed = self.listed(kind)
        if kind in ("orphans", "cross") and path == "/sitemap.xml":
            return Document(200, XML, _urlset(listed))
        if kind == "oversize" and path == "/sitemap.xml":
            return Document(200, XML, _oversize(self.port, self.domain))
        if kind == "text" and path == "/sitemap.txt":
            return Document(200, "text/plain", "".join(f"{u}\n" for u in listed).encode())
        if kind == "broken" and path == "/sitemap.xml":
            whole = _urlset([*listed, self.url(kind, "/b/lost.html")])
            cut = whole.index(b"<url><loc>", whole.index(listed[-1].encode()))
            return Document(200, XML, whole[: cut + 20])
        if kind == "index":
            return self._index_file(path, listed)
        if kind == "feeds":
            return _feed(path, listed)
        if kind == "feedlink" and path == "/feed.rss":
            found = _feed(path, listed)
            return None if found is None else Document(200, "text/plain", found.body)
        if kind == "sniffed" and path == "/feed.xml":
            found = _feed("/feed.rss", listed[:ITEMS])
            return None if found is None else Document(200, found.content_type, found.body)
        if kind == "sniffed" and path == "/map.xml":
            return Document(200, XML, _urlset(listed[ITEMS:]))
        if kind == "lister" and path == "/sitemap.xml":
            return Document(200, XML, _urlset(listed))
        if kind.startswith("fanout"):
            return self._fanout_file(kind, path)
        if kind == "fresh" and path == "/sitemap.xml":
            recent = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                   time.gmtime(self.clock() - FRESH_AGE))
            fresh = set(self.fresh())
            return Document(200, XML, _lastmod_urlset(
                [(url, recent if url in fresh else STALE_LASTMOD) for url in listed]))
        return None

    def _index_file(self, path: str, listed: list[str]) -> Document | None:
        gz = "application/x-gzip"
        files = {
            "/sitemap_index.xml": (XML, _index([
                self.url("index", "/sitemap-a.xml.gz"), self.url("index", "/sitemap-b.xml.gz"),
                self.url("index", "/nested/index.xml"), self.url("index", "/sub/sitemap.xml.gz"),
            ])),
            "/sitemap-a.xml.gz": (gz, gzip.compress(_urlset(listed[0:3]))),
            "/sitemap-b.xml.gz": (gz, gzip.compress(_urlset(listed[3:6]))),
            "/nested/index.xml": (XML, _index([self.url("index", "/nested/c.xml")])),
            # Listed by an index one level down: its pages are at depth 2.
            "/nested/c.xml": (XML, _urlset(listed[6:9])),
            "/sub/sitemap.xml.gz": (gz, gzip.compress(_urlset(self.refused_paths()))),
        }
        found = files.get(path)
        return None if found is None else Document(200, *found)


    def _fanout_file(self, kind: str, path: str) -> Document | None:
        if path == "/sitemap_index.xml":
            return Document(200, XML, _index(
                [self.url(kind, f"/fan/{i}.xml") for i in range(FANOUT)]))
        parts = path.removeprefix("/fan/").removesuffix(".xml").split("/")
        if not path.startswith("/fan/") or not path.endswith(".xml") or not all(
                p.isdigit() and int(p) < FANOUT for p in parts):
            return None
        if len(parts) == 1:
            return Document(200, XML, _index(
                [self.url(kind, f"/fan/{parts[0]}/{j}.xml") for j in range(FANOUT)]))
        if len(parts) == 2:
            return Document(200, XML, _urlset([self.url(kind, path[:-4] + ".html")]))
        return None


def _feed(path: str, posts: list[str]) -> Document | None:
    if path == "/feed.rss":
        items = "".join(f"<item><title>{i}</title><link>{u}</link>"
                        f"<pubDate>Mon, 01 Jan 2024 00:00:0{i} GMT</pubDate></item>"
                        for i, u in enumerate(posts))
        body = f'<?xml version="1.0"?><rss version="2.0"><channel>{items}</channel></rss>'
        return Document(200, "application/rss+xml", body.encode())
    if path == "/feed.atom":
        entries = "".join(f'<entry><link href="{u}"/><updated>2024-01-01T00:00:0{i}Z</updated>'
                          f"</entry>" for i, u in enumerate(posts))
        body = f'<feed xmlns="http://www.w3.org/2005/Atom">{entries}</feed>'
        return Document(200, "application/atom+xml", body.encode())
    return None


@functools.lru_cache(maxsize=4)
def _oversize(port: int, domain: str) -> bytes:
    """MAX_URLS + 1 entries (~3.5 MB), built once per port."""
    return _urlset(SitemapWeb(domain, port).listed("oversize"))
