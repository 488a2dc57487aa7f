"""Link extraction and scope: table-driven cases, and no input makes extraction raise."""

from __future__ import annotations

import codecs
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive import config
from hive.errors import ConfigError, URLError
from hive.fetch import parse
from hive.fetch.parse import (
    ExtractResult,
    Scope,
    extract_links,
    media_type,
    refresh_url,
    registered_domain,
    sniff_binary,
)

PAGE = "http://a.test/dir/page.html"


def links(html: str, content_type: str | None = "text/html", nofollow: bool = True) -> list[str]:
    return extract_links(PAGE, html.encode(), content_type, nofollow).links


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        # relative forms
        ('<a href="b.html">', ["http://a.test/dir/b.html"]),
        ('<a href="../c">', ["http://a.test/c"]),
        ('<a href="/d?x=1&amp;y=2">', ["http://a.test/d?x=1&y=2"]),
        ('<a href="//b.test/e">', ["http://b.test/e"]),
        ('<a href="?q=1">', ["http://a.test/dir/page.html?q=1"]),
        ('<a href="HTTPS://C.test:443/x#frag">', ["https://c.test/x"]),
        ('<a href="  sub/f.html\n">', ["http://a.test/dir/sub/f.html"]),
        # base href: absolute, relative, refused (falls back to the page), only the first counts
        ('<base href="http://b.test/sub/"><a href="x">', ["http://b.test/sub/x"]),
        ('<base href="/other/"><a href="x">', ["http://a.test/other/x"]),
        ('<base href="javascript:void(0)"><a href="x">', ["http://a.test/dir/x"]),
        ('<base target="_top"><base href="/one/"><base href="/two/"><a href="x">',
         ["http://a.test/one/x"]),
        ('<a href="x"></a><base href="http://b.test/">', ["http://b.test/x"]),
        # frames, iframes, image maps
        ('<frameset><frame src="f1.html"><frame src="f2.html"></frameset>',
         ["http://a.test/dir/f1.html", "http://a.test/dir/f2.html"]),
        ('<iframe src="/embed"></iframe>', ["http://a.test/embed"]),
        ('<map><area href="m.html" shape="rect"></map>', ["http://a.test/dir/m.html"]),
        # link elements naming pages, and not resources or feeds
        ('<link rel="canonical" href="/canon">', ["http://a.test/canon"]),
        ('<link rel="next" href="p2"><link rel="prev" href="p0">',
         ["http://a.test/dir/p2", "http://a.test/dir/p0"]),
        ('<link rel="alternate" hreflang="de" href="/de/">', ["http://a.test/de/"]),
        ('<link rel="alternate" type="text/html" href="/h">', ["http://a.test/h"]),
        ('<link rel="alternate" type="application/rss+xml" href="/feed">', []),
        ('<link rel="stylesheet" href="s.css"><link rel="icon" href="i.ico">', []),
        ('<link rel="alternate stylesheet" href="alt.css">', []),
        ('<link rel="preload" href="font.woff2"><link href="/norel">', []),
        # meta refresh
        ('<meta http-equiv="refresh" content="0; url=/next">', ["http://a.test/next"]),
        ("<meta http-equiv=REFRESH content=\"5;URL='http://b.test/r'\">", ["http://b.test/r"]),
        ('<meta http-equiv="refresh" content="30">', []),
        # skipped: fragments, empty hrefs, self links, no href
        ('<a href="#top"><a href=""><a href="page.html"><a href="#"><a name="x"><a href>', []),
        # duplicates: raw repeats and spellings of one URL
        ('<a href="x">1</a><a href="x">2</a><a href="./x"></a><a href="http://A.test/dir/x">',
         ["http://a.test/dir/x"]),
        # order found is kept
        ('<a href="/2"></a><a href="/1"></a>', ["http://a.test/2", "http://a.test/1"]),
        # broken HTML
        ('<div><p><a href=unquoted.html>x<a href="y.html"', ["http://a.test/dir/unquoted.html"]),
        ('<table><a href="t.html"><tr><td><a href=u.html></table></b></i>',
         ["http://a.test/dir/t.html", "http://a.test/dir/u.html"]),
        ('<a href="z.html"<a href="w.html">', ["http://a.test/dir/z.html"]),
        ("<!-- <a href='commented.html'> --><script>'<a href=\"s.html\">'</script>", []),
        ('<svg><a href="/svg-link"></a></svg>', ["http://a.test/svg-link"]),
    ],
)
def test_links(html: str, expected: list[str]) -> None:
    assert links(html) == expected


