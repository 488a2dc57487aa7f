"""A page's main text and its language, for corpus builders (WET records, an index's
``content_languages``).

Chosen by measurement on real pages (``python bench/bench_text.py``; bench/README.md):

- **Main text: Resiliparse** (``extract_plain_text(main_content=True)``, lexbor
  underneath). On 120 pages of the Python documentation it kept 98.5 % of the main
  division's paragraphs and 0.5 % of the navigation strings, at 6.6 CPU-ms a page;
  trafilatura kept 97.2 % and the same 0.5 %, at 88 CPU-ms.
- **Language: py3langid** (langid.py's model: 97 languages in py3langid 0.3, 142
  classes in 0.4) on the first ``LANGUAGE_SAMPLE`` characters of the main text: 95.6 %
  right on 90 chapters of the Debian Reference in six languages (the misses are
  chapters that open with English commands), 98.9 % on their first 200 characters, at
  1.75 CPU-ms a page; lingua was one point better at four times the CPU,
  Resiliparse's own detector 90 % and 63 % on 200 characters.

Bounds: the page is already bounded by ``fetch.max_decoded_bytes``; the text kept is
at most ``max_chars`` characters; the detector reads at most LANGUAGE_SAMPLE. A text
with fewer than MIN_LETTERS letters gets no language (None): a guess on a few words
is noise. The language is written as Common Crawl writes it, an ISO 639-3 code
(``eng``; py3langid gives ISO 639-1, ``en``, where a language has one: ``ISO_639_3``
turns each code it can give into its three letters); ``zxx``, the detector's "no
linguistic content", is no language (None).

Both libraries are the ``text`` extra; :func:`available` says whether they
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

# py3langid's two-letter codes (ISO 639-1) as ISO 639-3 codes, the individual language's or,
# for a macrolanguage (ar, fa, ms, no, sq, sw, et, lv, mn, ...), the macrolanguage's, as
# Common Crawl writes them; its other classes are three-letter codes already ("ace", "yue").
# tests/unit/test_text.py checks that every class of the installed model is covered.
ISO_639_3 = {
    "af": "afr", "am": "amh", "an": "arg", "ar": "ara", "as": "asm", "az": "aze", "ba": "bak",
    "be": "bel", "bg": "bul", "bn": "ben", "br": "bre", "bs": "bos", "ca": "cat", "cs": "ces",
    "cy": "cym", "da": "dan", "de": "deu", "dz": "dzo", "el": "ell", "en": "eng", "eo": "epo",
    "es": "spa", "et": "est", "eu": "eus", "fa": "fas", "fi": "fin", "fo": "fao", "fr": "fra",
    "fy": "fry", "ga": "gle", "gd": "gla", "gl": "glg", "gu": "guj", "ha": "hau", "he": "heb",
    "hi": "hin", "hr": "hrv", "ht": "hat", "hu": "hun", "hy": "hye", "id": "ind", "ig": "ibo",
    "is": "isl", "it": "ita", "ja": "jpn", "jv": "jav", "ka": "kat", "kk": "kaz", "km": "khm",
    "kn": "kan", "ko": "kor", "ku": "kur", "ky": "kir", "la": "lat", "lb": "ltz", "lg": "lug",
    "ln": "lin", "lo": "lao", "lt": "lit", "lv": "lav", "mg": "mlg", "mk": "mkd", "ml": "mal",
    "mn": "mon", "mr": "mar", "ms": "msa", "mt": "mlt", "my": "mya", "nb": "nob", "ne": "nep",
    "nl": "nld", "nn": "nno", "no": "nor", "oc": "oci", "om": "orm", "or": "ori", "pa": "pan",
    "pl": "pol", "ps": "pus", "pt": "por", "qu": "que", "ro": "ron", "ru": "rus", "rw": "kin",
    "sa": "san", "se": "sme", "si": "sin", "sk": "slk", "sl": "slv", "sn": "sna", "so": "som",
    "sq": "sqi", "sr": "srp", "st": "sot", "sv": "swe", "sw": "swa", "ta": "tam", "te": "tel",
    "tg": "tgk", "th": "tha", "tk": "tuk", "tl": "tgl", "tr": "tur", "tt": "tat", "ug": "uig",
    "uk": "ukr", "ur": "urd", "uz": "uzb", "vi": "vie", "vo": "vol", "wa": "wln", "xh": "xho",
    "yo": "yor", "zh": "zho", "zu": "zul",
}
NO_LANGUAGE = "zxx"  # ISO 639-2 and -3: no linguistic content


def iso_639_3(code: str) -> str | None:
    """The ISO 639-3 code of a class of the detector (None for "no linguistic content");
    ValueError for a code it is not known to give."""
    if code == NO_LANGUAGE:
        return None
    if len(code) == 3 and code.isascii() and code.isalpha() and code.islower():
        return code
    try:
        return ISO_639_3[code]
    except KeyError:
        raise ValueError(f"language code {code!r} of the detector has no ISO 639-3 code "
                         "in hive.fetch.text.ISO_639_3") from None


@dataclass(frozen=True, slots=True)
class PageText:
    """The main text of a page, cut to the configured length, and its language."""

    text: str
    language: str | None  # ISO 639-3, None when there is too little text to tell
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
    """The language of ``text`` (its first LANGUAGE_SAMPLE characters), an ISO 639-3 code,
    and the detector's probability; (None, 0.0) below MIN_LETTERS letters or without
    linguistic content."""
    sample = text[:LANGUAGE_SAMPLE]
    if sum(c.isalpha() for c in sample) < MIN_LETTERS:
        return None, 0.0
    code, probability = _detector()(sample)
    language = iso_639_3(str(code))
    return language, round(float(probability), 4) if language is not None else 0.0


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
