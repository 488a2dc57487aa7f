"""The frontier's policies as a server sees them: one worker crawls a small site on loopback.

The site is a plain ``http.server`` whose pages are given by the test; it
records when each request arrived, and the assertions are made on that log.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hive.frontier.refusals import describe
from hive.procs.worker import Worker
from tests.frontier.conftest import small_config

pytestmark = pytest.mark.slow

HOST = "site.test"
ADDRESS = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Hit:
    path: str
    status: int
    at: float


class Site:
    """``pages``: path → (status, HTML body); anything else is a 404. Every request is logged."""

    def __init__(self, pages: dict[str, tuple[int, str]]) -> None:
        self.pages = pages
        self.hits: list[Hit] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                at = time.time()
                status, body = site.pages.get(self.path, (404, "not here"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                site.hits.append(Hit(self.path, status, at))

        self.server = ThreadingHTTPServer((ADDRESS, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def __enter__(self) -> Site:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def links(paths: list[str]) -> str:
    return "<html><body>" + "".join(f'<a href="{p}">{p}</a> ' for p in paths) + "</body></html>"


Crawl = Callable[..., Worker]


@pytest.fixture
def crawl(tmp_path: Path) -> Iterator[Crawl]:
    """Crawl a site from its root with one worker until nothing is left; the test fails if
    that takes more than ``timeout`` seconds."""
    workers: list[Worker] = []

    def run(site: Site, timeout: float = 30.0, **sections: dict[str, Any]) -> Worker:
        sections.setdefault("dns", {}).update(
            {"resolve": [f"{HOST}={ADDRESS}"], "allow_nets": [f"{ADDRESS}/32"]}
        )
        sections.setdefault("warc", {}).update({"enabled": False})
        worker = Worker(small_config(**sections), tmp_path / "store", log_dir=tmp_path)
        workers.append(worker)
        worker.add([site.url("/")], time.time())
        assert worker.run_until_idle(timeout), f"not done in {timeout} s: {worker.stats()}"
        return worker

    yield run
    for worker in workers:
        worker.close()


DELAY = 0.1


def test_a_few_broken_pages_do_not_stall_their_host(crawl: Crawl) -> None:
    """Three pages answering 500 for ever, in a row, among good ones: each is tried three
    times with its own back-off (0.1 s, then 0.2 s) while the host goes on at its ordinary
    delay. Once, the host's wait doubled from one broken URL to the next (0.1, 0.2 … 25.6 s:
    about 51 s idle), and with the defaults that is half an hour (tests/frontier/
    test_retries.py measures the host's time against the retry chains)."""
    bad = [f"/bad/{i}" for i in range(3)]
    good = [f"/good/{i}" for i in range(5)]
    pages = {"/": (200, links(bad + good))}
    pages |= {p: (500, "broken") for p in bad} | {p: (200, links([])) for p in good}
    politeness = {
        "min_delay": DELAY, "max_delay": DELAY, "backoff_base": DELAY, "backoff_max": 60.0,
    }
    with Site(pages) as site:
        crawl(site, timeout=20.0, politeness=politeness, frontier={"max_retries": 2})
    hits = sorted(site.hits, key=lambda h: h.at)
    assert Counter(h.path for h in hits if h.status == 500) == dict.fromkeys(bad, 3)
    assert {h.path for h in hits if h.status == 200} == {"/", *good}
    # Each retry waited its own back-off (measured at the server: the delay runs from the
    # end of the response, which came after its request arrived).
    for path in bad:
        tries = [h.at for h in hits if h.path == path]
        assert tries[1] - tries[0] >= DELAY and tries[2] - tries[1] >= 2 * DELAY, tries
    # About pages × delay plus the retries' back-off; scheduling on a busy machine aside.
    retries_backoff = len(bad) * (DELAY + 2 * DELAY)
    span = hits[-1].at - hits[0].at
    assert span < len(hits) * DELAY + retries_backoff + 5.0, [(h.path, h.at) for h in hits]


def test_nothing_is_refused_in_silence(crawl: Crawl, tmp_path: Path) -> None:
    """A site larger than its cap, a link off the site, a trap and a page too deep: the server
    sees none of them, and each refusal is counted by reason and host in the stats and logged
    with its reason, up to the bound per reason and host (the last line says so)."""
    pages = [f"/p/{i}" for i in range(10)]
    site_pages = {
        "/": (200, links([*pages, "http://elsewhere.example/x", "/a/b/a/b/a/b/"])),
        "/p/0": (200, links(["/p/0/deeper"])),
    }
    site_pages |= {p: (200, links([])) for p in pages[1:]}
    frontier = {"max_urls_per_host": 4, "max_depth": 1, "refusals_logged_per_host": 5}
    with Site(site_pages) as site:
        worker = crawl(site, frontier=frontier, politeness={"min_delay": 0.05})
    assert sorted(h.path for h in site.hits) == ["/", "/p/0", "/p/1", "/p/2", "/robots.txt"]
    host = f"{HOST}:{site.port}"
    stats = worker.stats()
    assert {k: v for k, v in stats.items() if k.startswith("refusals/")} == {
        "refusals/max_urls_per_host": 7, f"refusals/max_urls_per_host/{host}": 7,
        "refusals/max_depth": 1, f"refusals/max_depth/{host}": 1,
        "refusals/scope_domain": 1, "refusals/scope_domain/elsewhere.example": 1,
        "refusals/segment_repeat": 1, f"refusals/segment_repeat/{host}": 1,
    }
    lines = [json.loads(line) for line in (tmp_path / "crawl-00.jsonl").read_text().splitlines()]
    refused = [e for e in lines if e["outcome"] == "refused"]
    assert Counter(e["reason"] for e in refused) == {
        "max_urls_per_host": 5, "max_depth": 1, "scope_domain": 1, "segment_repeat": 1,
    }
    capped = [e for e in refused if e["reason"] == "max_urls_per_host"]
    assert all(e["via"] == site.url("/") and e["depth"] == 1 for e in capped)
    assert "later ones are only counted" in capped[-1]["msg"]
    deep = next(e for e in refused if e["reason"] == "max_depth")
    assert (deep["url"], deep["via"], deep["depth"]) == (
        site.url("/p/0/deeper"), site.url("/p/0"), 2
    )
    assert describe([stats]).startswith(f"10 refused: max_urls_per_host 7 ({host} 7), ")