N = ["http://a.test/n"]


@pytest.mark.parametrize(
    ("html", "honour", "expected", "nofollow_count", "page_nofollow"),
    [
        ('<a rel="nofollow" href="/n"><a href="/y">', True, ["http://a.test/y"], 1, False),
        ('<a rel="NoFollow noopener" href="/n">', True, [], 1, False),
        ('<a rel="external nofollow" href="/n"><area rel=nofollow href="/m">', True, [], 2, False),
        ('<a rel="nofollower" href="/n">', True, N, 0, False),
        ('<a rel="nofollow" href="/n">', False, N, 0, False),
        ('<a rel="nofollow" href="/n"><a href="/n">', True, N, 0, False),
        ('<meta name="robots" content="nofollow"><a href=/n><iframe src=/i>', True, [], 2, True),
        ('<meta name="ROBOTS" content="noindex, nofollow"><a href="/n">', True, [], 1, True),
        ('<meta name="robots" content="none"><link rel=next href="/p">', True, [], 1, True),
        ('<meta name="robots" content="noindex"><a href="/n">', True, N, 0, False),
        ('<meta name="robots" content="nofollow"><a href="/n">', False, N, 0, True),
        ('<meta name="googlebot" content="nofollow"><a href="/n">', True, N, 0, False),
        ('<meta name="robots" content="nofollow"><meta http-equiv="refresh" content="0;url=/r">',
         True, ["http://a.test/r"], 0, True),
    ],
)
def test_nofollow(
    html: str, honour: bool, expected: list[str], nofollow_count: int, page_nofollow: bool
) -> None:
    result = extract_links(PAGE, html.encode(), "text/html", honour)
    assert result.links == expected
    assert result.refused.get("nofollow", 0) == nofollow_count
    assert result.nofollow is page_nofollow


def test_refused_links_are_counted_by_reason() -> None:
    html = (
        '<a href="javascript:void(0)"><a href="mailto:x@a.test"><a href="tel:+123">'
        '<a href="data:text/html,hi"><a href="ftp://a.test/f"><a href="mailto:x@a.test">'
        '<a href="http://bad host/"><a href="http://a.test:99999/"><a href="http://@/x">'
        '<a href="/ok">'
    )
    result = extract_links(PAGE, html.encode(), "text/html")
    assert result.links == ["http://a.test/ok"]
    assert result.refused == {"scheme": 5, "bad_host": 2, "no_host": 1}


@pytest.mark.parametrize(
    "content_type",
    ["image/png", "application/pdf", "text/plain", "application/json", "text/css", "html"],
)
def test_non_html_types_are_not_parsed(content_type: str) -> None:
    result = extract_links(PAGE, b'<a href="/x">', content_type)
    assert result == ExtractResult(skipped="not_html")


@pytest.mark.parametrize(
    "content_type",
    ["text/html", "Text/HTML; Charset=UTF-8", "application/xhtml+xml", " text/html ;q", "", None],
)
def test_html_types_are_parsed(content_type: str | None) -> None:
    assert links('<a href="/x">', content_type) == ["http://a.test/x"]


@pytest.mark.parametrize(
    "body",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b'<a href="/x">',
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + b'<a href="/x">',
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj <</Type /Catalog>>",
        bytes(range(1, 32)) * 4 + b'<a href="/x">',
        b'<a href="/x">' + b"\x00",
    ],
    ids=["png", "gif", "pdf", "controls", "nul"],
)
def test_binary_labelled_html_is_not_parsed(body: bytes) -> None:
    assert extract_links(PAGE, body, "text/html") == ExtractResult(skipped="binary")


