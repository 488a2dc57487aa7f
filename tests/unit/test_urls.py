"""Canonical URLs: RFC 3986 section 6 normalization, WHATWG parsing, refusals, keys, hashes."""

from __future__ import annotations

from collections.abc import Callable

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.core import urls
from hive.core.urls import canonicalize, fingerprint, host_hash, host_key
from hive.errors import URLError

# RFC 3986 6.2.2 (syntax-based) and 6.2.3 (scheme-based) normalization.
RFC3986_NORMALIZATION = [
    # 6.2.2.1 case: scheme and host are case-insensitive, escapes uppercase, the path is not.
    ("HTTP://www.EXAMPLE.com/", "http://www.example.com/"),
    ("http://example.com/A/b/C", "http://example.com/A/b/C"),
    ("http://example.com/a%3ab%2fc", "http://example.com/a%3Ab%2Fc"),
    ("http://example.com/?q=%c3%a9", "http://example.com/?q=%C3%A9"),
    # 6.2.2.2 percent-encoding: unreserved characters are decoded, others kept.
    ("http://example.com/%7Euser", "http://example.com/~user"),
    ("http://example.com/%41%62%2D%2E%5F%7e%30", "http://example.com/Ab-._~0"),
    ("http://example.com/a%2Fb%3F%23%25", "http://example.com/a%2Fb%3F%23%25"),
    ("http://example.com/?a=%26&b=%3D", "http://example.com/?a=%26&b=%3D"),
    # 6.2.2.3 dot segments (RFC 3986 5.2.4).
    ("http://example.com/a/b/c/./../../g", "http://example.com/a/g"),
    ("http://example.com/mid/content=5/../6", "http://example.com/mid/6"),
    ("http://example.com/a/.", "http://example.com/a/"),
    ("http://example.com/a/..", "http://example.com/"),
    ("http://example.com/../../a", "http://example.com/a"),
    ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
    ("http://example.com/a/.%2e/b/%2e/c", "http://example.com/b/c"),
    ("http://example.com/a/.b/..c/...", "http://example.com/a/.b/..c/..."),
    ("http://example.com/a//b/../c", "http://example.com/a//c"),
    # 6.2.3 scheme-based: empty path, empty and default port.
    ("http://example.com", "http://example.com/"),
    ("http://example.com:/", "http://example.com/"),
    ("http://example.com:80/", "http://example.com/"),
    ("http://example.com:080/", "http://example.com/"),
    ("https://example.com:443/x", "https://example.com/x"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("http://example.com:8080", "http://example.com:8080/"),
    ("http://example.com?q", "http://example.com/?q"),
    # An empty query keeps its "?" (RFC 3986 6.2.3); the query keeps its order.
    ("http://example.com/?", "http://example.com/?"),
    ("http://example.com/?b=2&a=1&b=1", "http://example.com/?b=2&a=1&b=1"),
    # Fragments go; userinfo goes.
    ("http://example.com/a#frag", "http://example.com/a"),
    ("http://example.com/a?q#frag?x", "http://example.com/a?q"),
    ("http://user:pass@example.com/", "http://example.com/"),
    ("http://a@b@example.com/", "http://example.com/"),
    # What must be escaped is escaped, once.
    ("http://example.com/a b/é?q=a b&r=é", "http://example.com/a%20b/%C3%A9?q=a%20b&r=%C3%A9"),
    ("http://example.com/%20%C3%A9", "http://example.com/%20%C3%A9"),
    ('http://example.com/<>"`{|}^[]', "http://example.com/%3C%3E%22%60%7B%7C%7D%5E%5B%5D"),
    ("http://example.com/\x01\x7f", "http://example.com/%01%7F"),
    ("http://example.com/?q='x'\\", "http://example.com/?q=%27x%27%5C"),
    ("http://example.com/it's", "http://example.com/it's"),
    # A "%" without two hex digits is sent as written, as browsers do; beside one,
    # escapes of hex digits stay (decoding "%4%31" would make the escape "%41").
    ("http://example.com/%zz%4%", "http://example.com/%zz%4%"),
    ("http://example.com/%4%31?%4%31&%7e", "http://example.com/%4%31?%4%31&~"),
    ("http://example.com/%%7e%41/%41", "http://example.com/%~%41/%41"),
    ("http://example.com/a/%41?%", "http://example.com/a/A?%"),
    ("http://example.com/!$&'()*+,;=:@", "http://example.com/!$&'()*+,;=:@"),
    ("http://example.com/?/?:@", "http://example.com/?/?:@"),
]

# RFC 3986 5.4 reference resolution against http://a/b/c/d;p?q. Where WHATWG
# differs for http ("http:g" is relative to a same-scheme base) WHATWG wins;
# fragments are dropped and "g:h" is refused (not http).
RFC3986_RESOLUTION = [
    ("g", "http://a/b/c/g"),
    ("./g", "http://a/b/c/g"),
    ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"),
    ("//g", "http://g/"),
    ("?y", "http://a/b/c/d;p?y"),
    ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q"),
    ("g#s", "http://a/b/c/g"),
    ("g?y#s", "http://a/b/c/g?y"),
    (";x", "http://a/b/c/;x"),
    ("g;x", "http://a/b/c/g;x"),
    ("g;x?y#s", "http://a/b/c/g;x?y"),
    ("", "http://a/b/c/d;p?q"),
    (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"),
    ("..", "http://a/b/"),
    ("../", "http://a/b/"),
    ("../g", "http://a/b/g"),
    ("../..", "http://a/"),
    ("../../", "http://a/"),
    ("../../g", "http://a/g"),
    ("../../../g", "http://a/g"),
    ("../../../../g", "http://a/g"),
    ("/./g", "http://a/g"),
    ("/../g", "http://a/g"),
    ("g.", "http://a/b/c/g."),
    (".g", "http://a/b/c/.g"),
    ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"),
    ("./../g", "http://a/b/g"),
    ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"),
    ("g/../h", "http://a/b/c/h"),
    ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"),
    ("g?y/./x", "http://a/b/c/g?y/./x"),
    ("g?y/../x", "http://a/b/c/g?y/../x"),
    ("g#s/./x", "http://a/b/c/g"),
    ("g#s/../x", "http://a/b/c/g"),
    ("http:g", "http://a/b/c/g"),
    ("https:g", "https://g/"),
    ("http://other/x", "http://other/x"),
]

# WHATWG URL standard, for the special schemes http and https.
WHATWG = [
    # The IPv4 parser: every spelling a browser accepts becomes dotted decimal.
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "http://127.0.0.1/"),
    ("http://127.1/", "http://127.0.0.1/"),
    ("http://0x7F000001/", "http://127.0.0.1/"),
    ("http://127.0.0.1./", "http://127.0.0.1/"),
    ("http://192.168.257/", "http://192.168.1.1/"),
    ("http://0/", "http://0.0.0.0/"),
    ("http://0x/", "http://0.0.0.0/"),
    ("http://4294967295/", "http://255.255.255.255/"),
    ("http://１２７．０．０．１/", "http://127.0.0.1/"),
    ("http://%31%32%37.0.0.1/", "http://127.0.0.1/"),
    ("http://1.example/", "http://1.example/"),
    ("http://example.1a/", "http://example.1a/"),
    # IPv6: compressed, lowercase, IPv4-mapped in hex.
    ("http://[0:0:0:0:0:ffff:7f00:1]/", "http://[::ffff:7f00:1]/"),
    ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/"),
    ("http://[2001:DB8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/"),
    ("http://[1:0:0:2:0:0:0:3]/", "http://[1:0:0:2::3]/"),
    ("http://[::]/", "http://[::]/"),
    ("http://[1::]:80/", "http://[1::]/"),
    ("http://[1:2:3:4:5:6:7:8]/", "http://[1:2:3:4:5:6:7:8]/"),
    # Backslashes are slashes; tabs and newlines vanish; C0 and space are trimmed.
    ("http:\\\\example.com\\a\\b", "http://example.com/a/b"),
    ("http://example.com\\a?b\\c", "http://example.com/a?b%5Cc"),
    ("  \x00http://exa\tmple.com/a\nb\r\x1f ", "http://example.com/ab"),
    ("http://example.com/a b ", "http://example.com/a%20b"),
    # Special-scheme forms without "//" name a host when there is no base.
    ("http:example.com/a", "http://example.com/a"),
    ("http:/example.com/a", "http://example.com/a"),
    ("http:\\\\\\example.com/a", "http://example.com/a"),
    ("http:///example.com/", "http://example.com/"),
    # IDNA: UTS-46 non-transitional; ASCII labels as they are, lowercased.
    ("http://faß.de/", "http://xn--fa-hia.de/"),
    ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
    ("http://BÜCHER.EXAMPLE/", "http://xn--bcher-kva.example/"),
    ("http://ｅｘａｍｐｌｅ.com/", "http://example.com/"),
    ("http://例え。テスト/", "http://xn--r8jz45g.xn--zckzah/"),
    ("http://ex_ample.com/", "http://ex_ample.com/"),
    ("http://Ex_Ample.COM./", "http://ex_ample.com/"),
    ("http://xn--fa-hia.de/", "http://xn--fa-hia.de/"),
    ("http://%65xample.com/", "http://example.com/"),
    ("http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/"),
    # Symbols and emoji as browsers take them (UTS-46 without the IDNA 2008 table),
    # the same host whether spelled in Unicode or punycode.
    ("http://☃.net/", "http://xn--n3h.net/"),
    ("http://xn--n3h.net/", "http://xn--n3h.net/"),
    ("http://XN--N3H.net/", "http://xn--n3h.net/"),
    ("http://💩.la/", "http://xn--ls8h.la/"),
    ("http://xn--ls8h.la/", "http://xn--ls8h.la/"),
    ("http://-ä.com/", "http://xn----0fa.com/"),
]

RELATIVE_TO = "http://a/b/c/d;p?q"

# More relative forms: scheme-relative, backslashes and same-scheme forms.
WHATWG_RELATIVE = [
    ("//host/x", "http://a/b/c/d;p?q", "http://host/x"),
    ("//host/x", "https://a/", "https://host/x"),
    ("\\\\host\\x", "http://a/b", "http://host/x"),
    ("/\\host/x", "http://a/b", "http://host/x"),
    ("\\x", "http://a/b/c", "http://a/x"),
    ("http:/x", "http://a/b/c", "http://a/x"),
    ("http:\\\\host", "http://a/b/c", "http://host/"),
    ("http:", "http://a/b/c?q", "http://a/b/c?q"),
    ("https:/x", "http://a/b/c", "https://x/"),
    ("//host:443/", "https://a/", "https://host/"),
    ("//host:80/", "https://a/", "https://host:80/"),
    ("?", "http://a/b?q", "http://a/b?"),
    ("x y#z", "http://a/b/", "http://a/b/x%20y"),
    ("/a", "HTTP://A.COM:80/x/../y#f", "http://a.com/a"),
]

REFUSALS = [
    ("mailto:user@example.com", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("JavaScript:void(0)", "scheme"),
    ("data:text/html,hi", "scheme"),
    ("ftp://example.com/", "scheme"),
    ("tel:+1555", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("c:foo", "scheme"),
    ("http://", "no_host"),
    ("https:///", "no_host"),
    ("http://user@/", "no_host"),
    ("http://:80/", "no_host"),
    ("http://?q", "no_host"),
    ("http://exa mple.com/", "bad_host"),
    ("http://a..b/", "bad_host"),
    ("http://.a/", "bad_host"),
    ("http://a.com../", "bad_host"),
    ("http://./", "bad_host"),
    ("http://ex$ample.com/", "bad_host"),
    ("http://a%2Fb/", "bad_host"),
    ("http://a%ff/", "bad_host"),
    ("http://" + "a" * 64 + ".com/", "bad_host"),
    ("http://" + "a." * 127 + "com/", "bad_host"),
    ("http://" + "a" * 2000 + "/", "bad_host"),
    ("http://a\u200db.com/", "bad_host"),
    ("http://xn--ab-m1t.com/", "bad_host"),
    ("http://\u0301a.com/", "bad_host"),
    ("http://xn--a-wbb.com/", "bad_host"),
    ("http://xn--zz.com/", "bad_host"),
    ("http://xn--abc-.com/", "bad_host"),
    ("http://xn--.com/", "bad_host"),
    ("http://xn--a.com/", "bad_host"),
    ("http://xn--fass-jna.de/", "bad_host"),
    ("http://1.2.3.999/", "bad_host"),
    ("http://1.2.3.4.5/", "bad_host"),
    ("http://256.0.0.0x100/", "bad_host"),
    ("http://4294967296/", "bad_host"),
    ("http://09.1/", "bad_host"),
    ("http://foo.1/", "bad_host"),
    ("http://foo.0x1/", "bad_host"),
    ("http://a.com:99999/", "bad_host"),
    ("http://a.com:8a/", "bad_host"),
    ("http://a.com:80:80/", "bad_host"),
    ("http://a.com:-1/", "bad_host"),
    ("http://a.com:８０/", "bad_host"),
    ("http://[::1/", "bad_host"),
    ("http://[::1]x/", "bad_host"),
    ("http://[1:2:3:4:5:6:7:8:9]/", "bad_host"),
    ("http://[1::2::3]/", "bad_host"),
    ("http://[:1]/", "bad_host"),
    ("http://[1:]/", "bad_host"),
    ("http://[::1%25eth0]/", "bad_host"),
    ("http://[::ffff:1.2.3]/", "bad_host"),
    ("http://[::ffff:01.2.3.4]/", "bad_host"),
    ("http://[::ffff:256.2.3.4]/", "bad_host"),
    ("http://[1:2:3:4:5:6:7:1.2.3.4]/", "bad_host"),
    ("http://[g::]/", "bad_host"),
    ("", "malformed"),
    ("   ", "malformed"),
    ("/relative/without/base", "malformed"),
    ("//host/without/base", "malformed"),
    ("http://example.com/\ud800", "malformed"),
]

HOST_KEYS = [
    ("http://a.com/", "a.com"),
    ("https://a.com/x?y", "a.com"),
    ("HTTPS://A.com:443/", "a.com"),
    ("http://a.com:8080/", "a.com:8080"),
    ("https://a.com:8080/", "a.com:8080"),
    ("https://a.com:80/", "a.com:80"),
    ("http://a.com:443/", "a.com:443"),
    ("http://[::1]:8080/", "[::1]:8080"),
    ("http://0x7f.1/", "127.0.0.1"),
    ("http://Bücher.example/", "xn--bcher-kva.example"),
]


@pytest.mark.parametrize(("url", "expected"), RFC3986_NORMALIZATION + WHATWG)
def test_normalization(url: str, expected: str) -> None:
    assert canonicalize(url) == expected
    assert canonicalize(expected) == expected


@pytest.mark.parametrize(("ref", "expected"), RFC3986_RESOLUTION)
def test_rfc3986_resolution(ref: str, expected: str) -> None:
    assert canonicalize(ref, RELATIVE_TO) == expected


@pytest.mark.parametrize(("ref", "base", "expected"), WHATWG_RELATIVE)
def test_whatwg_relative(ref: str, base: str, expected: str) -> None:
    assert canonicalize(ref, base) == expected


@pytest.mark.parametrize(("url", "reason"), REFUSALS)
def test_refusals(url: str, reason: str) -> None:
    with pytest.raises(URLError) as info:
        canonicalize(url)
    assert info.value.reason == reason
    assert info.value.url == url
    assert isinstance(info.value, ValueError)


def _unicode_label(ascii_length: int) -> str:
    """A label of ``a``s and one ``ü`` whose xn-- form is ``ascii_length`` characters."""
    for count in range(ascii_length):
        label = "a" * count + "ü"
        if len("xn--" + label.encode("punycode").decode()) == ascii_length:
            return label
    raise AssertionError(ascii_length)


@pytest.mark.parametrize(("length", "accepted"), [(63, True), (64, False)])
def test_label_length_limits_apply_to_the_ascii_form(length: int, accepted: bool) -> None:
    label = _unicode_label(length)
    assert len(label) < 63
    alabel = "xn--" + label.encode("punycode").decode()
    host = "." + "b" * 63 + ".com"
    for url in (f"http://{label}{host}/", f"http://{alabel}{host}/", f"http://{label.upper()}{host}/"):
        if accepted:
            assert canonicalize(url) == f"http://{alabel}{host}/"
        else:
            with pytest.raises(URLError) as info:
                canonicalize(url)
            assert info.value.reason == "bad_host"


@pytest.mark.parametrize(
    "host",
    ["☃.com", "💩.la", "faß.de", "ü.a", "a\u200db.com", "\u0301a.com", "ا.com", "אב.1a",
     "a.א1", "١٢.com", "ab\u094d\u200dc.com"],
)
def test_unicode_and_punycode_spellings_of_a_host_are_judged_alike(host: str) -> None:
    labels = [
        "xn--" + label.encode("punycode").decode() if not label.isascii() else label
        for label in host.split(".")
    ]
    answers = []
    for spelling in (host, ".".join(labels)):
        try:
            answers.append(canonicalize(f"http://{spelling}/"))
        except URLError as exc:
            answers.append(exc.reason)
    assert answers[0] == answers[1], answers


SESSION_IDS = urls.SessionIds(["jsessionid", "phpsessid", "sid", "aspsessionid*", "cfid"])


@pytest.mark.parametrize(
    ("url", "stripped"),
    [
        ("http://a/x;jsessionid=ABC123?y=1", "http://a/x?y=1"),
        ("http://a/x;JSESSIONID=0123456789abcdef", "http://a/x"),
        ("http://a/x?PHPSESSID=0123456789abcdef0123456789abcdef", "http://a/x"),
        ("http://a/x?a=1&sid=0123456789abcdef&b=2", "http://a/x?a=1&b=2"),
        ("http://a/x?ASPSESSIONIDQQGGGNCU=ABCDEFGHIJKLMNOPQRSTUVWX&q", "http://a/x?q"),
        ("http://a/x?CFID=12345678", "http://a/x"),
        # content, not sessions: short or structured values, other names
        ("http://a/x?sid=42", "http://a/x?sid=42"),
        ("http://a/art.pl?sid=05/01/01/1234", "http://a/art.pl?sid=05/01/01/1234"),
        ("http://a/x?side=0123456789abcdef", "http://a/x?side=0123456789abcdef"),
        ("http://a/x?mysid=0123456789abcdef", "http://a/x?mysid=0123456789abcdef"),
        ("http://a/sid=0123456789abcdef", "http://a/sid=0123456789abcdef"),
        ("http://a/x?", "http://a/x?"),
    ],
)
def test_session_ids_are_left_out_of_the_fingerprint_only(url: str, stripped: str) -> None:
    assert SESSION_IDS.strip(url) == stripped
    assert fingerprint(url, SESSION_IDS) == fingerprint(stripped)
    assert canonicalize(url) == url, "what is fetched keeps its session id"
    if stripped != url:
        assert fingerprint(url) != fingerprint(stripped), "without the list, nothing is stripped"


def test_too_long() -> None:
    url = "http://example.com/" + "a" * 30
    assert canonicalize(url, max_length=len(url)) == url
    for long_url in (url, "HTTP://EXAMPLE.COM:80/" + "a" * 30):
        with pytest.raises(URLError) as info:
            canonicalize(long_url, max_length=len(url) - 1)
        assert info.value.reason == "too_long"
    with pytest.raises(URLError) as info:
        canonicalize("/" + "b" * 40, "http://example.com/", max_length=30)
    assert info.value.reason == "too_long"


def test_a_refused_base_refuses_the_reference_with_its_reason() -> None:
    for base, reason in (
        ("mailto:x@y", "scheme"),
        ("http://a..b/", "bad_host"),
        ("x", "malformed"),
    ):
        with pytest.raises(URLError) as info:
            canonicalize("/path", base)
        assert info.value.reason == reason
        assert info.value.url == "/path"


def test_an_absolute_url_needs_no_base() -> None:
    assert canonicalize("https://b.com/x", "mailto:x@y") == "https://b.com/x"


@pytest.mark.parametrize(("url", "key"), HOST_KEYS)
def test_host_key(url: str, key: str) -> None:
    assert host_key(canonicalize(url)) == key


def test_host_key_refuses_what_is_not_a_url() -> None:
    with pytest.raises(URLError):
        host_key("example.com")


def test_hashes_are_unsigned_64_bit_mmh3() -> None:
    url = canonicalize("http://a.com/x")
    assert fingerprint(url) == mmh3.hash64(url, signed=False)[0]
    assert host_hash("a.com") == mmh3.hash64("a.com", signed=False)[0]
    values = {fingerprint(f"http://a.com/{i}") for i in range(1000)}
    assert len(values) == 1000
    assert all(0 <= v < 2**64 for v in values)
    same = {host_hash(host_key(canonicalize(u))) for u in ("http://a.com/", "https://A.com:443/y")}
    assert len(same) == 1


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://www.example.com/a/b/c.html?x=1&y=2", None),
        ("http://example.com", None),
        ("http://example.com/a#frag", None),
        ("/a/b.html", "http://example.com/d/e.html"),
        ("b.html?q", "http://example.com/d/e.html"),
        ("?q=1", "http://example.com/d/e.html"),
        ("#top", "http://example.com/d/e.html"),
        ("http://Example.COM/a", None),
        ("http://example.com:8080/a?q", None),
        ("https://example.com:80", None),
        ("//other.example.com/a?q", "https://example.com/d/e.html"),
        ("../a/b.html", "http://example.com/d/f/e.html"),
        ("../../../a.html", "http://example.com/d/e.html"),
        ("./a.html", "http://example.com/d/e.html"),
        ("./", "http://example.com/d/e.html"),
        ("../", "http://example.com/d/e.html"),
    ],
)
def test_common_shapes_take_the_fast_path(url: str, base: str | None) -> None:
    fast = urls._fast(url, base, 2048)
    assert fast is not None
    assert fast == urls._slow(url, base, 2048)


# Hypothesis: URL-ish text built from the pieces parsers trip on.
PIECE_WORDS = (
    "http: https: HTTP: // / \\ [ ] : @ % %2e %2E %41 %7e %zz . .. ? # 0x 1 255 4294967295 010"
    " :: ffff 1.2.3.4 ß ü 。 xn-- a B com ８ \u00ad - _ ' \" < | é user:pw@ 80 ~"
)
PIECES = st.sampled_from([*PIECE_WORDS.split(), " ", "\t", "\n", "\x00"])
URLISH = st.lists(st.one_of(PIECES, st.text(max_size=3)), max_size=12).map("".join)
BASES = st.sampled_from([None, "http://a.com/b/c?d", "https://x.org", "HTTP://H/p/../q/"])

LABEL = st.text("abcdefghijklmnopqrstuvwxyzAZ0123456789-_", min_size=1, max_size=12)
SEGMENT = st.text("abcXYZ019-._~!$&'()*+,;=:@", max_size=8)
QUERY = st.text("abcXYZ019-._~!$&()*+,;=:@/?", max_size=12)
CANONICAL_LOOKING = st.builds(
    lambda scheme, labels, port, segments, query: (
        f"{scheme}://{'.'.join(labels)}{port}/{'/'.join(segments)}{query}"
    ),
    st.sampled_from(["http", "https"]),
    st.lists(LABEL, min_size=1, max_size=4),
    st.sampled_from(["", ":80", ":443", ":8080", ":080", ":65535", ":65536", ":99999", ":0"]),
    st.lists(SEGMENT, max_size=4),
    st.one_of(st.just(""), QUERY.map(lambda q: "?" + q)),
)
RELATIVE_LOOKING = st.builds(
    lambda lead, segments, query: lead + "/".join(segments) + query,
    st.sampled_from(["", "/", "?", "#", "//", "//h.", "./", "../", "../../", "./../", ".././"]),
    st.lists(SEGMENT, max_size=4),
    st.one_of(st.just(""), QUERY.map(lambda q: "?" + q)),
)


@settings(max_examples=400, deadline=None)
@given(st.text(), BASES)
def test_arbitrary_text_raises_only_url_error(text: str, base: str | None) -> None:
    try:
        canonicalize(text, base)
    except URLError as exc:
        assert exc.reason in {"scheme", "no_host", "bad_host", "too_long", "malformed"}


@settings(max_examples=300, deadline=None)
@given(URLISH, BASES)
def test_idempotent(text: str, base: str | None) -> None:
    try:
        once = canonicalize(text, base)
    except URLError:
        return
    assert canonicalize(once) == once
    assert canonicalize(once, base) == once


@settings(max_examples=300, deadline=None)
@given(CANONICAL_LOOKING)
def test_fast_and_slow_paths_agree_on_absolute_urls(url: str) -> None:
    slow = _outcome(urls._slow, url, None)
    fast = _outcome(urls._fast, url, None)
    assert fast in (None, slow)
    assert _outcome(canonicalize, url, None) == slow


@settings(max_examples=300, deadline=None)
@given(
    RELATIVE_LOOKING,
    st.sampled_from(["http://a.com/b/c.html?d", "https://x.org/", "http://h/p/q/",
                     "http://h/p/q/r/s?t"]),
)
def test_fast_and_slow_paths_agree_on_relative_urls(ref: str, base: str) -> None:
    slow = _outcome(urls._slow, ref, base)
    fast = _outcome(urls._fast, ref, base)
    assert fast in (None, slow)
    assert _outcome(canonicalize, ref, base) == slow


def _outcome(
    function: Callable[[str, str | None, int], str | None], url: str, base: str | None
) -> str | None:
    """The result of one canonicalizing function, or the reason it refused."""
    try:
        return function(url, base, 2048)
    except (URLError, urls.Refusal) as exc:
        return f"refused: {exc.reason}"


@pytest.mark.parametrize(
    "ref",
    [
        "", "#f", "/", "//", "//H.test", "//H.test:8080/a#f", "//h.test:80/", "?", "?q#f",
        "h", "h.html", "http", "http.html", "http:foo", "http:/h.test/a", "https:x",
        "HTTP://A.test/x", "http://A.TEST:8080/p#f", "http://A.test", "http://A.test?q",
        "http://a.test:80/", "http://a.test:080/", "http://a.test:65536/", "http://1.2.3.4/",
        "http://A.XN--FA-HIA.de/", "http://a..test/", "http://.a.test/", "http://a.test./",
        ".", "..", "./", "../", ".hidden", "..x", "./../a", "../../../a", "a/./b", "a/../b",
    ],
)
@pytest.mark.parametrize("base", [None, "http://a.com/b/c.html?d", "https://x.org/"])
def test_every_first_character_agrees_with_the_slow_path(ref: str, base: str | None) -> None:
    """The fast path tells shapes apart by their first character: each shape, and each
    near miss, comes out as the full parse has it."""
    slow = _outcome(urls._slow, ref, base)
    fast = _outcome(urls._fast, ref, base)
    assert fast in (None, slow)
    assert _outcome(canonicalize, ref, base) == slow


def test_an_origin_is_judged_once_whatever_it_is_found_with() -> None:
    """The fast path's verdict on an origin is cached by its spelling, and holds for every
    path and fragment after it, and for one spelling in another case."""
    assert canonicalize("http://A.Test:8080/x#f") == "http://a.test:8080/x"
    assert canonicalize("http://A.Test:8080/y?q") == "http://a.test:8080/y?q"
    assert canonicalize("http://A.Test:8080") == "http://a.test:8080/"
    assert canonicalize("http://a.test:8080/z") == "http://a.test:8080/z"
    assert urls._fast("http://A.Test:80/x", None, 2048) is None
    assert canonicalize("http://A.Test:80/x") == "http://a.test/x"


def test_the_origin_memo_keeps_no_spelling_longer_than_a_valid_origin() -> None:
    """A page decides how long its links' hosts are; the memo's bound does not depend on it."""
    urls._remembered_origin.cache_clear()
    long_host = "a" * 60 + "." + "b" * 300_000 + ".test"
    with pytest.raises(URLError):
        canonicalize(f"http://{long_host}/x")
    assert canonicalize("http://A.Test:8080/x") == "http://a.test:8080/x"
    info = urls._remembered_origin.cache_info()
    assert info.currsize == 1 and info.maxsize == 4096
