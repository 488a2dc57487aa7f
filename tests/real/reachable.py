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
neither. Nor are paths with empty segments (``/a//b``): ``urljoin`` drops
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


def links_of(url: str, body: bytes) -> list[str]:
    """Absolute, fragment-free http(s) links of the page ``url`` whose body is ``body``."""
    found_base, found = hrefs(body.decode("utf-8", "replace"))
    base = urljoin(url, found_base) if found_base else url
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
    queue = deque(seeds)
    seen = set(queue)
    while queue:
        url = queue.popleft()
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
        found: list[str] = []
        if status == 301:
            found = [f"{vhost.origin}{path}/"]
        elif file is not None:
            crawl.files[url] = file
            if file.suffix == ".html":
                found = links_of(url, file.read_bytes())
        for link in found:
            if link not in seen:
                seen.add(link)
                queue.append(link)
    return crawl
