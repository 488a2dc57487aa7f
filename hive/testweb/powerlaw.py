"""The power-law web: a link graph whose in-degree follows a power law, and a hidden
quality label on every page.

What crawl order is measured on (bench/bench_priority.py): where the answer is known,
"fetch what matters first" has a score. :class:`PowerWeb` is a pure function of its
parameters and seed; hive.testweb.server serves it beside the site graph.

**Names.** Hosts ``pl000.<domain>`` … with pages ``/`` and ``/p/1.html`` …
``/p/<pages-1>.html``; robots.txt allows all (host ``pl000`` announces
``Crawl-delay: crawl_delay`` when it is not 0, so its pages wait while links to
them arrive from the other hosts).

**Links.** A host's home links to each of its pages in order (its navigation), so a
crawl that takes a host's pages first come, first served fetches them in page
order. Every page also draws ``links`` links (seeded) from all the web's pages,
a page of rank r with weight ``(r + 1) ** -alpha``, the ranks a seeded
permutation: in-degree follows Zipf's law and the most linked pages are scattered
over hosts and page numbers, so nothing in a URL says which they are
(:meth:`PowerWeb.inlinks`, :meth:`PowerWeb.top`).

**Quality.** A share ``good`` of pages is labelled good (seeded; :meth:`PowerWeb.good`),
which no header or URL says: a good page is a long article with its links in a
short list, a poor one a short blurb over a long block of links, so only a reader
of the text can tell (hive.fetch.scoring's example scorer reads text length and
link density). A good page draws its links from good pages with probability
``homophily`` (quality clusters on the real web: the premise of Craw4LLM's
propagation); a poor page draws from all pages.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import random
from dataclasses import dataclass

from hive.testweb.graph import Response

LABEL = "pl"
_WORDS = (
    "river", "stone", "market", "harbour", "lantern", "orchard", "meadow", "signal", "archive",
    "compass", "garden", "village", "engine", "summit", "ledger", "window", "bridge", "canvas",
)
_HTML = "text/html; charset=utf-8"
_ROBOTS = b"User-agent: *\nDisallow:\n"


@dataclass(frozen=True, slots=True)
class Page:
    """One page of the power-law web: its host index, page number and what it links."""

    host: int
    number: int
    good: bool
    links: tuple[int, ...]  # page indexes, drawn by popularity (no nav links)


class PowerWeb:
    """A web whose in-degree follows a power law (see the module docstring)."""

    def __init__(
        self, seed: int = 0, hosts: int = 50, pages: int = 40, links: int = 12,
        alpha: float = 1.0, good: float = 0.3, homophily: float = 0.7,
        domain: str = "web.test", crawl_delay: float = 0.0, text_bytes: int = 3000,
    ) -> None:
        if hosts < 1 or pages < 2 or links < 0 or alpha <= 0 or text_bytes < 0:
            raise ValueError("hosts >= 1, pages >= 2, links >= 0, alpha > 0, text_bytes >= 0")
        if not (0.0 <= good <= 1.0 and 0.0 <= homophily <= 1.0) or crawl_delay < 0:
            raise ValueError("good and homophily in [0, 1], crawl_delay not negative")
        self.seed, self.hosts, self.pages, self.alpha = seed, hosts, pages, alpha
        self.domain = domain.lower()
        self.crawl_delay = crawl_delay
        self.text_bytes = text_bytes
        width = max(3, len(str(hosts - 1)))
        self.names = [f"{LABEL}{i:0{width}d}.{self.domain}" for i in range(hosts)]
        self._index = {name: i for i, name in enumerate(self.names)}
        total = hosts * pages
        rng = random.Random(f"{seed}:powerlaw")
        order = list(range(total))
        rng.shuffle(order)  # order[rank] is the page of that rank
        labels = [rng.random() < good for _ in range(total)]
        weights = [(rank + 1) ** -alpha for rank in range(total)]
        everyone = _Draw(order, weights)
        good_ranks = [rank for rank in range(total) if labels[order[rank]]]
        among_good = _Draw([order[r] for r in good_ranks], [weights[r] for r in good_ranks])
        made = []
        for index in range(total):
            page_rng = random.Random(f"{seed}:powerlaw:{index}")
            drawn: dict[int, None] = {}
            for _ in range(links):
                source = among_good if labels[index] and among_good and (
                    page_rng.random() < homophily) else everyone
                target = source.pick(page_rng)
                if target != index:
                    drawn[target] = None
            made.append(Page(index // pages, index % pages, labels[index], tuple(drawn)))
        self._pages = made

    # -- the answers ---------------------------------------------------------------

    def url(self, index: int, port: int = 80) -> str:
        host, number = divmod(index, self.pages)
        netloc = self.names[host] if port == 80 else f"{self.names[host]}:{port}"
        return f"http://{netloc}{_path(number)}"

    def seeds(self, port: int = 80) -> list[str]:
        """Every host's home."""
        return [self.url(host * self.pages, port) for host in range(self.hosts)]

    def all_urls(self, port: int = 80) -> list[str]:
        return [self.url(index, port) for index in range(len(self._pages))]

    def good(self, index: int) -> bool:
        return self._pages[index].good

    def linked_from(self, index: int) -> list[int]:
        """The pages a page links to: its host's pages in order (a home), then its drawn
        links."""
        page = self._pages[index]
        nav = (
            range(index + 1, index + self.pages) if page.number == 0
            else (index - page.number,)
        )
        return list(dict.fromkeys(itertools.chain(nav, page.links)))

    @functools.cached_property
    def _inlinks(self) -> tuple[list[int], list[set[int]]]:
        pages: list[int] = [0] * len(self._pages)
        hosts: list[set[int]] = [set() for _ in self._pages]
        for index in range(len(self._pages)):
            for target in self.linked_from(index):
                pages[target] += 1
                hosts[target].add(index // self.pages)
        return pages, hosts

    def inlinks(self, index: int) -> int:
        """The distinct pages linking to a page."""
        return self._inlinks[0][index]

    def linking_hosts(self, index: int) -> int:
        """The distinct hosts whose pages link to a page."""
        return len(self._inlinks[1][index])

    def top(self, share: float) -> list[int]:
        """The ``share`` of pages with the most in-links (ties by index), at least one."""
        count = max(1, round(share * len(self._pages)))
        ranked = sorted(range(len(self._pages)), key=lambda i: (-self.inlinks(i), i))
        return ranked[:count]

    def index_of(self, url: str) -> int | None:
        """The page index of a URL of this web (any port), or None."""
        rest = url.split("//", 1)[-1]
        netloc, _, path = rest.partition("/")
        host = self._index.get(netloc.rsplit(":", 1)[0].lower())
        number = _number("/" + path)
        if host is None or number is None or number >= self.pages:
            return None
        return host * self.pages + number

    # -- serving ---------------------------------------------------------------------

    def serves(self, host: str) -> bool:
        return host in self._index

    def respond(self, host: str, path: str, port: int) -> Response:
        """The answer to ``GET path`` on ``host`` (one of :attr:`names`), served on ``port``."""
        index = self._index[host]
        if path == "/robots.txt":
            delay = f"Crawl-delay: {self.crawl_delay:g}\n" if self.crawl_delay and not index else ""
            return Response(200, _ROBOTS + delay.encode(), "text/plain; charset=utf-8")
        number = _number(path.partition("?")[0])
        if number is None or number >= self.pages:
            return Response(404, b"not found\n", "text/plain; charset=utf-8")
        return Response(200, self._render(index * self.pages + number, port), _HTML)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - the web lives as long as its server
    def _render(self, index: int, port: int) -> bytes:
        page = self._pages[index]
        rng = random.Random(f"{self.seed}:powerlaw:text:{index}")
        title = f"{self.names[page.host]} {_path(page.number)}"
        items = "".join(
            f'<li><a href="{self.url(target, port)}">{_phrase(rng, 4)}</a></li>\n'
            for target in self.linked_from(index)
        )
        if page.good:
            paragraphs = "".join(
                f"<p>{_phrase(rng, 60)}.</p>\n" for _ in range(max(1, self.text_bytes // 420)))
            body = f"<article><h1>{title}</h1>\n{paragraphs}</article>\n<ul>\n{items}</ul>\n"
        else:
            body = f"<h1>{title}</h1>\n<p>{_phrase(rng, 12)}.</p>\n<ul>\n{items}</ul>\n"
        return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
                f"</head>\n<body>\n{body}</body></html>\n").encode()


class _Draw:
    """Pages drawn with probability proportional to their weights."""

    def __init__(self, pages: list[int], weights: list[float]) -> None:
        self.pages = pages
        self.cumulative = list(itertools.accumulate(weights))

    def __bool__(self) -> bool:
        return bool(self.pages)

    def pick(self, rng: random.Random) -> int:
        point = rng.random() * self.cumulative[-1]
        return self.pages[min(bisect.bisect(self.cumulative, point), len(self.pages) - 1)]


def _path(number: int) -> str:
    return "/" if number == 0 else f"/p/{number}.html"


def _number(path: str) -> int | None:
    if path == "/":
        return 0
    if path.startswith("/p/") and path.endswith(".html") and path[3:-5].isdigit():
        number = int(path[3:-5])
        return number if number > 0 else None
    return None


def _phrase(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))
