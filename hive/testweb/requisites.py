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
of the pages must fetch, :data:`FORBIDDEN` what it must never request.
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
    return _assets(static).get(path)


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
        host += [f"/static/photo-{k}.png", f"/static/photo-{k}@2x.png"]
    return host, list(STATIC_PATHS)
