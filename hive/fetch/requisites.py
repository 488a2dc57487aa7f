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
* **From CSS** (:func:`css_urls`): ``url(...)`` quoted or not, and ``@import "x"``
  (``@import url(x)`` is a ``url``). Comments are not skipped: a URL in one is taken,
  which costs a fetch at most. ``data:`` URLs are left to canonicalization, which
  refuses them.
* **Bounded**: CSS is scanned for at most ``max_css_bytes`` characters per document
  (every ``style`` element and attribute of a page counted together), a URL longer
  than ``max_url_length`` is not matched (so each match attempt is bounded, and a
  hostile ``url("`` repeated without an end stays linear), and a document yields at
  most ``max_embeds`` distinct raw URLs; the result says when a bound cut it short.
* A ``style`` element or an attribute longer than parse's ``SLICE`` (256 KiB) is cut
  by the slicing of the page, and its embeds are not found: the bound that keeps the
  parse tree small costs the requisites of such pages.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from hive.core.urls import canonicalize
from hive.errors import URLError

__all__ = [
    "EMBED_RELS", "EmbedBudget", "css_embeds", "css_urls", "link_embed_kind", "raw_embeds",
    "resolve", "srcset_urls",
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
_SELECTOR = ",".join([*_SINGLE, "style", "[style]"])
_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def _css_pattern(max_url_length: int) -> re.Pattern[str]:
    n = max(1, max_url_length)
    return re.compile(
        rf"""url\(\s*+(?:"([^"\n]{{0,{n}}}+)"|'([^'\n]{{0,{n}}}+)'|([^)\s"']{{1,{n}}}+)\s*+\))"""
        rf"""|@import\s++(?:"([^"\n]{{0,{n}}}+)"|'([^'\n]{{0,{n}}}+)')""",
        re.IGNORECASE,
    )


_PATTERNS: dict[int, re.Pattern[str]] = {}


@dataclass(slots=True)
class EmbedBudget:
    """What a document may still yield: CSS characters to scan and distinct raw URLs.

    ``found``: raw URL -> kind, in the order found (a URL keeps its first kind).
    ``truncated``: a bound cut extraction short."""

    max_css_bytes: int
    max_embeds: int
    max_url_length: int = 2048
    found: dict[str, str] = field(default_factory=dict)
    truncated: bool = False

    def add(self, raw: str, kind: str) -> bool:
        """Record one raw URL; False once the document may yield no more."""
        raw = raw.strip()
        if not raw or raw in self.found:
            return True
        if len(self.found) >= self.max_embeds:
            self.truncated = True
            return False
        self.found[raw] = kind
        return True

    def css(self, text: str, kind: str) -> bool:
        """Scan CSS text within the budget; False once the document may yield no more."""
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
        quoted, single, bare, imported, imported_single = match.groups()
        if imported is not None or imported_single is not None:
            yield (imported if imported is not None else imported_single or ""), True
        else:
            url = quoted if quoted is not None else single if single is not None else bare
            yield url or "", False


def srcset_urls(value: str) -> Iterator[str]:
    """The URLs of a ``srcset`` value: candidates split on commas, each a URL and an
    optional descriptor (the HTML Standard's parse, less descriptor checking)."""
    pos, size = 0, len(value)
    while pos < size:
        while pos < size and (value[pos] in ", \t\n\f\r"):
            pos += 1
        start = pos
        while pos < size and not value[pos].isspace():
            pos += 1
        url = value[start:pos]
        if url.endswith(","):
            url = url.rstrip(",")
        elif pos < size:
            # Skip the descriptor up to the comma that ends the candidate.
            comma = value.find(",", pos)
            pos = size if comma < 0 else comma + 1
        if url:
            yield url


def link_embed_kind(rels: set[str]) -> str | None:
    """The kind of a ``link`` element with these rel tokens if it is an embed, else None."""
    for rel in EMBED_RELS:
        if rel in rels:
            return "link/" + rel
    if "shortcut" in rels and "icon" in rels:
        return "link/icon"
    return None


def raw_embeds(tree: LexborHTMLParser, budget: EmbedBudget) -> None:
    """Add the raw embeds of one parsed slice to budget, in document order (``link``
    elements excepted: the link walk in ``hive.fetch.parse`` classifies those as it reads
    them). One selector walks the tree once: a walk per tag cost a page with no embeds
    ~100 us, this one ~25 us."""
    for node in tree.css(_SELECTOR):
        tag, attrs = node.tag or "", node.attributes
        for attr, kind in _SINGLE.get(tag, ()):
            value = attrs.get(attr)
            if value and not budget.add(value, kind):
                return
        srcset_kind = _SRCSET.get(tag)
        srcset = attrs.get("srcset") if srcset_kind else None
        if srcset_kind and srcset:
            for url in srcset_urls(srcset):
                if not budget.add(url, srcset_kind):
                    return
        if tag == "style" and not budget.css(node.text(deep=True) or "", "style"):
            return
        style = attrs.get("style")
        if style and not budget.css(style, "style-attr"):
            return


def resolve(
    budget: EmbedBudget, base: str, max_url_length: int = 2048, query_encoding: str = "utf-8",
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """(canonical URL, kind) of each raw embed found, distinct, in order, resolved against
    base; and the refused, counted by URLError reason (``data:`` is ``scheme``)."""
    embeds: dict[str, str] = {}
    # A plain dict, not a Counter: most pages refuse nothing, and a Counter costs ~1 us to make.
    refused: dict[str, int] = {}
    for raw, kind in budget.found.items():
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
