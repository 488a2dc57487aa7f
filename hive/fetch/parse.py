"""Links out of a fetched page, and the crawl's scope (pure functions).

This module owns two decisions: which URLs a page links to, and which of
those the crawl follows.

Link extraction (:func:`extract_links`), policy:

* Only HTML is parsed: Content-Type ``text/html`` or ``application/xhtml+xml``,
  or no (or an empty) Content-Type. A body that sniffs as binary (a NUL byte, a PDF
  signature or more than 2 % binary control bytes in its first KiB, no UTF-16
  byte-order mark) is not parsed, whatever its label; the result says why.
* The page's encoding is, as in the HTML Standard, its byte-order mark, else
  the Content-Type charset, else a ``<meta>`` charset in its first KiB, else
  UTF-8 (Latin-1 and ASCII labels read as windows-1252). A UTF-8 page goes to
  selectolax's lexbor as bytes; any other is decoded here first. Non-ASCII in
  a link is escaped as UTF-8 by canonicalization, except in the query of a
  link on a page in a legacy encoding, escaped in that encoding as browsers do.
* Bounded per page: a document longer than ``SLICE`` is parsed one slice at a
  time (cut after a ``>``), so the parser's tree and its nodes, ~55 bytes per
  byte of the densest markup, never hold more than a slice, and extraction stops at
  ``max_links`` distinct links (``truncated`` says so). A slice boundary can
  fall inside a comment or a script, whose text the next slice then reads as
  markup: on pages over ``SLICE`` only, a link may be found there.
* Page requisites (images, scripts, stylesheets...) are read in the same walk when
  asked for, and returned apart from links with their kind (``hive.fetch.requisites``).
* Links come from ``a`` and ``area`` ``href``, ``frame`` and ``iframe`` ``src``,
  ``link`` elements that name a page (``rel`` canonical, alternate, next, prev,
  previous; not a stylesheet or icon, nor an alternate of a non-HTML type such
  as a feed), and a meta refresh URL. They resolve against the first
  ``<base href>`` of the first slice (itself resolved against the page URL).
* Feeds a page announces (``link rel=alternate`` of a ``FEED_TYPES`` type)
  come apart, in ``feeds``: at most ``MAX_FEEDS``, none on a nofollow page.
* ``rel=nofollow`` on a link, and ``<meta name=robots>`` with ``nofollow`` or
  ``none``, drop links when ``honour_nofollow``; a link followable from one
  spot on the page is followed. A meta refresh is a redirect, not a link: it is
  kept on a nofollow page.
* Raw hrefs are de-duplicated before canonicalization (pages repeat links);
  fragment-only and empty hrefs and links back to the page itself are dropped.
  A refused link is counted under its :class:`~hive.errors.URLError` reason
  (``scheme`` covers javascript:, mailto:, data:, tel: and the like; a link
  longer than ``max_url_length`` is ``too_long``).

Scope (:class:`Scope`), policy: checks run in this order and the first
failure names the reason: URL length (``too_long``), path depth
(``path_depth``), a path segment repeated ``max_segment_repeat`` times or more
(``segment_repeat``), the deny patterns (``deny``), the allow patterns when
any are given (``not_allowed``), then the mode against the page the link was
found on: ``host`` keeps the host key (``scope_host``), ``domain`` the
registered domain (``scope_domain``), ``any`` keeps everything. Registered
domains come from the Public Suffix List that the ``publicsuffixlist`` package
ships, private section included (so ``a.github.io`` and ``b.github.io`` are
different domains), never from the network; a name under no listed suffix
(``.test``, an intranet name) is taken as under a one-label suffix, so its last
two labels, and an IP address is its own domain. A URL with no source (a
seed) skips the mode check. An embed (a page requisite) passes the same checks
up to the deny patterns; past them ``embeds`` (``scope.embeds``) decides: ``any``
keeps it, ``same_domain`` keeps it if it is on the registered domain of its page
or passes the allow patterns and the mode, ``off`` holds it to them as a link.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import AnyStr

from publicsuffixlist import PublicSuffixList
from selectolax.lexbor import LexborHTMLParser

from hive.config import ScopeConfig
from hive.core.urls import canonicalize, host_key
from hive.errors import ConfigError, URLError
from hive.fetch.requisites import EmbedBudget, link_embed_kind, raw_embeds, resolve

__all__ = [
    "ExtractResult", "Scope", "extract_links", "media_type", "page_encoding", "refresh_url",
    "registered_domain", "sniff_binary",
]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
SNIFF_BYTES = 1024
BINARY_RATIO = 0.02
PAGE_RELS = frozenset({"canonical", "alternate", "next", "prev", "previous"})
RESOURCE_RELS = frozenset({"stylesheet", "icon"})
FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml"})
MAX_FEEDS = 16
SCOPE_MODES = ("host", "domain", "any")
EMBED_SCOPES = ("any", "same_domain", "off")
# A document is parsed at most this many bytes (characters, if decoded here) at a time:
# most pages are shorter (HTTP Archive: 90 % of HTML documents are under 150 KB), and a
# slice of the densest links (~19,000 <a> elements) costs ~14 MB of tree and nodes.
SLICE = 256 * 1024
# What parsing one page may hold beyond its bodies, for the stated bound of a worker's growth
# (threads x (2 x received + 2 x decoded + PAGE_PARSE_BYTES) + backlog x cap x ~320 B): a
# slice's tree (~14 MB at the densest), the page's links (at most the cap, ~3 MB) and the
# allocator's slack. Busy threads on 1M-link pages measured 34-77 MB each in all, bodies
# included (tests/io/test_page_memory.py, which holds a real worker to the bound).
PAGE_PARSE_BYTES = 48 << 20

# Bytes that mark binary data in the MIME Sniffing Standard (ESC is left out: ISO-2022-JP uses it).
_BINARY_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_BOMS = (codecs.BOM_UTF8, *_UTF16_BOMS)
_UTF8_NAMES = frozenset({"utf-8", "utf-8-sig"})
_UTF16_NAMES = frozenset({"utf-16", "utf-16-le", "utf-16-be"})
# The Encoding Standard reads these labels as windows-1252.
_WINDOWS_1252_NAMES = frozenset({"latin-1", "iso8859-1", "ascii"})
# A <meta charset=...> or <meta http-equiv=content-type content="...; charset=..."> (the
# HTML Standard's prescan, simplified), looked for in the first KiB.
_META_CHARSET = re.compile(
    rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.()\-]+)""", re.IGNORECASE
)
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_CHARSET = re.compile(r"""charset\s*=\s*["']?([^\s;"']+)""", re.IGNORECASE)
# The HTML Standard's declarative refresh: a time (digits and dots), a separator, an
# optional "url=", the URL. Possessive quantifiers keep a hostile value linear.
_REFRESH = re.compile(
    r"\s*+[\d.]++(?:[;,\s]\s*+(?:url\s*+=\s*+)?(?P<url>.*))?",
    re.IGNORECASE | re.DOTALL | re.ASCII,
)
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+")
_SUFFIXES = PublicSuffixList(only_icann=False, accept_unknown=True)


