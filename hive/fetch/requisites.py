"""Page requisites: the URLs a page embeds (images, scripts, stylesheets, media), which
an archive needs for the page to replay as it looked (pure functions).

This module owns what counts as an embed and how it is read out of HTML and CSS;
``hive.fetch.parse`` calls :func:`raw_embeds` on each slice's tree during its one walk
of a page (``extract_links(..., embeds=...)``), and resolves what it returns against
the page's base as it does links. Policy:

* **From HTML**, each with its kind: ``img`` ``src``/``srcset`` (``img/src``,
  ``img/srcset``), ``source`` ``src``/``srcset`` (in ``picture``, ``video``,
  ``audio``), ``script src``, ``link`` whose ``rel`` tokens name a ``stylesheet``,
  ``icon``, ``preload`` or ``modulepreload`` (``link/stylesheet`` ...), ``video``
  ``src``/``poster``, ``audio src``, ``object data``, ``embed src``, and the CSS of
  ``style`` elements (``style/url``, ``style/import``) and ``style=`` attributes
  (``style-attr/url``). A ``link`` that names both a page and a resource is an embed.
* **One candidate of a ``srcset``**, the one a browser loads (:func:`srcset_choice`)
  in a window ``VIEWPORT_WIDTH`` CSS pixels wide at a device pixel ratio of 1: the
  least dense candidate at least 1x, else the densest. A ``w`` candidate is read as if
  the image were as wide as the window (``sizes`` is not read; its default is the
  window's width), so the pick is never smaller than a browser's.
* **From CSS** (:func:`css_urls`): ``url(...)`` quoted or not, and ``@import "x"``
  or ``@import url(x)`` (an import). Comments are not skipped: a URL in one is taken,
  which costs a fetch at most. ``data:`` URLs are left to canonicalization, which
  refuses them.
* **Bounded**: CSS is scanned for at most ``max_css_bytes`` characters per document
  (every ``style`` element and attribute of a page counted together), a URL longer
  than ``max_url_length`` is not matched (so each match attempt is bounded, and a
  hostile ``url("`` repeated without an end stays linear), and a document yields at
  most ``max_embeds`` distinct raw URLs; the result says when a bound cut it short.
* **Ranked** by what replay needs when there are more: stylesheets (``link/stylesheet``,
  ``@import`` s) first, then scripts, then the rest (images, media, fonts and images CSS
  names), each rank in document order; past ``max_embeds`` an embed of a higher rank
  puts out the last-found of the lowest, so a body of images never crowds out the
  stylesheets of the head. A stylesheet's ``@import`` s are embeds of it, fetched
  under the frontier's seen set (an import loop ends at the first URL fetched again)
  and ``scope.max_embed_hops`` (a chain stops at that many embeds in a row).
* A ``style`` element or an attribute longer than parse's ``SLICE`` (256 KiB) is cut
  by the slicing of the page, and its embeds are not found: the bound that keeps the
  parse tree small costs the requisites of such pages.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from hive.core.urls import canonicalize
from hive.errors import URLError

__all__ = [
    "EMBED_RELS", "RANKS", "VIEWPORT_WIDTH", "EmbedBudget", "css_embeds", "css_urls", "density",
    "link_embed_kind", "raw_embeds", "resolve", "srcset_candidates", "srcset_choice",
]

EMBED_RELS = ("stylesheet", "icon", "preload", "modulepreload")
# tag -> (attribute, kind) of the embeds that are one URL in an attribute.
_SINGLE: dict[str, tuple[tuple[str, str], ...]] = {
    "img": (("src", "img/src"),), "script": (("src", "script/src"),),
    "source": (("src", "source/src"),),
    "video": (("src", "video/src"), ("poster", "video/poster")),
    "audio": (("src", "audio/src"),), "object": (("data", "object/data"),),
    "embed": (("src", "embed/src"),),
}
_SRCSET = {"img": "img/srcset", "source": "source/srcset"}
# What replay needs first: the stylesheets (a page without them is not the page), then the
# scripts, then the rest (images, media, what CSS names), each in the order found.
STYLESHEET, SCRIPT, OTHER = 0, 1, 2
RANKS = {"link/stylesheet": STYLESHEET, "style/import": STYLESHEET, "css/import": STYLESHEET,
         "script/src": SCRIPT, "link/modulepreload": SCRIPT}
# The window a srcset candidate is chosen for: 1280 CSS pixels wide (the width class of
# most desktop windows, where archives are replayed) at a device pixel ratio of 1, so the
# candidate kept is the one such a browser loads, and the smallest a desktop uses.
VIEWPORT_WIDTH = 1280
_SELECTOR = ",".join([*_SINGLE, "link[href]", "style", "[style]"])
_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def _css_pattern(max_url_length: int) -> re.Pattern[str]:
    n = max(1, max_url_length)
    return re.compile(
        rf"""(@import\s*+)?url\(\s*+(?:"([^"\n]{{0,{n}}}+)"|'([^'\n]{{0,{n}}}+)'"""
        rf"""|([^)\s"']{{1,{n}}}+)\s*+\))"""
        rf"""|@import\s++(?:"([^"\n]{{0,{n}}}+)"|'([^'\n]{{0,{n}}}+)')""",
        re.IGNORECASE,
    )


