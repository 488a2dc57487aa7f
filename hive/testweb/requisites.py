"""The synthetic web's page requisites: stylesheets, images, a script and a font to embed.

With ``Web(requisites=True)`` every page of a normal host embeds what a real page
does (:func:`page_head`, :func:`page_body`), some of it on the host itself under
``/static/`` and some on the web's static host, ``static.<domain>`` (a CDN)::

    page      <link rel=stylesheet href=/static/site.css>    on the host
              <link rel=stylesheet href=//static/cdn/common.css>
              <script src=//static/cdn/app.js>
              <img src=/static/logo.png>                      every page, same bytes
              <img src=/static/photo-K.png srcset="... 1x, /static/photo-K@2x.png 2x">
              <img src=//static/cdn/private/pixel.gif>        the CDN's robots.txt forbids
    site.css  @import "theme.css"; url(bg.png)
    theme.css @font-face url(//static/cdn/hive.woff2); url(/static/h1.png)
    common.css url(sprite.png)

so a page reaches its font in three embed hops (page, site.css, theme.css). The
logo's bytes are the same on every host (one payload under many URLs), and each
image is a valid PNG a browser draws. :func:`requisite_paths` lists what a crawl
of the pages must fetch (of a srcset, the 1x candidate a browser at 1x loads, not
the 2x one), :data:`FORBIDDEN` what it must never request.

The static host also serves a crowded page, ``/cdn/gallery.html`` (:func:`gallery`),
which no page links to: two stylesheets in its head, then a body of one image whose
srcset has ``SRCSET`` width candidates (``/cdn/g/w/<n>.png <n>w``, n = 1 to SRCSET)
and ``GALLERY_IMAGES`` images (``/cdn/g/i/<k>.png``), a script last::

    g/a.css      @import url(chain-1.css); url(bg.png)
    chain-<k>    @import "chain-<k+1>.css", up to chain-CHAIN.css (which imports none)
    g/loop-a.css @import "loop-b.css";   loop-b.css @import "loop-a.css"  (a loop)

so a budget of embeds smaller than the page shows whether stylesheets and scripts
come before images, which srcset candidate is taken, how far an import chain is
followed and that a loop of imports ends.
"""

from __future__ import annotations

import functools
import struct
import zlib

STATIC_LABEL = "static"
PHOTOS = 3
STATIC_ROBOTS = b"User-agent: *\nDisallow: /cdn/private/\n"
FORBIDDEN = "/cdn/private/pixel.gif"
# The paths on a normal host, then on the static host, a crawl of every page must fetch
# (the photos apart: which of them a host's pages use depends on its page count).
HOST_PATHS = (
    "/static/site.css", "/static/theme.css", "/static/bg.png", "/static/h1.png",
    "/static/logo.png",
)
STATIC_PATHS = ("/cdn/common.css", "/cdn/sprite.png", "/cdn/app.js", "/cdn/hive.woff2")
FONT = "/cdn/hive.woff2"

_CSS = "text/css; charset=utf-8"
GALLERY = "/cdn/gallery.html"
SRCSET = 5000
GALLERY_IMAGES = 60
CHAIN = 5


