"""What a crawl of a static site must fetch, worked out from the files it serves.

An oracle independent of hive. Links are read by a scanner of start tags, not
by hive's selectolax (the pages are well-formed Sphinx output and edge pages
the test writes; the standard library's ``html.parser`` would take seconds per
megabyte); URLs are joined with ``urllib.parse``; robots rules are stated by
the test, not parsed; and each URL is answered as nginx answers it from a
static root: a file is 200, a directory without its slash a 301 to the slash,
a directory with it its ``index.html``, anything else 404.

Links followed, as hive's policy says: ``a``/``area`` ``href``,
``frame``/``iframe`` ``src``, ``link`` with a page ``rel`` (canonical,
alternate, next, prev, previous) unless an alternate names a non-HTML type, and
a meta refresh URL, resolved against ``<base href>``; only on the hosts the
test serves (they share one registered domain, so ``domain`` scope keeps
them). ``rel=nofollow`` and robots meta are not modelled: the pages have
neither.

Requisites fetched as embeds, as hive's policy says: ``img`` ``src`` and
``srcset``, ``script`` ``src``, ``link`` with a requisite ``rel`` (stylesheet,
icon, preload, modulepreload), ``source``/``video``/``audio`` ``src``, and in a
stylesheet its ``url()`` and ``@import``; an embed's own links are not followed
(a stylesheet has none), and a chain of embeds stops after ``MAX_EMBED_HOPS``.

Nor are paths with empty segments (``/a//b``) modelled: ``urljoin`` drops
them where RFC 3986, and hive, keep them.
"""

from __future__ import annotations

import html
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

PAGE_RELS = frozenset({"canonical", "alternate", "next", "prev", "previous"})
HTML_TYPES = frozenset({"", "text/html", "application/xhtml+xml"})
_REFRESH_URL = re.compile(r"^\s*[\d.]+\s*[;,]?\s*(?:url\s*=\s*)?['\"]?([^'\"]*)", re.IGNORECASE)


# Start tags of the elements that carry links; comments, scripts and styles are cut first.
_TAG = re.compile(r"<(a|area|base|frame|iframe|link|meta)(?=[\s/>])([^>]*)>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([^\s=/>]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""")
_EMBED_TAG = re.compile(r"<(img|script|link|source|video|audio)(?=[\s/>])([^>]*)>", re.IGNORECASE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_CSS_URL = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)|@import\s+(?:"([^"]*)"|'([^']*)')"""
)
EMBED_RELS = frozenset({"stylesheet", "icon", "preload", "modulepreload"})
MAX_EMBED_HOPS = 3  # scope.max_embed_hops in conf/default.toml
_OPAQUE = re.compile(r"<!--.*?-->|<(script|style)[\s>].*?</\1\s*>", re.IGNORECASE | re.DOTALL)


def hrefs(page: str) -> tuple[str | None, list[str]]:
    """(first ``<base href>``, the links) of an HTML page, in document order."""
    base: str | None = None
    links: list[str] = []
    for match in _TAG.finditer(_OPAQUE.sub("", page)):
        tag = match.group(1).lower()
        values: dict[str, str] = {}
        for name, double, single, bare in _ATTRIBUTE.findall(match.group(2)):
            values.setdefault(name.lower(), html.unescape(double or single or bare))
        rels = set(values.get("rel", "").lower().split())
        if tag == "base" and base is None and "href" in values:
            base = values["href"]
        elif tag in ("a", "area") and "href" in values:
            links.append(values["href"])
        elif tag in ("frame", "iframe") and "src" in values:
            links.append(values["src"])
        elif tag == "link" and "href" in values and rels & PAGE_RELS:
            if "alternate" not in rels or values.get("type", "").lower() in HTML_TYPES:
                links.append(values["href"])
        elif tag == "meta" and values.get("http-equiv", "").lower() == "refresh":
            refresh = _REFRESH_URL.match(values.get("content", ""))
            if refresh and refresh.group(1).strip():
                links.append(refresh.group(1).strip())
    return base, links