@dataclass(frozen=True, slots=True)
class ExtractResult:
    """The links of one page.

    ``links``: canonical, distinct, in the order found. ``refused``: distinct
    raw links dropped, by reason (a URLError reason or ``nofollow``).
    ``skipped``: why the body was not parsed (``not_html``, ``binary``), else
    None. ``nofollow``: the page's robots meta says nofollow or none.
    ``truncated``: extraction stopped at ``max_links``; the page has more.
    ``embeds``: (canonical URL, kind) of the page's requisites when asked for
    (``hive.fetch.requisites``), ``embeds_refused`` and ``embeds_truncated`` likewise.
    ``feeds``: canonical URLs of the feeds the page announces (hive.fetch.feeds).
    """

    links: list[str] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    skipped: str | None = None
    nofollow: bool = False
    truncated: bool = False
    embeds: list[tuple[str, str]] = field(default_factory=list)
    embeds_refused: dict[str, int] = field(default_factory=dict)
    embeds_truncated: bool = False
    feeds: list[str] = field(default_factory=list)


def media_type(content_type: str | None) -> tuple[str | None, str | None]:
    """(lowercased media type, charset parameter) of a Content-Type header value;
    an empty value is as good as none."""
    if content_type is None:
        return None, None
    kind, _, params = content_type.partition(";")
    charset = _CHARSET.search(params)
    return kind.strip().lower() or None, charset.group(1) if charset else None


def sniff_binary(body: bytes) -> bool:
    """Whether the start of body looks like binary data rather than text."""
    head = body[:SNIFF_BYTES]
    if head.startswith(_UTF16_BOMS):
        return False
    if b"\x00" in head or head.startswith(b"%PDF-"):
        return True
    controls = len(head) - len(head.translate(None, _BINARY_BYTES))
    return controls > len(head) * BINARY_RATIO


