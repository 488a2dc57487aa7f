"""hive.fetch.text: a page's main text and language, on real pages where Debian has them
(python3-doc, debian-reference-*) and on pages made here for the bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hive.fetch import text

PYDOC = Path("/usr/share/doc/python3/html/library/json.html")
DEBREF = Path("/usr/share/debian-reference")

pytestmark = pytest.mark.skipif(
    not text.available() and os.environ.get("CI") != "true",
    reason="the text extra (resiliparse, py3langid) is not installed")


def test_the_main_text_leaves_navigation_out() -> None:
    if not PYDOC.exists() and os.environ.get("CI") != "true":
        pytest.skip("python3-doc is not installed")
    page = text.page_text(PYDOC.read_bytes(), "utf-8", 1_000_000)
    assert page.text.startswith("json — JSON encoder and decoder")
    assert "JSON (JavaScript Object Notation)" in page.text
    assert "Previous topic" not in page.text and "Quick search" not in page.text
    assert page.language == "eng" and page.confidence > 0.9 and not page.truncated


@pytest.mark.parametrize(("lang", "code"), [("de", "deu"), ("fr", "fra"), ("es", "spa"),
                                            ("it", "ita"), ("ja", "jpn")])
def test_the_language_of_real_pages(lang: str, code: str) -> None:
    if not DEBREF.is_dir() and os.environ.get("CI") != "true":
        pytest.skip("debian-reference is not installed")
    page = text.page_text((DEBREF / f"ch02.{lang}.html").read_bytes(), "utf-8", 1_000_000)
    assert page.language == code


def test_a_legacy_encoding_is_read_as_the_page_says() -> None:
    body = ("<html><body><main><p>" + "Voilà une phrase française très ordinaire, écrite "
            "pour vérifier le décodage. " * 4 + "</p></main></body></html>").encode("cp1252")
    page = text.page_text(body, "cp1252", 10_000)
    assert "Voilà une phrase française" in page.text and page.language == "fra"


def test_the_text_kept_is_bounded_and_says_so() -> None:
    body = ("<html><body><article>" + "<p>word " * 50_000 + "</article></body></html>").encode()
    page = text.page_text(body, "utf-8", 1000)
    assert len(page.text) == 1000 and page.truncated


def test_too_little_text_has_no_language() -> None:
    page = text.page_text(b"<html><body><p>Hi 42</p></body></html>", "utf-8", 1000)
    assert page.language is None and page.confidence == 0.0


def test_the_detector_reads_a_bounded_sample() -> None:
    """A page of a million letters costs the detector what its first LANGUAGE_SAMPLE cost:
    the text after the sample cannot change the answer."""
    english = "This sentence is plainly written in English for the detector. " * 40
    german = "Dieser Satz ist ganz offensichtlich auf Deutsch geschrieben worden. " * 20_000
    assert len(english) >= text.LANGUAGE_SAMPLE
    assert text.language_of(english + german)[0] == "eng"
    assert text.language_of(german)[0] == "deu"


def test_every_language_the_detector_can_give_has_its_iso_639_3_code() -> None:
    """Common Crawl writes ISO 639-3; py3langid gives ISO 639-1 where a language has one.
    Each class of the installed model maps to a distinct three-letter code (its
    macrolanguage's for one), "no linguistic content" to None."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    classes = set(LanguageIdentifier.from_model_file(MODEL_FILE).nb_classes)
    assert len(classes) > 90
    codes = {code: text.iso_639_3(code) for code in classes}
    assert codes.pop(text.NO_LANGUAGE, None) is None
    for code, three in codes.items():
        assert three is not None and len(three) == 3 and three.isascii() and three.isalpha()
        assert three.islower(), code
    assert len(set(codes.values())) == len(codes)  # no two classes read as one language
    assert {codes[c] for c in ("en", "de", "zh", "fa", "ms", "no", "ja")} == {
        "eng", "deu", "zho", "fas", "msa", "nor", "jpn"}
    assert set(text.ISO_639_3) >= {code for code in classes if len(code) == 2}
    assert len(set(text.ISO_639_3.values())) == len(text.ISO_639_3)


def test_a_code_the_table_lacks_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'xx'.*ISO_639_3"):
        text.iso_639_3("xx")