def _attributes(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, double, single, bare in _ATTRIBUTE.findall(text):
        values.setdefault(name.lower(), html.unescape(double or single or bare))
    return values


def requisites(page: str) -> list[str]:
    """The requisites an HTML page names, in document order (comments left out)."""
    found: list[str] = []
    for match in _EMBED_TAG.finditer(_COMMENT.sub("", page)):
        tag, values = match.group(1).lower(), _attributes(match.group(2))
        if tag == "link":
            if set(values.get("rel", "").lower().split()) & EMBED_RELS and "href" in values:
                found.append(values["href"])
            continue
        if "src" in values:
            found.append(values["src"])
        if tag in ("img", "source") and "srcset" in values:
            found.extend(c.split()[0] for c in values["srcset"].split(",") if c.split())
        if tag == "video" and "poster" in values:
            found.append(values["poster"])
    return found


def css_requisites(url: str, body: bytes) -> list[str]:
    """Absolute requisites a stylesheet names in ``url()`` and ``@import``."""
    text = body.decode("utf-8", "replace")
    found = ["".join(groups).strip() for groups in _CSS_URL.findall(text)]
    return _absolute(url, [href for href in found if not href.startswith("data:")])


def embeds_of(url: str, body: bytes) -> list[str]:
    """Absolute, fragment-free http(s) requisites of the page ``url``."""
    page = body.decode("utf-8", "replace")
    found_base, _ = hrefs(page)
    return _absolute(urljoin(url, found_base) if found_base else url, requisites(page))


def links_of(url: str, body: bytes) -> list[str]:
    """Absolute, fragment-free http(s) links of the page ``url`` whose body is ``body``."""
    found_base, found = hrefs(body.decode("utf-8", "replace"))
    return _absolute(urljoin(url, found_base) if found_base else url, found)


def _absolute(base: str, found: list[str]) -> list[str]:
    out = []
    # Pages link to many anchors of few pages: join each distinct href once.
    for href in dict.fromkeys(href.strip().partition("#")[0] for href in found):
        if href:
            target = urldefrag(urljoin(base, href))[0]
            if urlsplit(target).scheme in ("http", "https"):
                out.append(target)
    return out


@dataclass(frozen=True)
class Vhost:
    """One name a server answers for: where its files are and what robots.txt asks of hive.

    ``rules``: (allow, path prefix) pairs of the robots.txt group that applies to
    hive; the longest matching prefix wins and a tie goes to allow (RFC 9309 §2.2.2).
    """

    name: str
    scheme: str
    port: int
    root: Path
    rules: tuple[tuple[bool, str], ...] = ()
    crawl_delay: float | None = None

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.name}:{self.port}"

    def allowed(self, path: str) -> bool:
        best: tuple[int, bool] = (-1, True)
        for allow, prefix in self.rules:
            if path.startswith(prefix) and (len(prefix), allow) > best:
                best = (len(prefix), allow)
        return best[1]


@dataclass
class Crawl:
    """A walk of a site: the status nginx gives each URL and the file it serves, the URLs
    robots.txt forbids, and links into the domain that no vhost serves."""

    status: dict[str, int] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    forbidden: set[str] = field(default_factory=set)
    foreign: set[str] = field(default_factory=set)


def answer(root: Path, path: str) -> tuple[int, Path | None]:
    """nginx's answer for ``path`` (decoded) under a static ``root``: (status, file served)."""
    target = root / path.lstrip("/")
    if path.endswith("/"):
        index = target / "index.html"
        return (200, index) if index.is_file() else (404, None)
    if target.is_dir():
        return 301, None
    return (200, target) if target.is_file() else (404, None)


def walk(seeds: Iterable[str], vhosts: Mapping[str, Vhost], domain: str) -> Crawl:
    """Every URL reachable by links from ``seeds`` on ``vhosts`` (keyed by origin), with
    the answer each gets; links into ``domain`` that no vhost serves land in ``foreign``."""
    crawl = Crawl()
    # (URL, embeds in a row that reached it: 0 for a page reached by links)
    queue: deque[tuple[str, int]] = deque((seed, 0) for seed in seeds)
    seen = {url for url, _ in queue}
    while queue:
        url, chain = queue.popleft()
        parts = urlsplit(url)
        vhost = vhosts.get(f"{parts.scheme}://{parts.hostname}:{parts.port}")
        if vhost is None:
            host = parts.hostname or ""
            if host == domain or host.endswith(f".{domain}"):
                crawl.foreign.add(url)
            continue
        path = parts.path or "/"
        if not vhost.allowed(path):
            crawl.forbidden.add(url)
            continue
        status, file = answer(vhost.root, unquote(path))
        crawl.status[url] = status
        found: list[tuple[str, int]] = []
        if status == 301:
            found = [(f"{vhost.origin}{path}/", chain)]
        elif file is not None:
            crawl.files[url] = file
            body = file.read_bytes() if file.suffix in (".html", ".css") else b""
            if chain < MAX_EMBED_HOPS and file.suffix == ".css":
                found = [(embed, chain + 1) for embed in css_requisites(url, body)]
            elif file.suffix == ".html":
                if not chain:
                    found = [(link, 0) for link in links_of(url, body)]
                if chain < MAX_EMBED_HOPS:
                    found += [(embed, chain + 1) for embed in embeds_of(url, body)]
        for link, hops in found:
            if link not in seen:
                seen.add(link)
                queue.append((link, hops))
    return crawl
