"""The text host of the synthetic web: pages in several languages and encodings.

Served as ``text.<domain>`` when :class:`hive.testweb.Web` is made with ``texts=True``,
for the tests of a page's text and language (hive.fetch.text_sink). Its robots.txt
allows all; ``/`` (English) links every page below::

    /fr.html       French, windows-1252, said in the Content-Type charset
    /ja.html       Japanese, Shift_JIS, said only in a <meta charset>
    /de.html       German, Content-Encoding: gzip
    /huge.html     English paragraphs, HUGE_CHARS characters of text
    /broken.html   Content-Encoding: gzip over bytes that are not gzip
    /compress.html Content-Encoding: compress, a coding no client decodes
    /notes.txt     text/plain
    /empty.html    an HTML page without text
    /binary.html   random bytes with NULs, labelled text/html

:data:`LANGUAGES` is the language of each page that has one (ISO 639-3).
"""

from __future__ import annotations

import gzip
import random

from hive.testweb.graph import Response

LABEL = "text"
HUGE_CHARS = 400_000
_HTML = "text/html; charset=utf-8"
_ALLOW_ALL = b"User-agent: *\nDisallow:\n"

_ENGLISH = ("This page is written in plain English so that a language detector has enough "
            "words to recognise it without any doubt at all. ")
_FRENCH = ("Voilà une page écrite en français, avec des accents à décoder correctement : "
           "été, hôpital, façade, garçon. ")
_JAPANESE = "これは日本語で書かれたページです。言語の判定には十分な文字があります。"
_GERMAN = ("Diese Seite ist auf Deutsch geschrieben und wird komprimiert übertragen, "
           "damit der Text erst entpackt werden muss. ")

PAGES = ("/fr.html", "/ja.html", "/de.html", "/huge.html", "/broken.html", "/compress.html",
         "/notes.txt", "/empty.html", "/binary.html")
LANGUAGES = {"/": "eng", "/fr.html": "fra", "/ja.html": "jpn", "/de.html": "deu",
             "/huge.html": "eng"}
#: A sentence of each page, as its main text has it.
SENTENCES = {"/": _ENGLISH.strip(), "/fr.html": _FRENCH.strip(),
             "/ja.html": _JAPANESE, "/de.html": _GERMAN.strip()}


def _page(title: str, body: str, head: str = "") -> str:
    return (f"<!doctype html>\n<html><head>{head}<title>{title}</title></head>\n"
            f"<body>{body}</body></html>\n")


def _article(sentence: str, times: int) -> str:
    return "<article>" + f"<p>{sentence}</p>\n" * times + "</article>"


def respond(path: str) -> Response:
    """The answer to ``GET path`` on the text host."""
    links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in PAGES)
    match path:
        case "/robots.txt":
            return Response(200, _ALLOW_ALL, "text/plain")
        case "/":
            home = _page("Text", _article(_ENGLISH, 4) + f"<ul>{links}</ul>")
            return Response(200, home.encode())
        case "/fr.html":
            page = _page("Français", _article(_FRENCH, 4))
            return Response(200, page.encode("cp1252"), "text/html; charset=windows-1252")
        case "/ja.html":
            page = _page("日本語", _article(_JAPANESE, 4), '<meta charset="shift_jis">')
            return Response(200, page.encode("shift_jis"), "text/html")
        case "/de.html":
            body = gzip.compress(_page("Deutsch", _article(_GERMAN, 4)).encode())
            return Response(200, body, _HTML, (("Content-Encoding", "gzip"),))
        case "/huge.html":
            times = HUGE_CHARS // len(_ENGLISH) + 1
            return Response(200, _page("Huge", _article(_ENGLISH, times)).encode())
        case "/broken.html":
            return Response(200, b"this is not gzip " * 20, _HTML, (("Content-Encoding", "gzip"),))
        case "/compress.html":
            body = b"\x1f\x9d\x90" + _ENGLISH.encode()
            return Response(200, body, _HTML, (("Content-Encoding", "compress"),))
        case "/notes.txt":
            return Response(200, _ENGLISH.encode(), "text/plain; charset=utf-8")
        case "/binary.html":
            noise = random.Random("texts:binary").randbytes(4096)
            return Response(200, b"\x00" + noise)
        case "/empty.html":
            return Response(200, _page("", "<div></div>").encode())
    return Response(404, b"not found\n", "text/plain")
