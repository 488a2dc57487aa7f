"""The CDXJ key of a URL is the ``surt`` package's, whether hive computes it (the common
form, hive.fetch.cdxj._plain_key) or hands it to surt: generated URLs at and around the
boundary of the common form, and the common URLs of a crawl taking the fast path."""

from __future__ import annotations

import surt
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hive.fetch import cdxj

# Pieces chosen to sit on both sides of every rule surt applies: www prefixes, IP forms,
# default and other ports, dot and empty segments, escapes, session ids, case, order.
LABEL = st.sampled_from(["www", "www2", "wwwx", "a", "B", "x-y", "h17", "0", "1", "0x1f",
                         "007", "com", "Test", "-", "xn--bcher-kva", "WWW"])
PORT = st.sampled_from(["", ":80", ":443", ":8080", ":0", ":080", ":65535", ":65536", ":1"])
SEGMENT = st.sampled_from(["a", "B", "", ".", "..", "%41", "%2F", "~u", "x;jsessionid=1",
                           "(s(abcdefghijklmnopqrstuvwx))", "index.aspx", "é", "a b", "p+q",
                           "$!*'", "c,d", "e=f", "g:h", "i@j", "k&l", "m-n_o.p"])
ARG = st.sampled_from(["a", "A=1", "b=2", "a=", "", "z=Y", "sid=0123456789abcdef0123456789abcdef",
                       "x=%20", "q=a+b", "jsessionid=0123456789abcdef0123456789ABCDEF",
                       "cfid=1&cftoken=2", "c=d=e", "é=1", "k=/p", "PHPSESSID=x"])


def reference(url: str) -> str:
    """What cdxj-indexer keys url by: surt's key, or the URL where surt raises."""
    try:
        return str(surt.surt(url))
    except Exception:  # noqa: BLE001 - as cdxj-indexer does
        return url


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp"]))
    host = ".".join(draw(st.lists(LABEL, min_size=1, max_size=4)))
    path = "".join("/" + s for s in draw(st.lists(SEGMENT, max_size=4)))
    if draw(st.booleans()):
        path += "/"
    query = ""
    if draw(st.booleans()):
        query = "?" + "&".join(draw(st.lists(ARG, max_size=4)))
    fragment = draw(st.sampled_from(["", "", "", "#f", "#"]))
    return f"{scheme}://{host}{draw(PORT)}{path}{query}{fragment}"


@given(urls())
@settings(max_examples=1500, deadline=None)
@example("http://www.Example.COM/A/b/?b=2&a=1&a")
@example("https://example.com:443")
@example("http://127.0.0.2:8080/x")
@example("http://www:65536")
@example("http://www?jsessionid=0123456789abcdef0123456789ABCDEF")
def test_every_key_is_surts(url: str) -> None:
    assert cdxj.url_key(url) == reference(url), url


def test_the_urls_of_a_crawl_take_the_fast_path() -> None:
    common = [
        "http://h17.test:8080/page/3", "https://www.example.org/", "http://docs.test/py/lib/os.html",
        "https://example.com/search?q=hive&page=2", "http://a.test/dir/", "http://a.test",
        "https://cdn.example.net/static/css/site-1.2.css",
    ]
    for url in common:
        assert cdxj._plain_key(url) == surt.surt(url), url