def refresh_url(content: str) -> str | None:
    """The URL in a meta refresh ``content`` ("5; url='/next'"), or None if it names none."""
    match = _REFRESH.fullmatch(content)
    url = match.group("url") if match is not None else None
    if not url:
        return None
    if url[0] in "'\"":
        end = url.find(url[0], 1)
        url = url[1:end] if end > 0 else url[1:]
    return url.strip(_C0_OR_SPACE) or None


def _tokens(value: str | None) -> set[str]:
    return set(value.lower().replace(",", " ").split()) if value else set()


def page_encoding(body: bytes, charset: str | None) -> str:
    """The codec a page is read with: its byte-order mark, the Content-Type ``charset``,
    a ``<meta>`` charset in its first KiB, else UTF-8 (see the module policy)."""
    if body.startswith(_BOMS):  # one test for the pages (most) that have none
        if body.startswith(codecs.BOM_UTF8):
            return "utf-8"
        return "utf-16-le" if body.startswith(codecs.BOM_UTF16_LE) else "utf-16-be"
    name = _codec(charset) if charset is not None else None
    if name is None:
        meta = _META_CHARSET.search(body, 0, SNIFF_BYTES)
        name = _codec(meta.group(1).decode("ascii")) if meta is not None else None
        if name in _UTF16_NAMES:  # a page that says so in ASCII is not UTF-16
            name = "utf-8"
    return name or "utf-8"


@functools.lru_cache(maxsize=64)
def _codec(label: str) -> str | None:
    """The Python codec of a charset label; None if unknown or not a text encoding."""
    try:
        info = codecs.lookup(label)
        if not getattr(info, "_is_text_encoding", True):
            return None
        # Some codecs refuse errors="replace", or bytes they cannot read (punycode).
        b"<a>\x80\xff".decode(info.name, "replace")
        "\xe9".encode(info.name, "replace")
    except (LookupError, ValueError, TypeError):
        return None
    if info.name in _UTF8_NAMES:
        return "utf-8"
    return "cp1252" if info.name in _WINDOWS_1252_NAMES else info.name


def _document(body: bytes, encoding: str) -> bytes | str:
    """What lexbor reads: a UTF-8 page as bytes (lexbor's default), any other decoded here."""
    if encoding == "utf-8":
        return body[3:] if body.startswith(codecs.BOM_UTF8) else body
    return body.decode(encoding, "replace")


def _slices(document: bytes | str) -> Iterator[bytes | str]:
    """The document in pieces of at most ``SLICE``, each cut just after a ``>``."""
    if isinstance(document, bytes):
        return _cut(document, b">")
    return _cut(document, ">")


def _cut(document: AnyStr, end_of_tag: AnyStr) -> Iterator[AnyStr]:
    start, size = 0, len(document)
    while start < size:
        end = start + SLICE
        if end < size:
            cut = document.rfind(end_of_tag, start, end)
            if cut > start:
                end = cut + 1
        yield document[start:end]
        start = end


def _document_base(tree: LexborHTMLParser, page_url: str) -> str:
    """The first ``<base href>`` resolved against the page URL; the page URL if none or refused."""
    for node in tree.tags("base"):
        href = node.attributes.get("href")
        if href:
            try:
                return canonicalize(href, page_url)
            except URLError:
                return page_url
    return page_url


def _raw_links(
    tree: LexborHTMLParser, honour_nofollow: bool, embeds: EmbedBudget | None,
    feeds: dict[str, None],
) -> Iterator[tuple[str, bool]]:
    """(raw URL, marked rel=nofollow) of each link element, by kind of element; a ``link``
    element that names a requisite is left to the embeds when they are asked for, and
    the raw URLs of feeds go into ``feeds``."""
    for tag in ("a", "area"):
        for node in tree.tags(tag):
            attrs = node.attributes
            href = attrs.get("href")
            if href:
                rel = attrs.get("rel")
                # The substring test is cheap and rarely true; tokens decide.
                if rel is not None and honour_nofollow and "nofollow" in rel.lower():
                    yield href, "nofollow" in _tokens(rel)
                else:
                    yield href, False
    for tag in ("frame", "iframe"):
        for node in tree.tags(tag):
            src = node.attributes.get("src")
            if src:
                yield src, False
    for node in tree.tags("link"):
        attrs = node.attributes
        href = attrs.get("href")
        rels = _tokens(attrs.get("rel"))
        if embeds is not None and href and link_embed_kind(rels) is not None:
            continue  # an embed, which raw_embeds took in document order
        if not href or not rels & PAGE_RELS or rels & RESOURCE_RELS:
            continue
        media = (attrs.get("type") or "").strip().lower()
        if "alternate" not in rels or not media or media in HTML_TYPES:
            yield href, False
        elif media in FEED_TYPES and len(feeds) < MAX_FEEDS:
            feeds[href] = None


