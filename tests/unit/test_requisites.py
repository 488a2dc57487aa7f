"""Page requisites out of HTML and CSS: every embedding element, kinds, bounds on hostile input."""

from __future__ import annotations

import time

from hive.fetch.parse import extract_links
from hive.fetch.requisites import EmbedBudget, css_embeds, css_urls, srcset_urls

PAGE = "http://a.test/dir/page.html"
HTML = b"""<!doctype html><html><head>
<base href="http://cdn.test/base/">
<link rel="stylesheet" href="site.css"><link rel="SHORTCUT Icon" href="/favicon.ico">
<link rel="preload" href="font.woff2" as="font"><link rel="modulepreload" href="m.js">
<link rel="canonical" href="http://a.test/canon"><link rel="next" href="/page2">
<script src="app.js"></script><script>var u = "url(not-css.png)";</script>
<style>@import "imp.css"; @import url('imp2.css');
body { background: url( "bg.png" ) } .x { background:url(x.png) } .d { src: url(data:x) }</style>
</head><body style="background-image: url('body.jpg')">
<a href="/next">next</a>
<img src="a.png" srcset="a-1x.png 1x, a-2x.png 2x,a-3x.png   3x">
<picture><source srcset="p.webp 480w, p-big.webp 1080w" type="image/webp">
<img src="p.jpg"></picture>
<video src="v.mp4" poster="poster.jpg"><source src="v.webm"></video><audio src="s.mp3"></audio>
<object data="o.swf"></object><embed src="e.swf"><iframe src="/frame"></iframe>
<img src="#"><img src="">
</body></html>"""


def budget(**over: int) -> EmbedBudget:
    limits = {"max_css_bytes": 1 << 20, "max_embeds": 1000, **over}
    return EmbedBudget(limits["max_css_bytes"], limits["max_embeds"])


def test_every_embedding_element_with_its_kind() -> None:
    result = extract_links(PAGE, HTML, "text/html", embeds=budget())
    cdn = "http://cdn.test/base/"
    assert dict(result.embeds) == {
        cdn + "site.css": "link/stylesheet", "http://cdn.test/favicon.ico": "link/icon",
        cdn + "font.woff2": "link/preload", cdn + "m.js": "link/modulepreload",
        cdn + "a.png": "img/src", cdn + "p.jpg": "img/src", cdn + "app.js": "script/src",
        cdn + "v.webm": "source/src", cdn + "v.mp4": "video/src",
        cdn + "poster.jpg": "video/poster", cdn + "s.mp3": "audio/src",
        cdn + "o.swf": "object/data", cdn + "e.swf": "embed/src",
        cdn + "a-1x.png": "img/srcset", cdn + "a-2x.png": "img/srcset",
        cdn + "a-3x.png": "img/srcset", cdn + "p.webp": "source/srcset",
        cdn + "p-big.webp": "source/srcset",
        cdn + "imp.css": "style/import", cdn + "imp2.css": "style/url",
        cdn + "bg.png": "style/url", cdn + "x.png": "style/url",
        cdn + "body.jpg": "style-attr/url",
    }
    assert result.embeds_refused == {"scheme": 1}  # url(data:x)
    assert not result.embeds_truncated
    # Links are what they were: embeds are apart, page-naming link elements stay links.
    assert result.links == extract_links(PAGE, HTML, "text/html").links
    assert set(result.links) == {"http://a.test/canon", "http://cdn.test/page2",
                                 "http://cdn.test/next", "http://cdn.test/frame"}
    assert extract_links(PAGE, HTML, "text/html").embeds == []


def test_a_nofollow_page_keeps_its_requisites() -> None:
    page = b'<meta name="robots" content="nofollow"><a href="/x">x</a><img src="/i.png">'
    result = extract_links(PAGE, page, "text/html", embeds=budget())
    assert result.links == [] and result.embeds == [("http://a.test/i.png", "img/src")]


def test_css_references_quoted_unquoted_and_imports() -> None:
    css = """@import "a.css"; @import 'b.css' screen; @import url(c.css);
    .a{background:url(d.png)} .b{background:URL( 'e.png' )} .c{src:url("f.woff")}
    .d{background:url()} .e{background:url(g.png"""
    assert list(css_urls(css)) == [
        ("a.css", True), ("b.css", True), ("c.css", False), ("d.png", False),
        ("e.png", False), ("f.woff", False),
    ]


def test_a_stylesheet_resolves_against_its_own_url() -> None:
    body = b'\xef\xbb\xbf@import "x.css"; a { background: url(../img/\xc3\xa9.png) }'
    embeds, refused = css_embeds("http://a.test/css/site.css", body, None, budget())
    assert embeds == [("http://a.test/css/x.css", "css/import"),
                      ("http://a.test/img/%C3%A9.png", "css/url")]
    assert refused == {}


def test_srcset_candidates() -> None:
    # As the HTML Standard reads it, a comma inside a URL is part of it ("d,e.png").
    assert list(srcset_urls(" a.png 1x,b.png,  c.png 2x , d,e.png 100w, f.png")) == [
        "a.png", "b.png", "c.png", "d,e.png", "f.png"]
    assert list(srcset_urls("data:image/png;base64,AAAA 1x, z.png 2x")) == [
        "data:image/png;base64,AAAA", "z.png"]


def test_a_million_urls_stop_at_the_bound() -> None:
    huge = "".join(f"a{{background:url(x{i}.png)}}" for i in range(1_000_000))
    b = budget(max_css_bytes=len(huge) + 1, max_embeds=500)
    assert not b.css(huge, "css")
    assert len(b.found) == 500 and b.truncated
    page = f"<style>{huge[:100_000]}</style>".encode()
    result = extract_links(PAGE, page, "text/html", embeds=budget(max_embeds=500))
    assert len(result.embeds) == 500 and result.embeds_truncated


def test_css_beyond_its_byte_budget_is_not_scanned() -> None:
    page = b"<style>" + b" " * 5000 + b"a{background:url(late.png)}</style><img src=i.png>"
    result = extract_links(PAGE, page, "text/html", embeds=budget(max_css_bytes=4000))
    assert result.embeds == [("http://a.test/dir/i.png", "img/src")]
    assert result.embeds_truncated


def test_hostile_inputs_stay_linear() -> None:
    unterminated = ('url("' + "x" * 3000) * 300 + "url(" * 200_000 + "@import '" + "y" * 1_000_000
    start = time.process_time()
    assert list(css_urls(unterminated, 2048)) == []
    srcset = ",".join(f"i{i}.png {i}w" for i in range(10_000))  # within one slice
    page = f'<img srcset="{srcset}">'.encode()
    result = extract_links(PAGE, page, "text/html", embeds=budget(max_embeds=1000))
    assert len(result.embeds) == 1000 and result.embeds_truncated
    # Not a timing assertion on speed: a quadratic scan of these would take minutes.
    assert time.process_time() - start < 60