_PATTERNS: dict[int, re.Pattern[str]] = {}


@dataclass(slots=True)
class EmbedBudget:
    """What a document may still yield: CSS characters to scan and distinct raw URLs, the
    most needed kept when there are more (see the module policy).

    ``found``: raw URL -> kind of those kept (a URL keeps its first kind); ``ranked``: the
    kept raw URLs by rank (``RANKS``), each in the order found. ``truncated``: a bound
    cut extraction short or put an embed out."""

    max_css_bytes: int
    max_embeds: int
    max_url_length: int = 2048
    found: dict[str, str] = field(default_factory=dict)
    ranked: tuple[list[str], ...] = field(default_factory=lambda: ([], [], []))
    truncated: bool = False

    def add(self, raw: str, kind: str) -> bool:
        """Keep one raw URL, putting out the last-found of a lower rank if the document
        holds its most; False once the document may keep no more (all stylesheets)."""
        raw = raw.strip()
        if not raw or raw in self.found:
            return True
        rank = RANKS.get(kind, OTHER)
        ranked = self.ranked
        if len(self.found) >= self.max_embeds:
            self.truncated = True
            lower = next((r for r in range(OTHER, rank, -1) if ranked[r]), None)
            if lower is None:
                return self.open
            del self.found[ranked[lower].pop()]
        self.found[raw] = kind
        ranked[rank].append(raw)
        return True

    @property
    def open(self) -> bool:
        """May the document still keep a stylesheet (it is not full of them)?"""
        return len(self.found) < self.max_embeds or len(self.ranked[STYLESHEET]) < len(self.found)

    def in_order(self) -> Iterator[tuple[str, str]]:
        """(raw URL, kind) of each kept, by rank, then in the order found."""
        found = self.found
        for urls in self.ranked:
            for raw in urls:
                yield raw, found[raw]

    def css(self, text: str, kind: str) -> bool:
        """Scan CSS text within the budget; False once the document may keep no more."""
        if len(text) > self.max_css_bytes:
            text = text[: self.max_css_bytes]
            self.truncated = True
        self.max_css_bytes -= len(text)
        for url, is_import in css_urls(text, self.max_url_length):
            if not self.add(url, kind + ("/import" if is_import else "/url")):
                return False
        return True


def css_urls(text: str, max_url_length: int = 2048) -> Iterator[tuple[str, bool]]:
    """(raw URL, whether it is an ``@import``) of each reference in CSS text, in order."""
    pattern = _PATTERNS.get(max_url_length)
    if pattern is None:
        pattern = _PATTERNS.setdefault(max_url_length, _css_pattern(max_url_length))
    for match in pattern.finditer(text):
        imports, quoted, single, bare, imported, imported_single = match.groups()
        if imported is not None or imported_single is not None:
            yield (imported if imported is not None else imported_single or ""), True
        else:
            url = quoted if quoted is not None else single if single is not None else bare
            yield url or "", imports is not None


def srcset_candidates(value: str) -> Iterator[tuple[str, str]]:
    """(URL, descriptor) of each candidate of a ``srcset`` value: split on commas, each a
    URL and an optional descriptor (the HTML Standard's parse, less descriptor checking)."""
    pos, size = 0, len(value)
    while pos < size:
        while pos < size and (value[pos] in ", \t\n\f\r"):
            pos += 1
        start = pos
        while pos < size and not value[pos].isspace():
            pos += 1
        url, descriptor = value[start:pos], ""
        if url.endswith(","):
            url = url.rstrip(",")
        elif pos < size:
            # The descriptor runs to the comma that ends the candidate.
            comma = value.find(",", pos)
            end = size if comma < 0 else comma
            descriptor, pos = value[pos:end].strip(), end + 1
        if url:
            yield url, descriptor


