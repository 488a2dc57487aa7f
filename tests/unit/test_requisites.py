"""Page requisites out of HTML and CSS: every embedding element, kinds, bounds on hostile input."""

from __future__ import annotations

import time

from hive.fetch.parse import extract_links
from hive.fetch.requisites import (
    VIEWPORT_WIDTH,
    EmbedBudget,
    css_embeds,
    css_urls,
    srcset_candidates,
    srcset_choice,
)

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
        cdn + "a-1x.png": "img/srcset", cdn + "p-big.webp": "source/srcset",
        cdn + "imp.css": "style/import", cdn + "imp2.css": "style/import",
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
    css = """@import "a.css"; @import 'b.css' screen; @import url(c.css);@IMPORT URL( "c2.css" );
    .a{background:url(d.png)} .b{background:URL( 'e.png' )} .c{src:url("f.woff")}
    .d{background:url()} .e{background:url(g.png"""
    assert list(css_urls(css)) == [
        ("a.css", True), ("b.css", True), ("c.css", True), ("c2.css", True), ("d.png", False),
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
    assert list(srcset_candidates(" a.png 1x,b.png,  c.png 2x , d,e.png 100w, f.png")) == [
        ("a.png", "1x"), ("b.png", ""), ("c.png", "2x"), ("d,e.png", "100w"), ("f.png", "")]
    assert list(srcset_candidates("data:image/png;base64,AAAA 1x, z.png 2x")) == [
        ("data:image/png;base64,AAAA", "1x"), ("z.png", "2x")]


def test_one_srcset_candidate_the_one_a_1280_pixel_window_at_1x_loads() -> None:
    assert VIEWPORT_WIDTH == 1280
    # Densities: the least dense at least 1x; no descriptor is 1x.
    assert srcset_choice("a-3x.png 3x, a-2x.png 2x, a-1x.png 1x") == "a-1x.png"
    assert srcset_choice("a-2x.png 2x, a.png") == "a.png"
    assert srcset_choice("big.png 2x, mid.png 1.5x") == "mid.png"
    # Widths against the window: 1280w is 1x at 1280 pixels; 1600w is 1.25x.
    assert srcset_choice("s.png 480w, m.png 1280w, l.png 1600w, xl.png 3200w") == "m.png"
    assert srcset_choice("s.png 480w, l.png 1600w, xl.png 3200w") == "l.png"
    assert srcset_choice("s.png 480w, m.png 1000w") == "m.png", "none reaches 1x: the densest"
    assert srcset_choice("m.png 1280w", viewport=640) == "m.png"
    assert srcset_choice("s.png 320w, m.png 640w, l.png 1280w", viewport=640) == "m.png"
    # Equals: the first; unusable descriptors are skipped, as a browser drops them.
    assert srcset_choice("one.png 1x, two.png 1x") == "one.png"
    assert srcset_choice("bad.png 0x, worse.png -1w, junk.png qx, nan.png nanx, ok.png 2x") == (
        "ok.png")
    assert srcset_choice("bad.png 0x, junk.png 12") is None
    assert srcset_choice("") is None


def test_stylesheets_and_scripts_outrank_images_in_the_budget() -> None:
    """Issue 27, break 4: two stylesheets in the head, a body with one srcset of 5,000
    candidates and many images: the 2,000-embed budget kept 6 images, 1,994 srcset
    candidates and no stylesheet. Now the stylesheets, the script, the one srcset
    candidate a browser loads, then the images in document order until the budget."""
    srcset = ", ".join(f"/w/{i}.jpg {i + 1}w" for i in range(5000))
    images = "".join(f'<img src="/i/{i}.jpg">' for i in range(3000))
    page = (f'<html><head><link rel=stylesheet href="/a.css"><link rel=stylesheet href="/b.css">'
            f'<script src="/app.js"></script></head><body><img src="/i/0.jpg" srcset="{srcset}">'
            f"{images}<style>@import url(/late.css); .x {{ background: url(/x.png) }}</style>"
            f"</body></html>").encode()
    result = extract_links(PAGE, page, "text/html", embeds=budget(max_embeds=2000))
    site = "http://a.test"
    assert result.embeds[:5] == [
        (f"{site}/a.css", "link/stylesheet"), (f"{site}/b.css", "link/stylesheet"),
        (f"{site}/late.css", "style/import"), (f"{site}/app.js", "script/src"),
        (f"{site}/i/0.jpg", "img/src"),
    ]
    rest = result.embeds[5:]
    assert rest[0] == (f"{site}/w/1279.jpg", "img/srcset"), "1280w: 1x at 1280 pixels"
    assert rest[1:] == [(f"{site}/i/{i}.jpg", "img/src") for i in range(1, 1995)]
    assert len(result.embeds) == 2000 and result.embeds_truncated


def test_a_full_budget_of_images_yields_to_a_later_stylesheet() -> None:
    b = budget(max_embeds=3)
    for i in range(5):
        assert b.add(f"i{i}.png", "img/src")
    assert b.add("s.js", "script/src") and b.add("a.css", "link/stylesheet")
    assert list(b.in_order()) == [("a.css", "link/stylesheet"), ("s.js", "script/src"),
                                  ("i0.png", "img/src")]
    assert b.add("b.css", "css/import") and b.add("c.css", "style/import")
    assert list(b.in_order()) == [("a.css", "link/stylesheet"), ("b.css", "css/import"),
                                  ("c.css", "style/import")]
    assert not b.open and not b.add("d.css", "link/stylesheet"), "full of stylesheets"
    assert not b.add("j.png", "img/src") and b.truncated


def test_a_stylesheets_imports_outrank_its_images() -> None:
    css = "".join(f"a{i}{{background:url(i{i}.png)}}" for i in range(3000)) + '@import "z.css";'
    embeds, _ = css_embeds("http://a.test/s.css", css.encode(), None, budget(max_embeds=100))
    assert embeds[0] == ("http://a.test/z.css", "css/import") and len(embeds) == 100


def test_a_million_urls_stop_at_the_bound() -> None:
    huge = "".join(f"a{{background:url(x{i}.png)}}" for i in range(1_000_000))
    b = budget(max_css_bytes=len(huge) + 1, max_embeds=500)
    assert b.css(huge, "css"), "an @import could still put an image out"
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
    assert result.embeds == [("http://a.test/dir/i1280.png", "img/srcset")]
    images = "".join(f"<img src=i{i}.png>" for i in range(20_000))
    page = f"{images}<link rel=stylesheet href=s.css>".encode()
    result = extract_links(PAGE, page, "text/html", embeds=budget(max_embeds=1000))
    assert len(result.embeds) == 1000 and result.embeds_truncated
    assert result.embeds[0] == ("http://a.test/dir/s.css", "link/stylesheet")
    # Not a timing assertion on speed: a quadratic scan of these would take minutes.
    assert time.process_time() - start < 60
