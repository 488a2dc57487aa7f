"""A page's main text and its language, for corpus builders (WET records, an index's
``content_languages``).

Chosen by measurement on real pages (``python bench/bench_text.py``; bench/README.md):

- **Main text: Resiliparse** (``extract_plain_text(main_content=True)``, lexbor
  underneath). On 120 pages of the Python documentation it kept 98.5 % of the main
  division's paragraphs and 0.5 % of the navigation strings, at 6.6 CPU-ms a page;
  trafilatura kept 97.2 % and the same 0.5 %, at 88 CPU-ms.
- **Language: py3langid** (langid.py's model, 97 languages) on the first
  ``LANGUAGE_SAMPLE`` characters of the main text: 95.6 % right on 90 chapters of
  the Debian Reference in six languages (the misses are chapters that open with
  English commands), 98.9 % on their first 200 characters, at 1.75 CPU-ms a page;
  lingua was one point better at four times the CPU, Resiliparse's own detector
  90 % and 63 % on 200 characters.

Bounds: the page is already bounded by ``fetch.max_decoded_bytes``; the text kept is
at most ``max_chars`` characters; the detector reads at most LANGUAGE_SAMPLE. A text
with fewer than MIN_LETTERS letters gets no language (None): a guess on a few words
is noise. Both libraries are the ``text`` extra; :func:`available` says whether they
are installed, and the config refuses an ``outputs.sinks`` that names the text sink
(hive.fetch.text_sink) without them.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

LANGUAGE_SAMPLE = 2000
MIN_LETTERS = 20
EXTRA = "pip install 'hive-crawler[text]'"


@dataclass(frozen=True, slots=True)
class PageText:
    """The main text of a page, cut to the configured length, and its language."""

    text: str
    language: str | None  # ISO 639-1, None when there is too little text to tell
    confidence: float  # the detector's probability of ``language`` (0 without one)
    truncated: bool


def available() -> bool:
    """Whether the libraries of the ``text`` extra are installed."""
    return all(importlib.util.find_spec(name) is not None
               for name in ("resiliparse", "py3langid"))


@functools.cache
def _detector() -> Callable[[str], tuple[str, float]]:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    classify: Callable[[str], tuple[str, float]] = identifier.classify
    return classify


def language_of(text: str) -> tuple[str | None, float]:
    """The language of ``text`` (its first LANGUAGE_SAMPLE characters) and the detector's
    probability; (None, 0.0) below MIN_LETTERS letters."""
    sample = text[:LANGUAGE_SAMPLE]
    if sum(c.isalpha() for c in sample) < MIN_LETTERS:
        return None, 0.0
    language, probability = _detector()(sample)
    return str(language), round(float(probability), 4)


def page_text(html: bytes, encoding: str, max_chars: int) -> PageText:
    """The main text of an HTML page (boilerplate left out) and its language; ``encoding``
    is the codec the page is read with (hive.fetch.parse.page_encoding)."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html.decode(encoding, "replace"))
    text = str(extract_plain_text(tree, main_content=True))
    truncated = len(text) > max_chars
    if truncated:
        text = text[:max_chars]
    language, confidence = language_of(text)
    return PageText(text, language, confidence, truncated)