def test_sniff() -> None:
    assert not sniff_binary(b"")
    assert not sniff_binary("<p>caf\u00e9 \u65e5\u672c</p>\t\r\n\f".encode() * 50)
    assert not sniff_binary(b"\x1b$B" + b"x" * 100)  # ISO-2022-JP escapes
    assert not sniff_binary(codecs.BOM_UTF16_LE + '<a href="/x">'.encode("utf-16-le"))
    assert not sniff_binary(b"<p>" + b"\x0b" + b"text " * 100)
    assert sniff_binary(os.urandom(1024) + b"\x00")
    assert sniff_binary(b"x" * 1024 + b"\x00") is False  # only the first KiB is looked at


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        ('<a href="caf\u00e9.html">'.encode("cp1252"), "text/html; charset=windows-1252",
         ["http://a.test/dir/caf%C3%A9.html"]),
        ('<a href="caf\u00e9.html">'.encode("cp1252"), "text/html; charset=ISO-8859-1",
         ["http://a.test/dir/caf%C3%A9.html"]),
        ('<meta charset="windows-1251"><a href="/\u0434">'.encode("cp1251"), "text/html",
         ["http://a.test/%D0%B4"]),
        ('<a href="/\u65e5">'.encode(), "text/html; charset=utf-8", ["http://a.test/%E6%97%A5"]),
        ('<a href="/\u65e5">'.encode(), "text/html; charset=bogus", ["http://a.test/%E6%97%A5"]),
        ('<a href="/\u65e5">'.encode(), "text/html; charset=rot13", ["http://a.test/%E6%97%A5"]),
        (b'<a href="/\xff">', "text/html; charset=punycode", ["http://a.test/%EF%BF%BD"]),
        ('<meta charset="windows-1251"><a href="/\u65e5">'.encode(), "text/html; charset=utf-8",
         ["http://a.test/%E6%97%A5"]),
        ('<a href="/\u65e5">'.encode("utf-16"), "text/html", ["http://a.test/%E6%97%A5"]),
        ('<a href="/\u65e5">'.encode("shift_jis"), 'text/html; charset="Shift_JIS"',
         ["http://a.test/%E6%97%A5"]),
        # A query is escaped in the page's encoding (WHATWG's encoding override), the path
        # in UTF-8; what the encoding cannot hold is written &#N;, escaped.
        ('<a href="/\u00e9?q=\u00e9">'.encode("latin-1"), "text/html; charset=ISO-8859-1",
         ["http://a.test/%C3%A9?q=%E9"]),
        ('<meta charset="windows-1252"><a href="?q=\u00e9&r=\u20ac">'.encode("cp1252"),
         "text/html", ["http://a.test/dir/page.html?q=%E9&r=%80"]),
        ('<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">'
         '<a href="/s?q=\u0434">'.encode("koi8_r"), None, ["http://a.test/s?q=%C4"]),
        ('<a href="/s?q=\u0101">'.encode("cp1252", "xmlcharrefreplace").replace(b"&#257;",
         "\u0101".encode("utf-8")), "text/html; charset=utf-8", ["http://a.test/s?q=%C4%81"]),
        ('<a href="/s?q=\u65e5\u00e9">'.encode("shift_jis", "replace"),
         "text/html; charset=Shift_JIS", ["http://a.test/s?q=%93%FA?"]),
        ('<meta charset="windows-1251"><a href="/s?q=\u00e9">'.encode("utf-8"),
         "text/html; charset=windows-1250", ["http://a.test/s?q=%C3%A9"]),
        ('<a href="/s?q=\u00e9">'.encode("utf-16"), "text/html; charset=windows-1252",
         ["http://a.test/s?q=%C3%A9"]),
    ],
)
def test_charsets(body: bytes, content_type: str, expected: list[str]) -> None:
    assert extract_links(PAGE, body, content_type).links == expected


def test_a_query_character_the_pages_charset_lacks_is_sent_as_a_reference() -> None:
    body = '<a href="/s?q=\u0101">'.encode("iso-8859-4")  # ā is 0xE0 in Latin-4
    assert extract_links(PAGE, body, "text/html; charset=iso-8859-4").links == [
        "http://a.test/s?q=%E0"
    ]
    # ā, which windows-1252 lacks, written as a character reference
    body = '<meta charset="windows-1252"><a href="/s?q=&#257;">'.encode("ascii")
    assert extract_links(PAGE, body, "text/html").links == ["http://a.test/s?q=%26%23257%3B"]