def extract_links(
    base_url: str,
    body: bytes,
    content_type: str | None,
    honour_nofollow: bool = True,
    *,
    max_links: int = 10_000,
    max_url_length: int = 2048,
    embeds: EmbedBudget | None = None,
) -> ExtractResult:
    """The links of a page fetched from base_url (a canonical URL); see the module policy.

    With ``embeds`` (a fresh budget per page), the page's requisites too, read in the
    same walk of each slice's tree (``hive.fetch.requisites``)."""
    kind, charset = media_type(content_type)
    if kind is not None and kind not in HTML_TYPES:
        return ExtractResult(skipped="not_html")
    if sniff_binary(body):
        return ExtractResult(skipped="binary")
    encoding = page_encoding(body, charset)
    base: str | None = None
    page_nofollow = truncated = False
    # Distinct raw links in document order: meta refreshes, links, links marked nofollow.
    redirects: dict[str, None] = {}
    follow: dict[str, None] = {}
    marked: set[str] = set()
    feeds: dict[str, None] = {}
    for piece in _slices(_document(body, encoding)):
        tree = LexborHTMLParser(piece)
        if base is None:
            base = _document_base(tree, base_url)
        for node in tree.tags("meta"):
            attrs = node.attributes
            if (attrs.get("name") or "").strip().lower() == "robots":
                page_nofollow |= bool(_tokens(attrs.get("content")) & {"nofollow", "none"})
            elif (attrs.get("http-equiv") or "").strip().lower() == "refresh":
                target = refresh_url(attrs.get("content") or "")
                if target is not None and target not in redirects:
                    if len(redirects) + len(follow) + len(marked) >= max_links:
                        truncated = True
                        break
                    redirects[target] = None
        if embeds is not None and embeds.open:
            raw_embeds(tree, embeds)
        found: Iterable[tuple[str, bool]] = (
            () if truncated else _raw_links(tree, honour_nofollow, embeds, feeds)
        )
        # Each raw link kept adds one to follow or marked: counted here, not re-measured.
        held = len(redirects) + len(follow) + len(marked)
        for raw, is_marked in found:
            if raw in follow or (is_marked and raw in marked):
                continue
            if held >= max_links:
                truncated = True
                break
            held += 1
            if is_marked:
                marked.add(raw)
            else:
                follow[raw] = None
        del tree  # a slice's tree goes before the next one is built
        if truncated:
            break
    if honour_nofollow and page_nofollow:
        marked.update(follow)
        follow = {}
    # A meta refresh is a redirect, not a link: it is kept on a nofollow page.
    candidates = redirects | follow
    base = base or base_url
    query_encoding = "utf-8" if encoding in _UTF16_NAMES else encoding
    links: dict[str, None] = {}
    # A plain dict, not a Counter: most pages refuse nothing, and a Counter costs ~1 us to make.
    refused: dict[str, int] = {}
    for raw in candidates:
        # Raw links are not empty, and seldom padded: two characters tell, cheaper than a strip.
        href = raw if raw[0] > " " and raw[-1] > " " else raw.strip(_C0_OR_SPACE)
        if not href or href[0] == "#":
            continue
        try:
            url = canonicalize(href, base, max_url_length, query_encoding)
        except URLError as exc:
            refused[exc.reason] = refused.get(exc.reason, 0) + 1
            continue
        if url != base_url:
            links[url] = None
    if marked:
        dropped = len(marked.difference(candidates))
        if dropped:
            refused["nofollow"] = dropped
    feed_urls: dict[str, None] = {}
    for raw in () if honour_nofollow and page_nofollow else feeds:
        try:
            feed_urls[canonicalize(raw.strip(_C0_OR_SPACE), base, max_url_length)] = None
        except URLError as exc:
            refused[exc.reason] = refused.get(exc.reason, 0) + 1
    if embeds is None:
        return ExtractResult(list(links), refused, None, page_nofollow, truncated,
                             feeds=list(feed_urls))
    # Requisites are fetched whatever nofollow says: they are part of the page, not links.
    resolved, embeds_refused = resolve(embeds, base, max_url_length, query_encoding)
    return ExtractResult(list(links), refused, None, page_nofollow, truncated,
                         resolved, embeds_refused, embeds.truncated, list(feed_urls))


@functools.lru_cache(maxsize=16384)
def registered_domain(host: str) -> str:
    """The registered domain of a canonical host (``www.bbc.co.uk`` -> ``bbc.co.uk``)."""
    if host.startswith("[") or _IPV4.fullmatch(host):
        return host
    return _SUFFIXES.privatesuffix(host) or host