def _png(rgb: tuple[int, int, int], size: int = 8) -> bytes:
    """A valid size x size PNG of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF
        )
    rows = b"".join(b"\0" + bytes(rgb) * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@functools.cache
def _assets(static: str) -> dict[str, tuple[str, bytes]]:
    """path -> (content type, body) of every requisite, ``static`` the CDN's netloc."""
    assets = {
        "/static/site.css": (_CSS, b'@import "theme.css";\nbody { background: url(bg.png); }\n'),
        "/static/theme.css": (_CSS, (
            f'@font-face {{ font-family: Hive; src: url("//{static}{FONT}") format("woff2"); }}\n'
            "h1 { font-family: Hive; background-image: url('/static/h1.png'); }\n").encode()),
        "/static/bg.png": ("image/png", _png((240, 240, 220))),
        "/static/h1.png": ("image/png", _png((200, 120, 40))),
        "/static/logo.png": ("image/png", _png((250, 190, 0), 16)),
        "/cdn/common.css": (_CSS, b"ul { background: url(sprite.png) no-repeat; }\n"),
        "/cdn/sprite.png": ("image/png", _png((40, 90, 200))),
        "/cdn/app.js": ("text/javascript", b"document.documentElement.dataset.hive = '1';\n"),
        FONT: ("font/woff2", b"wOF2" + bytes(60)),
        FORBIDDEN: ("image/gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
    }
    for k in range(PHOTOS):
        assets[f"/static/photo-{k}.png"] = ("image/png", _png((60 * k, 160, 90)))
        assets[f"/static/photo-{k}@2x.png"] = ("image/png", _png((60 * k, 160, 90), 16))
    return assets


def asset(path: str, static: str) -> tuple[str, bytes] | None:
    """(content type, body) of a requisite path, or None if there is none there."""
    found = _assets(static).get(path)
    if found is None and path.startswith("/cdn/g"):
        return _gallery_asset(path)
    return found


@functools.cache
def gallery() -> bytes:
    """The crowded page (see the module docstring)."""
    srcset = ", ".join(f"/cdn/g/w/{n}.png {n}w" for n in range(1, SRCSET + 1))
    images = "".join(f'<img src="/cdn/g/i/{k}.png" alt="">\n' for k in range(GALLERY_IMAGES))
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>gallery</title>'
        '<link rel="stylesheet" href="/cdn/g/a.css">'
        '<link rel="stylesheet" href="/cdn/g/loop-a.css"></head>\n'
        f'<body><img src="/cdn/g/hero.png" srcset="{srcset}" alt="hero">\n{images}'
        '<script src="/cdn/g/app.js"></script></body></html>\n'
    ).encode()


def _gallery_asset(path: str) -> tuple[str, bytes] | None:
    sheets = {
        "/cdn/g/a.css": "@import url(chain-1.css);\nbody { background: url(bg.png); }\n",
        "/cdn/g/loop-a.css": '@import "loop-b.css";\n',
        "/cdn/g/loop-b.css": '@import "loop-a.css";\n',
    }
    sheets |= {f"/cdn/g/chain-{k}.css": f'@import "chain-{k + 1}.css";\n' for k in range(1, CHAIN)}
    sheets[f"/cdn/g/chain-{CHAIN}.css"] = "h1 { color: teal; }\n"
    if path == GALLERY:
        return "text/html; charset=utf-8", gallery()
    if path in sheets:
        return _CSS, sheets[path].encode()
    if path == "/cdn/g/app.js":
        return "text/javascript", b"document.title += ' (scripted)';\n"
    if path in ("/cdn/g/hero.png", "/cdn/g/bg.png"):
        return "image/png", _png((90, 90, 90))
    for folder, count in (("/cdn/g/i/", GALLERY_IMAGES), ("/cdn/g/w/", SRCSET)):
        number = path.removeprefix(folder).removesuffix(".png")
        if path.startswith(folder) and path.endswith(".png") and number.isdigit() and (
                0 <= int(number) - (folder == "/cdn/g/w/") < count):
            return "image/png", _png((int(number) % 256, 100, 100))
    return None


def photo(page: int) -> int:
    """Which photo page ``page`` of a host shows."""
    return page % PHOTOS


def page_head(static: str) -> str:
    """What a page's ``head`` embeds."""
    return (
        '<link rel="stylesheet" href="/static/site.css">'
        f'<link rel="stylesheet" href="//{static}/cdn/common.css">'
        f'<script src="//{static}/cdn/app.js"></script>'
    )


def page_body(static: str, page: int) -> str:
    """What a page's ``body`` embeds, first in it."""
    k = photo(page)
    return (
        '<img src="/static/logo.png" alt="logo">\n'
        f'<img src="/static/photo-{k}.png" alt="photo" '
        f'srcset="/static/photo-{k}.png 1x, /static/photo-{k}@2x.png 2x">\n'
        f'<img src="//{static}{FORBIDDEN}" alt="">\n'
    )


def requisite_paths(pages: int) -> tuple[list[str], list[str]]:
    """(paths on each crawled normal host, paths on the static host) a crawl of every page
    of a host must fetch."""
    photos = sorted({photo(page) for page in range(pages)})
    host = list(HOST_PATHS)
    for k in photos:
        host.append(f"/static/photo-{k}.png")  # of its srcset, the 1x candidate: the same
    return host, list(STATIC_PATHS)