def density(descriptor: str, viewport: int = VIEWPORT_WIDTH) -> float | None:
    """The pixel density a srcset descriptor gives its candidate at ``viewport`` CSS pixels
    wide: ``2x`` is 2.0, ``1920w`` is 1920 / viewport (the image's width taken as the
    viewport's, the default of ``sizes``), none is 1.0; None if it is not one of these."""
    if not descriptor:
        return 1.0
    token = descriptor.split()[0]
    try:
        value = float(token[:-1])
    except ValueError:
        return None
    if not (value > 0 and math.isfinite(value)):
        return None
    unit = token[-1].lower()
    if unit == "x":
        return value
    return value / viewport if unit == "w" else None


def srcset_choice(value: str, viewport: int = VIEWPORT_WIDTH) -> str | None:
    """The one candidate of a ``srcset`` a browser at ``viewport`` CSS pixels wide and a
    device pixel ratio of 1 loads: the least dense at least 1x, else the densest (the
    first of equals); None if no candidate has a usable descriptor."""
    best: tuple[float, str] | None = None
    for url, descriptor in srcset_candidates(value):
        d = density(descriptor, viewport)
        if d is None:
            continue
        if best is None or (best[0] < 1.0 and d > best[0]) or (1.0 <= d < best[0]):
            best = (d, url)
    return None if best is None else best[1]


def link_embed_kind(rels: set[str]) -> str | None:
    """The kind of a ``link`` element with these rel tokens if it is an embed, else None."""
    for rel in EMBED_RELS:
        if rel in rels:
            return "link/" + rel
    if "shortcut" in rels and "icon" in rels:
        return "link/icon"
    return None


def raw_embeds(tree: LexborHTMLParser, budget: EmbedBudget) -> None:
    """Add the raw embeds of one parsed slice to budget, in document order (the link walk
    in ``hive.fetch.parse`` leaves the ``link`` elements that are embeds to this one).
    One selector walks the tree once: a walk per tag cost a page with no embeds ~100 us,
    this one ~25 us."""
    for node in tree.css(_SELECTOR):
        tag, attrs = node.tag or "", node.attributes
        if tag == "link":
            rel = attrs.get("rel")
            kind = link_embed_kind(set(rel.lower().replace(",", " ").split())) if rel else None
            href = attrs.get("href")
            if kind is not None and href and not budget.add(href, kind):
                return
            continue
        for attr, kind in _SINGLE.get(tag, ()):
            value = attrs.get(attr)
            if value and not budget.add(value, kind):
                return
        srcset_kind = _SRCSET.get(tag)
        srcset = attrs.get("srcset") if srcset_kind else None
        if srcset_kind and srcset:
            chosen = srcset_choice(srcset)
            if chosen is not None and not budget.add(chosen, srcset_kind):
                return
        if tag == "style" and not budget.css(node.text(deep=True) or "", "style"):
            return
        style = attrs.get("style")
        if style and not budget.css(style, "style-attr"):
            return


def resolve(
    budget: EmbedBudget, base: str, max_url_length: int = 2048, query_encoding: str = "utf-8",
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """(canonical URL, kind) of each raw embed kept, distinct, by rank then in the order
    found, resolved against base; and the refused, counted by URLError reason (``data:``
    is ``scheme``)."""
    embeds: dict[str, str] = {}
    # A plain dict, not a Counter: most pages refuse nothing, and a Counter costs ~1 us to make.
    refused: dict[str, int] = {}
    for raw, kind in budget.in_order():
        href = raw.strip(_C0_OR_SPACE)
        if not href or href[0] == "#":
            continue
        try:
            url = canonicalize(href, base, max_url_length, query_encoding)
        except URLError as exc:
            refused[exc.reason] = refused.get(exc.reason, 0) + 1
            continue
        embeds.setdefault(url, kind)
    return list(embeds.items()), refused


def css_embeds(
    base_url: str, body: bytes, charset: str | None, budget: EmbedBudget,
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The embeds of a stylesheet fetched from base_url (kinds ``css/url``, ``css/import``),
    read as its BOM or Content-Type charset says, else UTF-8; see :func:`resolve`."""
    encoding = "utf-8-sig"
    if charset and not body.startswith(codecs.BOM_UTF8):
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            encoding = "utf-8"
    # Only what the budget may scan is decoded (4 bytes a character at most).
    text = body[: 4 * budget.max_css_bytes + 4].decode(encoding, "replace")
    budget.css(text, "css")
    return resolve(budget, base_url, budget.max_url_length)