@functools.lru_cache(maxsize=16384)
def _key_domain(key: str) -> str:
    """The registered domain of a host key (its host without the port)."""
    if key.startswith("["):
        return key[: key.index("]") + 1]
    return registered_domain(key.partition(":")[0])


def _path(url: str) -> str:
    """The path of a canonical URL."""
    start = url.find("/", url.find("://") + 3)
    if start < 0:
        return ""
    end = url.find("?", start)
    return url[start:end] if end >= 0 else url[start:]


def _compile(key: str, patterns: Sequence[str]) -> list[re.Pattern[str]]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError(f"{key}: bad regular expression {pattern!r}: {exc}") from None
    return compiled


class Scope:
    """Which discovered URLs the crawl follows; see the module policy."""

    def __init__(
        self,
        mode: str,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        max_url_length: int = 2048,
        max_path_depth: int = 16,
        max_segment_repeat: int = 3,
        embeds: str = "any",
    ) -> None:
        if mode not in SCOPE_MODES:
            raise ConfigError(f"scope.mode: must be one of {', '.join(SCOPE_MODES)}, got {mode!r}")
        if embeds not in EMBED_SCOPES:
            raise ConfigError(
                f"scope.embeds: must be one of {', '.join(EMBED_SCOPES)}, got {embeds!r}"
            )
        self.mode = mode
        self.embeds = embeds
        self.allow = _compile("scope.allow", allow)
        self.deny = _compile("scope.deny", deny)
        self.max_url_length = max_url_length
        self.max_path_depth = max_path_depth
        self.max_segment_repeat = max_segment_repeat
        self._slashes_to_check = min(max_path_depth + 1, max_segment_repeat)
        # (source URL, its host key) of the last check: a page's links come together, so
        # their source's key is taken once. One tuple, so threads sharing the scope read
        # a consistent pair.
        self._source_key: tuple[str | None, str] = (None, "")

    @classmethod
    def from_config(cls, cfg: ScopeConfig) -> Scope:
        return cls(
            cfg.mode, cfg.allow, cfg.deny,
            cfg.max_url_length, cfg.max_path_depth, cfg.max_segment_repeat, cfg.embeds,
        )

    def check(self, url: str, source_url: str | None, embed: bool = False) -> str | None:
        """None if the canonical url is in scope, else the reason it is not.

        source_url is the page the link was found on; None for a seed. ``embed``: the
        url is one of that page's requisites (see the module policy).
        """
        if len(url) > self.max_url_length:
            return "too_long"
        # One split reads a canonical URL's host key and path: "scheme:", "", host key,
        # then path (less its leading "/") and query. Any other shape is read as _path
        # and host_key read it.
        parts = url.split("/", 3)
        host: str | None = None
        if len(parts) == 4 and not parts[1] and parts[0][-1:] == ":":
            host, tail = parts[2], parts[3]
            slashes = 1 + (tail.partition("?")[0] if "?" in tail else tail).count("/")
        else:
            slashes = _path(url).count("/")
        # A path has at most as many segments as slashes: most paths are too short
        # for either check and skip the split.
        if slashes >= self._slashes_to_check:
            segments = [segment for segment in _path(url).split("/") if segment]
            if len(segments) > self.max_path_depth:
                return "path_depth"
            if (
                len(segments) >= self.max_segment_repeat
                and len(set(segments)) < len(segments)
                and Counter(segments).most_common(1)[0][1] >= self.max_segment_repeat
            ):
                return "segment_repeat"
        if self.deny and any(pattern.search(url) for pattern in self.deny):
            return "deny"
        reason = None if embed and self.embeds == "any" else self._outside(url, source_url, host)
        if reason is None or not embed or self.embeds == "off" or source_url is None:
            return reason
        same = _key_domain(host_key(url)) == _key_domain(host_key(source_url))
        return None if same else reason

    def _outside(self, url: str, source_url: str | None, host: str | None) -> str | None:
        """Why the allow patterns or the mode refuse url found on source_url, else None;
        ``host`` is the host key of url if already read."""
        if self.allow and not any(pattern.search(url) for pattern in self.allow):
            return "not_allowed"
        if source_url is None or self.mode == "any":
            return None
        if host is None:
            host = host_key(url)
        source = self._source_key
        if source[0] != source_url:
            source = self._source_key = (source_url, host_key(source_url))
        if host == source[1]:
            return None
        if self.mode == "host":
            return "scope_host"
        same = _key_domain(host) == _key_domain(source[1])
        return None if same else "scope_domain"