def test_links_stop_at_the_cap_and_say_so() -> None:
    html = "".join(f'<a href="/{i}">' for i in range(50)) + '<a href="/0">'
    result = extract_links(PAGE, html.encode(), "text/html", max_links=20)
    assert result.links == [f"http://a.test/{i}" for i in range(20)] and result.truncated
    exact = extract_links(PAGE, html.encode(), "text/html", max_links=50)
    assert len(exact.links) == 50 and not exact.truncated, "repeats do not count"
    marked = "".join(f'<a rel=nofollow href="/n{i}">' for i in range(50)) + '<a href="/y">'
    result = extract_links(PAGE, marked.encode(), "text/html", max_links=20)
    assert result.links == [] and result.refused == {"nofollow": 20} and result.truncated
    refreshes = "".join(f'<meta http-equiv=refresh content="0;url=/r{i}">' for i in range(50))
    result = extract_links(PAGE, (refreshes + html).encode(), "text/html", max_links=20)
    assert result.links == [f"http://a.test/r{i}" for i in range(20)] and result.truncated


def test_a_document_larger_than_a_slice_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut into slices, a page keeps its base, its robots meta and every link."""
    monkeypatch.setattr(parse, "SLICE", 64)
    head = '<head><base href="/b/"><meta http-equiv=refresh content="0;url=/r"></head>'
    links_html = "".join(f'<p class="x"><a href="{i}">link {i}</a></p>' for i in range(40))
    result = extract_links(PAGE, (head + links_html).encode(), "text/html")
    assert result.links == ["http://a.test/r"] + [f"http://a.test/b/{i}" for i in range(40)]
    nofollow = '<meta name="robots" content="nofollow">' + links_html
    result = extract_links(PAGE, nofollow.encode("cp1252"), "text/html; charset=cp1252")
    assert result.links == [] and result.refused == {"nofollow": 40}


def test_the_url_length_limit_is_the_scopes() -> None:
    long = "/" + "a" * 3000
    html = f'<a href="{long}"><a href="/short">'.encode()
    assert extract_links(PAGE, html, "text/html", max_url_length=4096).links == [
        "http://a.test" + long, "http://a.test/short"
    ]
    result = extract_links(PAGE, html, "text/html", max_url_length=100)
    assert result.links == ["http://a.test/short"] and result.refused == {"too_long": 1}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; url=/next", "/next"),
        ("0;URL=/next", "/next"),
        ("5, url = 'quoted.html' trailing", "quoted.html"),
        ('1; url="dq.html', "dq.html"),
        ("0 /bare.html", "/bare.html"),
        ("0; urlish.html", "urlish.html"),
        (".5; url=/half", "/half"),
        ("30", None),
        ("0;", None),
        ("0; url=", None),
        ("url=/no-time", None),
        ("5x/next", None),
        ("", None),
        ("\u0665; url=/arabic-digit", None),
        ("1" * 50_000 + "x", None),
    ],
)
def test_refresh_url(content: str, expected: str | None) -> None:
    assert refresh_url(content) == expected


def test_media_type() -> None:
    assert media_type(None) == (None, None)
    assert media_type("Text/HTML; charset='Latin-1'") == ("text/html", "Latin-1")
    assert media_type("text/html;foo=bar") == ("text/html", None)
    assert media_type(" ; charset=utf-8") == (None, "utf-8")


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=3000),
    content_type=st.sampled_from([
        None, "text/html", "application/xhtml+xml", "text/html; charset=shift_jis",
        "text/html; charset=utf-16", "text/html; charset=hex", "text/html; charset=punycode",
        "text/html; charset=idna", "text/html; charset=x-unknown",
    ]),
)
def test_arbitrary_bytes_never_raise(body: bytes, content_type: str | None) -> None:
    result = extract_links(PAGE, body, content_type)
    assert all(url.startswith(("http://", "https://")) for url in result.links)


FRAGMENTS = [
    "<a href=", "<a href='", '<a href="', "<base href=", "<link rel=next href=", "<frame src=",
    "<meta http-equiv=refresh content='0;url=", "<meta name=robots content=nofollow>", "'", '"',
    ">", "</a>", "http://", "https://", "//", "/", "..", ".", "?", "#", "%", "%zz", "[", "]", ":",
    "@", "\\", " ", "\t", "\n", "\x00", "\ufffd", "\u00e9", "\u65e5", "a.test", "xn--", "0x7f.1",
    "[::1]", "javascript:", "rel=nofollow", "<!--", "-->", "<script>", "</script>", "&amp;",
]


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_hostile_markup_never_raises(parts: list[str]) -> None:
    result = extract_links(PAGE, "".join(parts).encode(), "text/html")
    assert len(result.links) == len(set(result.links))
    assert PAGE not in result.links


@pytest.mark.parametrize(
    ("mode", "url", "source", "expected"),
    [
        ("host", "http://a.test/x", "http://a.test/y", None),
        ("host", "https://a.test/x", "http://a.test/y", None),
        ("host", "http://www.a.test/x", "http://a.test/y", "scope_host"),
        ("host", "http://a.test:8080/x", "http://a.test/y", "scope_host"),
        ("host", "http://b.test/x", None, None),
        ("domain", "http://www.a.test/x", "http://a.test/y", None),
        ("domain", "http://x.y.a.test/x", "http://z.a.test:81/y", None),
        ("domain", "http://b.test/x", "http://a.test/y", "scope_domain"),
        ("domain", "http://news.bbc.co.uk/x", "http://www.bbc.co.uk/y", None),
        ("domain", "http://itv.co.uk/x", "http://bbc.co.uk/y", "scope_domain"),
        ("domain", "http://a.github.io/x", "http://b.github.io/y", "scope_domain"),
        ("domain", "http://www.example.com/x", "http://example.com/y", None),
        ("domain", "http://127.0.0.1/x", "http://127.0.0.2/y", "scope_domain"),
        ("domain", "http://127.0.0.1:81/x", "http://127.0.0.1/y", None),
        ("domain", "http://[::1]/x", "http://[::1]:8080/y", None),
        ("domain", "http://a.localhost/x", "http://b.a.localhost/y", None),
        ("domain", "http://b.test/x", None, None),
        ("any", "http://b.test/x", "http://a.test/y", None),
    ],
)
def test_scope_modes(mode: str, url: str, source: str | None, expected: str | None) -> None:
    assert Scope(mode).check(url, source) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.test/" + "x" * 2100, "too_long"),
        ("http://a.test/" + "/".join(f"s{i}" for i in range(16)), None),
        ("http://a.test/" + "/".join(f"s{i}" for i in range(17)), "path_depth"),
        ("http://a.test/" + "/".join(f"s{i}" for i in range(16)) + "/", None),
        ("http://a.test/a/b/a/b/a", "segment_repeat"),
        ("http://a.test/a/a/b/", None),
        ("http://a.test/cal/2024/01/01/01", "segment_repeat"),
        ("http://a.test/x?a/a/a/a", None),
        ("http://a.test/a//a///b", None),
        ("http://a.test/private/x", "deny"),
        ("http://a.test/report.PDF", "deny"),
        ("http://b.test/x", "not_allowed"),
        ("http://a.test/", None),
    ],
)
def test_scope_trap_guards_and_patterns(url: str, expected: str | None) -> None:
    scope = Scope("any", allow=[r"^https?://a\.test/"], deny=[r"/private/", r"(?i)\.pdf$"])
    assert scope.check(url, "http://a.test/") == expected


def test_scope_from_config_and_errors() -> None:
    cfg = config.load(environ={}).scope
    scope = Scope.from_config(cfg)
    assert (scope.mode, scope.max_url_length, scope.max_path_depth, scope.max_segment_repeat) == (
        cfg.mode, cfg.max_url_length, cfg.max_path_depth, cfg.max_segment_repeat,
    )
    assert scope.check("http://www.a.test/x", "http://a.test/") is None
    with pytest.raises(ConfigError, match="scope.deny"):
        Scope("any", deny=["("])
    with pytest.raises(ConfigError, match="scope.allow"):
        Scope("any", allow=["[a-"])
    with pytest.raises(ConfigError, match="scope.mode"):
        Scope("planet")


def test_registered_domain() -> None:
    assert registered_domain("forums.bbc.co.uk") == "bbc.co.uk"
    assert registered_domain("co.uk") == "co.uk"
    assert registered_domain("a.b.c.test") == "c.test"
    assert registered_domain("intranet") == "intranet"
    assert registered_domain("10.0.0.1") == "10.0.0.1"
    assert registered_domain("[2001:db8::1]") == "[2001:db8::1]"
    assert registered_domain("xn--fa-hia.de") == "xn--fa-hia.de"
    # The list's wildcard and exception rules, and its private section.
    assert registered_domain("a.b.c.kawasaki.jp") == "b.c.kawasaki.jp"
    assert registered_domain("a.city.kawasaki.jp") == "city.kawasaki.jp"
    assert registered_domain("a.b.ck") == "a.b.ck"
    assert registered_domain("a.www.ck") == "www.ck"
    assert registered_domain("a.b.github.io") == "b.github.io"
    assert registered_domain("github.io") == "github.io"


def test_registered_domain_uses_no_network_and_no_cache_dir(tmp_path: Path) -> None:
    script = """
