"""Cookie hosts of the synthetic web: a small session cookie, then many big ones.

:class:`CookieWeb` is pure: ``respond(host, path)`` gives the answer of a
cookie host (None: not one of them), from its parameters alone. Hosts are
``ck-<i>.<domain>``, ``hosts`` of them; each serves::

    /robots.txt      allows all
    /                sets session=s<i> (Path=/) and links /set/<count>x<size>.html
    /set/NxS.html    sets N cookies c0 … c<N-1> (Path=/), each of S bytes as a Cookie
                     header carries it (``c7=vvvv…``), and links /after/0.html …
    /after/K.html    K < ``pages``: a page without links

So a crawl of ``/`` reaches every ``/after/`` page only after the big cookies
were set, and the request log (``Request.cookie``, the Cookie header as it
arrived) shows whether the session cookie still came with them. The issue's
case is 200 hosts setting 49 cookies of 64,000 bytes.
"""

from __future__ import annotations

import re

from hive.testweb.graph import Response

LABEL = "ck"
_HTML = "text/html; charset=utf-8"
_SET = re.compile(r"/set/([0-9]{1,4})x([0-9]{1,7})\.html")
_AFTER = re.compile(r"/after/([0-9]{1,6})\.html")


def _page(title: str, links: list[str]) -> bytes:
    items = "".join(f'<li><a href="{href}">{href}</a></li>\n' for href in links)
    return f"<!doctype html>\n<title>{title}</title>\n<ul>\n{items}</ul>\n".encode()


class CookieWeb:
    """The cookie hosts of one domain (see the module docstring)."""

    def __init__(self, domain: str, hosts: int = 1, count: int = 49, size: int = 64_000,
                 pages: int = 3) -> None:
        if hosts < 1 or count < 0 or pages < 0 or size < 4:
            raise ValueError("hosts must be positive, count and pages not negative, size >= 4")
        self.domain = domain.lower()
        self.hosts, self.count, self.size, self.pages = hosts, count, size, pages
        width = max(3, len(str(hosts - 1)))
        self.names = [f"{LABEL}-{i:0{width}d}.{self.domain}" for i in range(hosts)]
        self._index = {name: i for i, name in enumerate(self.names)}

    def session(self, host: str) -> str:
        """The small cookie ``/`` sets, as a Cookie header carries it."""
        return f"session=s{self._index[host]}"

    def seeds(self, port: int) -> list[str]:
        return [f"http://{name}:{port}/" for name in self.names]

    def after_paths(self) -> list[str]:
        """The pages reached only after the big cookies were set."""
        return [f"/after/{k}.html" for k in range(self.pages)]

    def set_path(self) -> str:
        return f"/set/{self.count}x{self.size}.html"

    def respond(self, host: str, path: str) -> Response | None:
        index = self._index.get(host)
        if index is None:
            return None
        path = path.partition("?")[0]
        if path == "/robots.txt":
            return Response(200, b"User-agent: *\nDisallow:\n", "text/plain")
        if path == "/":
            return Response(200, _page(host, [self.set_path()]), _HTML,
                            (("Set-Cookie", f"{self.session(host)}; Path=/"),))
        match = _SET.fullmatch(path)
        if match:
            count, size = int(match.group(1)), int(match.group(2))
            return Response(200, _page(path, self.after_paths()), _HTML, tuple(
                ("Set-Cookie", f"{name}={'v' * (size - len(name) - 1)}; Path=/")
                for name in (f"c{i}" for i in range(count))
            ))
        match = _AFTER.fullmatch(path)
        if match and int(match.group(1)) < self.pages:
            return Response(200, _page(path, []), _HTML)
        return Response(404, b"not found\n", "text/plain")