import socket
def refuse(*args, **kwargs):
    raise RuntimeError("network access")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from hive.fetch.parse import registered_domain
assert registered_domain("www.bbc.co.uk") == "bbc.co.uk"
assert registered_domain("a.blogspot.com") == "a.blogspot.com"
"""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
        check=False, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("embeds", "url", "expected"),
    [
        ("any", "http://cdn.example/a.css", None),
        ("any", "http://a.test/private/x.png", "deny"),
        ("same_domain", "http://static.a.test/a.css", None),
        ("same_domain", "http://cdn.example/a.css", "scope_host"),
        ("off", "http://static.a.test/a.css", "scope_host"),
        ("off", "http://a.test/a.css", None),
    ],
)
def test_embeds_outside_scope_obey_scope_embeds(
    embeds: str, url: str, expected: str | None
) -> None:
    """An embed passes the trap guards and deny patterns as a link does; past them
    scope.embeds decides whether it may leave the scope (here: the page's host)."""
    scope = Scope("host", deny=[r"/private/"], embeds=embeds)
    assert scope.check(url, "http://a.test/page.html", embed=True) == expected
    if expected is None and url != "http://a.test/a.css":
        assert scope.check(url, "http://a.test/page.html") == "scope_host"


def test_an_unknown_embed_scope_is_refused() -> None:
    with pytest.raises(ConfigError, match="scope.embeds"):
        Scope("host", embeds="all")


def test_padded_links_are_trimmed_at_either_end() -> None:
    html = '<a href=" /lead"><a href="/trail\t"><a href="\x0c/both "><a href=" #top ">'
    assert links(html) == ["http://a.test/lead", "http://a.test/trail", "http://a.test/both"]


def test_one_scope_judges_the_links_of_pages_in_turn() -> None:
    """A scope shared by fetch threads sees the links of one page, then another's: each
    link is judged against its own page."""
    host, domain = Scope("host"), Scope("domain")
    for _ in range(2):
        assert host.check("http://a.test/x", "http://a.test/p") is None
        assert host.check("http://a.test/x", "http://b.test/p") == "scope_host"
        assert host.check("http://b.test/x", "http://b.test/p") is None
        assert domain.check("http://w.a.test/x", "http://a.test/p") is None
        assert domain.check("http://w.a.test/x", "http://b.test/p") == "scope_domain"


def _reference_check(scope: Scope, url: str, source: str | None) -> str | None:
    """Scope.check as its policy reads, one step at a time (links only, no patterns)."""
    if len(url) > scope.max_url_length:
        return "too_long"
    segments = [segment for segment in parse._path(url).split("/") if segment]
    if len(segments) > scope.max_path_depth:
        return "path_depth"
    if any(segments.count(s) >= scope.max_segment_repeat for s in segments):
        return "segment_repeat"
    if source is None or scope.mode == "any":
        return None
    host = parse.host_key(url)
    if host == parse.host_key(source):
        return None
    if scope.mode == "host":
        return "scope_host"
    same = parse._key_domain(host) == parse._key_domain(parse.host_key(source))
    return None if same else "scope_domain"


SCOPE_PIECES = st.sampled_from(
    ["http:", "https:", "//", "/", "?", ":", "a.test", "b.test", "w.a.test", ":81", "x", "y"]
)
URL_PIECES = st.lists(SCOPE_PIECES, max_size=10).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["host", "domain"]), URL_PIECES, URL_PIECES)
def test_scope_check_reads_any_string_as_its_policy_does(mode: str, url: str, source: str) -> None:
    """Canonical or not, a URL gets the reason (or the error) the policy's own steps give."""
    scope = Scope(mode, max_path_depth=4, max_segment_repeat=2)

    def outcome(check: Callable[[], str | None]) -> str | None:
        try:
            return check()
        except URLError as exc:
            return f"error: {exc.reason}"

    expected = outcome(lambda: _reference_check(scope, url, source))
    assert outcome(lambda: scope.check(url, source)) == expected
    assert outcome(lambda: scope.check(url, "http://a.test/p")) == outcome(
        lambda: _reference_check(scope, url, "http://a.test/p"))
