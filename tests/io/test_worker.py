"""One worker crawls the synthetic web; every invariant is measured at the server."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive import config
from hive.core.lease import Lease, LeaseKind
from hive.core.record import UrlRecord
from hive.core.urls import canonicalize, host_hash
from hive.fetch.fetched import Fetched
from hive.fetch.robots_fetch import BIG_ROBOTS, ROBOTS_PARSES
from hive.fetch.robots_rules import RobotsRules
from hive.outcome import Kind
from hive.procs.worker import Worker
from hive.testweb import (
    WebProcess,
    as_received,
    duplicates,
    politeness_violations,
    received,
)
from hive.testweb.graph import UNAVAILABLE_RETRY_AFTER
from tests.conftest import crawl_config, wait_for
from tests.proxyserver import ConnectProxy

pytestmark = pytest.mark.slow

# Every non-public target a link could name, by address and by a name resolving there; the
# guard refuses each before connecting (those on 127.0.0.1 would hit the tripwire).
PRIVATE_URLS = [
    "http://127.0.0.1/", "http://10.1.2.3/", "http://172.16.0.1/", "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/", "http://0.0.0.0/", "http://[::1]/",
    "http://[fe80::1]/", "http://[::ffff:127.0.0.1]/", "http://2130706433/", "http://0x7f.1/",
    "http://0177.0.0.1/", "http://100.64.0.1/", "http://lan.web.test/", "http://cloud.web.test/",
]
PRIVATE_NAMES = [("lan.web.test", "10.0.0.1"), ("cloud.web.test", "169.254.169.254")]
WARCIO = [sys.executable, "-c", "from warcio.cli import main; main()"]


@pytest.fixture(scope="module")
def crawl(web_server: WebProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Crawl the whole test web once with one worker; the tests below read the results."""
    directory = tmp_path_factory.mktemp("worker")
    cfg = crawl_config(
        web_server, scope={"mode": "any"}, politeness={"min_delay": 0.1},
        dns={"resolve": [web_server.resolve, *(f"{name}={ip}" for name, ip in PRIVATE_NAMES)]},
    )
    worker = Worker(cfg, directory / "store", warc_dir=directory / "warc", log_dir=directory)
    worker.add(web_server.seeds() + PRIVATE_URLS, time.time())
    finished = worker.run_until_idle(timeout=90)
    stats = worker.stats()
    worker.close()
    log = [json.loads(line) for line in (directory / "crawl-00.jsonl").read_text().splitlines()]
    return {
        "finished": finished, "stats": stats, "requests": list(web_server.requests),
        "log": log, "received": received(directory),
        "warc": sorted((directory / "warc").glob("*.warc.gz")), "cfg": cfg,
    }


def outcomes_for(crawl: dict[str, object], host: str) -> Counter[str]:
    return Counter(e["outcome"] for e in crawl["log"] if f"//{host}" in e["url"])  # type: ignore[attr-defined]


def test_the_batch_ends(crawl: dict[str, object]) -> None:
    assert crawl["finished"], crawl["stats"]


def test_politeness_at_the_server(crawl: dict[str, object], web_server: WebProcess) -> None:
    gaps = {host: 0.1 for host in web_server.web.names}
    gaps.update({host: 0.1 for host in web_server.web.hostile})
    gaps.update(web_server.web.crawl_delay)
    # Each response ends when the worker had it, if the busy server stamped it later.
    requests = as_received(crawl["requests"], crawl["received"])  # type: ignore[arg-type]
    violations = politeness_violations(requests, gaps, tolerance=0.01)
    assert violations == []


def test_every_in_scope_page_once(crawl: dict[str, object], web_server: WebProcess) -> None:
    requests = crawl["requests"]
    fetched = {r.url for r in requests if r.method == "GET"}  # type: ignore[attr-defined]
    missing = web_server.in_scope_urls() - fetched
    assert not missing, sorted(missing)[:10]
    retried = {e["url"] for e in crawl["log"] if e["outcome"] in ("timeout", "connect")}  # type: ignore[attr-defined]
    retries = crawl["cfg"].frontier.max_retries  # type: ignore[attr-defined]
    repeated = duplicates(requests)  # type: ignore[arg-type]
    assert {url: n for url, n in repeated.items() if url not in retried or n > 1 + retries} == {}


def test_robots_obeyed(crawl: dict[str, object], web_server: WebProcess) -> None:
    fetched = {r.url for r in crawl["requests"]}  # type: ignore[attr-defined]
    assert not fetched & web_server.web.disallowed_urls(web_server.port)
    error_host = next(h for h, k in web_server.web.robots.items() if k == "error")
    assert {r.path for r in crawl["requests"] if r.hostname == error_host} == {"/robots.txt"}  # type: ignore[attr-defined]
    assert outcomes_for(crawl, error_host)["robots_unreachable"] >= 1


def test_a_robots_retry_after_is_honoured(
    crawl: dict[str, object], web_server: WebProcess
) -> None:
    """The host whose robots.txt first answers 503 with Retry-After: 1 is asked again no
    sooner, though the configured retry delay is shorter; its pages are crawled after."""
    assert crawl["cfg"].robots.retry_delay < UNAVAILABLE_RETRY_AFTER  # type: ignore[attr-defined]
    host = next(h for h, k in web_server.web.robots.items() if k == "unavailable")
    asked = [r for r in crawl["requests"] if r.hostname == host and r.path == "/robots.txt"]  # type: ignore[attr-defined]
    assert [r.status for r in asked] == [503, 200]
    assert asked[1].start - asked[0].end >= UNAVAILABLE_RETRY_AFTER
    assert outcomes_for(crawl, host)["ok"] >= 1


def test_address_guard_nothing_reaches_the_tripwire(
    crawl: dict[str, object], web_server: WebProcess
) -> None:
    assert web_server.web.strays(crawl["requests"]) == []  # type: ignore[arg-type]
    refused = [e for e in crawl["log"] if e["outcome"] == "refused_address"]  # type: ignore[attr-defined]
    refused_urls = {e["url"] for e in refused}
    for url in PRIVATE_URLS:
        canonical = canonicalize(url)
        assert canonical in refused_urls or canonical.replace("/latest/meta-data/", "/robots.txt")\
            in refused_urls, url
    assert len(refused) >= 5, (refused, {k: v for k, v in crawl["stats"].items() if "refused" in k})  # type: ignore[attr-defined]


def test_hostile_hosts_end_in_their_outcomes(crawl: dict[str, object]) -> None:
    expect = {
        "gzip-bomb.web.test": "decoded_too_large",
        "endless.web.test": "too_large",
        "drip.web.test": "timeout",
        "rate-limited.web.test": "http_429",
        "huge.web.test": "too_large",
        "redirect-loop.web.test": "redirect",
    }
    for host, kind in expect.items():
        assert outcomes_for(crawl, host)[kind] >= 1, (host, outcomes_for(crawl, host))
    binary = outcomes_for(crawl, "binary.web.test")
    assert binary["ok"] == 1
    calendar = outcomes_for(crawl, "calendar.web.test")
    cfg = crawl["cfg"]
    assert 1 < calendar["ok"] <= cfg.frontier.max_urls_per_host  # type: ignore[attr-defined]


def test_warc_is_valid_with_one_response_per_fetch(crawl: dict[str, object]) -> None:
    files = crawl["warc"]
    assert files
    result = subprocess.run(
        [*WARCIO, "check", *map(str, files)],  # type: ignore[call-overload]
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    index = subprocess.run(
        [*WARCIO, "index", "-f", "warc-type,warc-target-uri",
         *map(str, files)],  # type: ignore[call-overload]
        capture_output=True, text=True, timeout=120, check=True,
    )
    responses = [json.loads(line) for line in index.stdout.splitlines()]
    pages = [r for r in responses if r.get("warc-type") == "response"]
    got = Counter(r["warc-target-uri"] for r in pages)
    ok_urls = {e["url"] for e in crawl["log"] if e["outcome"] == "ok"}  # type: ignore[attr-defined]
    assert ok_urls <= set(got)
    assert all(n == 1 for url, n in got.items() if url in ok_urls and "robots.txt" not in url)


def test_counters_agree_with_the_log(crawl: dict[str, object]) -> None:
    stats = crawl["stats"]
    logged = Counter(e["outcome"] for e in crawl["log"])  # type: ignore[attr-defined]
    assert stats["frontier/pending"] == 0  # type: ignore[index]
    assert logged["ok"] == stats.get("worker/outcome/ok")  # type: ignore[attr-defined]


# --- fetch options and protocol details, on a small server of edge pages ------------------

EDGE_PAGES: dict[str, tuple[list[tuple[str, str]], bytes]] = {
    "/robots.txt": ([("Content-Type", "text/plain")], b"User-agent: *\nAllow: /\n"),
    "/refresh": ([("Refresh", "0; url=/refreshed")], b"<html><body>moved</body></html>"),
    "/refreshed": ([], b"<html><body>here</body></html>"),
    "/tagged": ([("X-Robots-Tag", "noarchive, NoFollow")], b"<a href='/hidden'>h</a>"),
    "/other-agent": ([("X-Robots-Tag", "otherbot: none")], b"<a href='/shown'>s</a>"),
    "/hidden": ([], b"<html></html>"),
    "/shown": ([], b"<html></html>"),
    "/inside": ([], b"<html></html>"),
}


class EdgeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, dict[str, str]]] = []

    def do_GET(self) -> None:
        EdgeHandler.seen.append((self.path, dict(self.headers.items())))
        if self.path == "/gate":
            if "ok=1" in (self.headers.get("Cookie") or ""):
                self._send(200, [], b"<a href='/inside'>in</a>")
            else:
                self._send(302, [("Location", "/gate"), ("Set-Cookie", "ok=1; Path=/")], b"")
        elif self.path == "/drop":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 100)
            self.wfile.flush()
            self.close_connection = True
        else:
            headers, body = EDGE_PAGES.get(self.path, ([], b""))
            self._send(200 if self.path in EDGE_PAGES else 404, headers, body)

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def edge_server() -> Iterator[int]:
    EdgeHandler.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EdgeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def crawl_edges(
    port: int, tmp_path: Path, seeds: tuple[str, ...] = ("/gate", "/refresh", "/tagged",
                                                          "/other-agent", "/drop"),
    **fetch: object,
) -> dict[str, dict[str, object]]:
    """Crawl the edge pages with one worker; the crawl log's last entry per path."""
    cfg = config.load(environ={}).replace(
        dns={"resolve": ["edge.test=127.0.0.1", "lan.test=10.9.9.9"],
             "allow_nets": ["127.0.0.1/32"]},
        politeness={"min_delay": 0.05, "max_delay": 0.1},
        fetch={"threads": 2, "total_timeout": 5.0,
               "headers": ["From: bot@hive.test", "Accept-Language: fr"], **fetch},
    )
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    worker.add([seed if "//" in seed else f"http://edge.test:{port}{seed}" for seed in seeds],
               time.time())
    assert worker.run_until_idle(timeout=60)
    worker.close()
    log = [json.loads(line) for line in (tmp_path / "crawl-00.jsonl").read_text().splitlines()]
    return {e["url"].split(str(port), 1)[-1]: e for e in log}


def test_extra_headers_go_with_robots_txt_and_pages(edge_server: int, tmp_path: Path) -> None:
    crawl_edges(edge_server, tmp_path)
    paths = [path for path, _ in EdgeHandler.seen]
    assert paths[0] == "/robots.txt"
    for _, headers in EdgeHandler.seen:
        assert (headers["From"], headers["Accept-Language"]) == ("bot@hive.test", "fr")


def test_a_page_that_redirects_to_itself_for_a_cookie(edge_server: int, tmp_path: Path) -> None:
    log = crawl_edges(edge_server, tmp_path / "off")
    assert log["/gate"]["outcome"] == "redirect_to_self"
    assert "cookie" in log["/gate"]["msg"] and "/inside" not in log
    EdgeHandler.seen = []
    log = crawl_edges(edge_server, tmp_path / "on", cookies=True)
    assert log["/gate"]["outcome"] == "ok" and log["/inside"]["outcome"] == "ok"
    gates = [headers.get("Cookie") for path, headers in EdgeHandler.seen if path == "/gate"]
    assert gates == [None, "ok=1"]


def test_refresh_and_x_robots_tag_headers(edge_server: int, tmp_path: Path) -> None:
    log = crawl_edges(edge_server, tmp_path)
    assert log["/refreshed"]["outcome"] == "ok"
    assert "/hidden" not in log and log["/tagged"]["outcome"] == "ok"
    assert log["/shown"]["outcome"] == "ok"  # a tag scoped to another crawler


def test_a_body_cut_by_a_dropped_connection_is_truncated_disconnect(
    edge_server: int, tmp_path: Path
) -> None:
    log = crawl_edges(edge_server, tmp_path)
    assert log["/drop"]["outcome"] in ("protocol", "connect")
    records = []
    for path in sorted((tmp_path / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            records.extend(record.rec_headers for record in ArchiveIterator(f))
    dropped = [r for r in records if r.get_header("WARC-Target-URI", "").endswith("/drop")
               and r.get_header("WARC-Type") == "response"]
    assert [r.get_header("WARC-Truncated") for r in dropped] == ["disconnect"]


def test_warcinfo_names_the_robots_policy_and_the_agent(
    edge_server: int, tmp_path: Path
) -> None:
    crawl_edges(edge_server, tmp_path)
    path = next((tmp_path / "warc").glob("*.warc.gz"))
    with path.open("rb") as f:
        record = next(iter(ArchiveIterator(f)))
        block = record.content_stream().read().decode()
    fields = dict(line.split(": ", 1) for line in block.splitlines())
    cfg = config.load(environ={})
    assert fields["robots"] == "obey"
    assert fields["http-header-user-agent"] == cfg.fetch.user_agent
    assert fields["http-header-from"] == "bot@hive.test"


def test_a_proxy_is_used_only_when_its_own_address_is_allowed(
    edge_server: int, tmp_path: Path
) -> None:
    proxy = ConnectProxy("127.0.0.3")  # beyond dns.allow_nets, which allows the target only
    try:
        log = crawl_edges(edge_server, tmp_path / "refused", ("/inside",), proxy=proxy.url)
        assert log["/robots.txt"]["outcome"] == "refused_address"
        assert "proxy 127.0.0.3 is loopback" in log["/robots.txt"]["msg"]
        assert proxy.targets == [] and EdgeHandler.seen == []
        seeds = ("/inside", "http://lan.test/")
        log = crawl_edges(edge_server, tmp_path / "allowed", seeds, proxy=proxy.url,
                          proxy_allow_nets=["127.0.0.3/32"])
        assert log["/inside"]["outcome"] == "ok"
        assert log["http://lan.test/robots.txt"]["outcome"] == "refused_address"  # the target
        assert set(proxy.targets) == {f"127.0.0.1:{edge_server}"}
        assert [path for path, _ in EdgeHandler.seen] == ["/robots.txt", "/inside"]
        tunnels = len(proxy.targets)
        log = crawl_edges(edge_server, tmp_path / "bypass", ("/shown",), proxy=proxy.url,
                          no_proxy=["test"])
        assert log["/shown"]["outcome"] == "ok" and len(proxy.targets) == tunnels
    finally:
        proxy.close()


# --- robots.txt at the server: redirects, cut and undecodable files ---------------------

ROBOTS_ADDRESS = "127.0.0.3"
REDIRECTORS = 30
CHAIN = ["/robots.txt", "/r1", "/r2", "/r3", "/rules.txt"]


class RobotsWeb:
    """Hosts whose robots.txt is hostile, on one threaded server; every request logged with
    its start and end, and the most requests ever in flight at once per host."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, float, float]] = []
        self.in_flight: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.robots_asked: Counter[str] = Counter()
        web = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                host = self.headers.get("Host", "").partition(":")[0]
                start = time.time()
                with web.lock:
                    web.in_flight[host] += 1
                    web.most[host] = max(web.most[host], web.in_flight[host])
                try:
                    time.sleep(0.02)  # widen the window in which two requests would overlap
                    web.answer(self, host, self.path)
                finally:
                    with web.lock:
                        web.in_flight[host] -= 1
                        web.log.append((host, self.path, start, time.time()))

        self.server = ThreadingHTTPServer((ROBOTS_ADDRESS, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def answer(self, handler: BaseHTTPRequestHandler, host: str, path: str) -> None:
        def send(status: int, body: bytes, *headers: tuple[str, str], length: int = -1) -> None:
            handler.send_response(status)
            for name, value in headers:
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(body) if length < 0 else length))
            handler.end_headers()
            handler.wfile.write(body)

        page = b"<!doctype html><a href='/private/x'>p</a><a href='/ok'>ok</a>"
        if path == "/robots.txt":
            with self.lock:
                asked = self.robots_asked[host]
                self.robots_asked[host] += 1
        private = b"User-agent: *\nDisallow: /private/\n"
        if host == "flaky.rb.test" and path == "/robots.txt":
            # Down for its first two tries, then back.
            send(500, b"") if asked < 2 else send(200, private)
        elif host == "stale.rb.test" and path == "/robots.txt":
            # Up once, then down for good: the copy it served must stand in.
            send(200, private) if asked < 1 else send(503, b"")
        elif host in ("flaky.rb.test", "stale.rb.test"):
            send(200, b"<!doctype html>no links")
        elif host == "victim.rb.test":
            if path == "/robots.txt":
                send(200, b"User-agent: *\nDisallow: /\n")
            else:
                send(200, b"the victim's secret")
        elif host.startswith("redirector"):
            if path == "/robots.txt":
                send(301, b"", ("Location", self.url("victim.rb.test", "/secret/admin")))
            else:
                send(200, b"<!doctype html>a page")
        elif host == "chain.rb.test":
            if path in CHAIN[:-1]:
                send(302, b"", ("Location", CHAIN[CHAIN.index(path) + 1]))
            elif path == CHAIN[-1]:
                send(200, b"User-agent: *\nDisallow: /private/\n")
            else:
                send(200, page)
        elif host == "cut.rb.test":
            if path == "/robots.txt":
                # A body cut by the connection dropping: read as empty, it would allow all.
                send(200, b"User-agent: *\nAllow: /\n", length=4000)
                handler.close_connection = True
            else:
                send(200, page)
        elif host == "gzip.rb.test":
            if path == "/robots.txt":
                send(200, b"\x1f\x8b\x08\x00corrupt gzip" * 10, ("Content-Encoding", "gzip"))
            else:
                send(200, page)
        else:
            send(404, b"")

    def requests(self, host: str) -> list[tuple[str, float, float]]:
        with self.lock:
            return [(path, start, end) for h, path, start, end in self.log if h == host]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def robots_crawl(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RobotsWeb, dict[str, object]]]:
    web = RobotsWeb()
    directory = tmp_path_factory.mktemp("robots-worker")
    cfg = config.load(environ={}).replace(
        dns={"resolve": [f"*.rb.test={ROBOTS_ADDRESS}"], "allow_nets": [f"{ROBOTS_ADDRESS}/32"]},
        politeness={"min_delay": 0.2, "max_delay": 0.4, "backoff_base": 0.2, "backoff_max": 0.4},
        robots={"retry_delay": 0.2, "tries": 2, "unreachable_retry": 3600.0},
        fetch={"threads": 8, "connect_timeout": 1.0, "read_timeout": 1.0, "total_timeout": 2.0},
        frontier={"max_retries": 0},
    )
    worker = Worker(cfg, directory / "store", warc_dir=directory / "warc", log_dir=directory)
    hosts = [f"redirector{i}.rb.test" for i in range(REDIRECTORS)]
    hosts += ["victim.rb.test", "chain.rb.test", "cut.rb.test", "gzip.rb.test"]
    try:
        worker.add([web.url(host) for host in hosts], time.time())
        finished = worker.run_until_idle(timeout=60)
        stats = worker.stats()
    finally:
        worker.close()
        web.close()
    log = [json.loads(line) for line in (directory / "crawl-00.jsonl").read_text().splitlines()]
    yield web, {"finished": finished, "stats": stats, "log": log, "cfg": cfg}


def test_robots_redirects_never_reach_another_host(
    robots_crawl: tuple[RobotsWeb, dict[str, object]]
) -> None:
    """30 hosts whose robots.txt 301s to one victim: the victim never sees two requests at
    once and never a path its robots.txt disallows; the 30 read their robots.txt as
    unavailable (allow all) and are crawled."""
    web, crawl = robots_crawl
    assert crawl["finished"], crawl["stats"]
    assert web.most["victim.rb.test"] <= 1
    assert {path for path, _, _ in web.requests("victim.rb.test")} == {"/robots.txt"}
    for i in range(REDIRECTORS):
        paths = [path for path, _, _ in web.requests(f"redirector{i}.rb.test")]
        assert paths == ["/robots.txt", "/"], (i, paths)


def test_a_same_host_robots_redirect_chain_waits_the_hosts_delay(
    robots_crawl: tuple[RobotsWeb, dict[str, object]]
) -> None:
    web, crawl = robots_crawl
    requests = web.requests("chain.rb.test")
    paths = [path for path, _, _ in requests]
    assert paths[: len(CHAIN)] == CHAIN
    assert "/private/x" not in paths and "/ok" in paths, paths
    min_delay = crawl["cfg"].politeness.min_delay  # type: ignore[attr-defined]
    gaps = [b[1] - a[2] for a, b in zip(requests, requests[1:], strict=False)]
    assert min(gaps) >= min_delay - 0.01, gaps


@pytest.mark.parametrize("host", ["cut.rb.test", "gzip.rb.test"])
def test_a_cut_or_undecodable_robots_txt_is_unreachable_not_empty(
    robots_crawl: tuple[RobotsWeb, dict[str, object]], host: str
) -> None:
    web, crawl = robots_crawl
    paths = [path for path, _, _ in web.requests(host)]
    tries = crawl["cfg"].robots.tries  # type: ignore[attr-defined]
    assert paths == ["/robots.txt"] * tries, paths
    outcomes = {e["outcome"] for e in crawl["log"] if f"//{host}" in e["url"]}  # type: ignore[attr-defined]
    assert "robots_unreachable" in outcomes, outcomes


def test_an_unreachable_origin_comes_back_and_a_stale_copy_stands_in(
    tmp_path: Path,
) -> None:
    """flaky.rb.test's robots.txt fails its two tries, then comes back: its first page ends
    robots_unreachable, a page admitted after robots.unreachable_retry is crawled (the host
    is not blocked for the rest of the crawl). stale.rb.test's robots.txt answers once, then
    503 for good: once the copy expires, it stands in (RFC 9309 section 2.4): a new page is
    crawled, a disallowed one is not."""
    web = RobotsWeb()
    cfg = config.load(environ={}).replace(
        dns={"resolve": [f"*.rb.test={ROBOTS_ADDRESS}"], "allow_nets": [f"{ROBOTS_ADDRESS}/32"]},
        politeness={"min_delay": 0.05, "max_delay": 0.1, "backoff_base": 0.1, "backoff_max": 0.2},
        robots={"retry_delay": 0.1, "tries": 2, "unreachable_retry": 1.0, "cache_ttl": 1.0},
        fetch={"threads": 4, "connect_timeout": 1.0, "read_timeout": 1.0, "total_timeout": 2.0},
    )
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    try:
        started = time.time()
        worker.add([web.url("flaky.rb.test"), web.url("stale.rb.test")], started)
        assert worker.run_until_idle(timeout=30)
        # Both the stale copy and the unreachable verdict have expired after this.
        wait_for(lambda: time.time() > started + 2.5, timeout=5)
        later = ["/later", "/private/y"]
        worker.add([web.url(host, path) for host in ("flaky.rb.test", "stale.rb.test")
                    for path in later], time.time())
        assert worker.run_until_idle(timeout=30)
    finally:
        worker.close()
        web.close()
    log = [json.loads(line) for line in (tmp_path / "crawl-00.jsonl").read_text().splitlines()]
    outcome = {(e["url"].split("/")[2].split(":")[0], "/" + e["url"].split("/", 3)[3]):
               e["outcome"] for e in log}
    assert outcome[("flaky.rb.test", "/")] == "robots_unreachable"
    assert outcome[("flaky.rb.test", "/later")] == "ok"
    assert outcome[("flaky.rb.test", "/private/y")] == "robots"
    assert outcome[("stale.rb.test", "/later")] == "ok"
    assert outcome[("stale.rb.test", "/private/y")] == "robots"
    assert web.robots_asked["stale.rb.test"] >= 2, "the expired copy was fetched again"
    assert "/private/y" not in {path for path, _, _ in web.requests("stale.rb.test")}


def test_big_robots_files_are_parsed_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight fetch threads finishing big robots.txt files at once parse at most
    ROBOTS_PARSES of them at a time (each holds tens of MB while protego reads it)."""
    cfg = config.load(environ={}).replace(fetch={"threads": 8})
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)
    lock, now_parsing, most = threading.Lock(), [0], [0]
    parse = RobotsRules.parse

    def counting(*args: Any, **kwargs: Any) -> RobotsRules:
        with lock:
            now_parsing[0] += 1
            most[0] = max(most[0], now_parsing[0])
        try:
            return parse(*args, **kwargs)
        finally:
            with lock:
                now_parsing[0] -= 1

    monkeypatch.setattr(RobotsRules, "parse", counting)
    body = b"User-agent: *\n" + b"".join(b"Disallow: /d%d/*.x$\n" % i for i in range(5000))
    assert len(body) > BIG_ROBOTS
    lease = Lease(LeaseKind.ROBOTS, 1, UrlRecord("http://a.test/robots.txt", "a.test"), b"")
    try:
        threads = [
            threading.Thread(target=worker.pipeline.robots_fetch.outcome,
                             args=(lease, None, 200, body, 0.0, 0.0, ""))
            for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        worker.close()
    assert 1 <= most[0] <= ROBOTS_PARSES


def test_rules_lost_from_the_store_are_fetched_again_not_ignored(tmp_path: Path) -> None:
    """The victim's robots.txt (Disallow: /) is fetched; its store entry is then lost (a
    damaged or older-format entry) and the worker restarts, the origin still fresh in the
    host's state. A page admitted then waits for robots.txt to be fetched again and is
    refused, never fetched without rules."""
    web = RobotsWeb()
    cfg = config.load(environ={}).replace(
        dns={"resolve": [f"*.rb.test={ROBOTS_ADDRESS}"], "allow_nets": [f"{ROBOTS_ADDRESS}/32"]},
        politeness={"min_delay": 0.05, "max_delay": 0.1},
        fetch={"threads": 2, "connect_timeout": 1.0, "read_timeout": 1.0, "total_timeout": 2.0},
    )
    host = f"victim.rb.test:{web.port}"
    try:
        worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)
        try:
            worker.add([web.url("victim.rb.test", "/")], time.time())
            assert worker.run_until_idle(timeout=30)
        finally:
            worker.close()
        worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)
        try:
            worker.frontier.store.delete("robots", host.encode())
            worker.frontier.commit(time.time())
            worker.add([web.url("victim.rb.test", "/later")], time.time())
            assert worker.run_until_idle(timeout=30)
        finally:
            worker.close()
    finally:
        web.close()
    assert [path for path, _, _ in web.requests("victim.rb.test")] == ["/robots.txt"] * 2


def test_unreadable_rules_while_fresh_mean_robots_txt_again_before_any_page(
    web_server: WebProcess, tmp_path: Path
) -> None:
    """A host's robots.txt was fetched and its rules kept; then the stored entry becomes
    unreadable (damaged) while the host's state still holds it fresh (robots_until a day
    ahead). After a restart, the host's next page waits for robots.txt to be fetched again:
    at the server, the first request after the damage is /robots.txt, never a page."""
    host = next(h for h, kind in web_server.web.robots.items() if kind == "standard")
    cfg = crawl_config(web_server, frontier={"max_depth": 0})
    key = f"{host}:{web_server.port}"
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)
    try:
        worker.add([web_server.url(host, "/")], time.time())
        assert worker.run_until_idle(timeout=30)
        assert worker.frontier.store.get("robots", key.encode())
    finally:
        worker.close()
    damaged_at = time.time()
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)
    try:
        state = worker.frontier.back.host(host_hash(key))
        assert state is not None and state.robots_state("http")[0] > time.time() + 3600
        worker.frontier.store.put("robots", key.encode(), b"\x03damaged")
        worker.frontier.commit(time.time())
        page = web_server.url(host, "/?after=damage")  # not seen: / linked nothing at depth 0
        worker.add([page], time.time())
        assert worker.run_until_idle(timeout=30)
        assert worker.stats()["robots/corrupt"] >= 1
    finally:
        worker.close()
    wait_for(lambda: any(r.hostname == host and r.start > damaged_at and r.path != "/robots.txt"
                         for r in web_server.requests), 10)
    after = sorted((r for r in web_server.requests if r.hostname == host and r.start > damaged_at),
                   key=lambda r: r.start)
    assert [r.path for r in after] == ["/robots.txt", page.split(key, 1)[1]]


def test_a_fetch_thread_busy_past_close_writes_to_no_closed_descriptor(
        web_server: WebProcess, tmp_path: Path) -> None:
    """A fetch still running when the worker closes (here: held until after close) ends
    without touching a closed or reused descriptor; its URL stays pending in the store."""
    cfg = crawl_config(web_server, fetch={"threads": 8})
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    release, entered = threading.Event(), threading.Event()

    def held(lease: Lease, stale: object, started: float, address: str | None) -> Fetched:
        entered.set()
        release.wait(30)
        return Fetched(Kind.ERROR, lease=lease, started=started, finished=time.time())

    worker.pipeline.run = held  # type: ignore[method-assign]
    worker.admit([UrlRecord(web_server.seeds()[0], canonicalize(web_server.seeds()[0])
                            .split("/")[2], 0)], time.time())
    wait_for(lambda: worker.loop_once(time.time()) is not None and entered.is_set(), timeout=30)
    worker.close(join_timeout=0.1)
    # The idle threads have taken their stop and gone: the held one finds the job queue
    # below its low-water mark, where a fetch thread wakes the frontier thread.
    wait_for(lambda: sum(thread.is_alive() for thread in worker._threads) == 1, timeout=10)
    release.set()
    [thread.join(30) for thread in worker._threads]
    assert not any(thread.is_alive() for thread in worker._threads)
    reopened = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    try:
        assert reopened.frontier.pending >= 1
    finally:
        reopened.close()


def test_a_lease_granted_after_the_fence_lapsed_does_not_start(tmp_path: Path) -> None:
    """A cluster machine's worker leases nothing once its lease from the head lapses
    (hive/procs/fence.py); a lease handed out before, still waiting for its address's grant,
    does not start when the grant comes after the lapse (a machine whose link was cut
    got its grants once the link was up: tests/test_cluster_netns.py): it waits again,
    and goes once the fence holds again. Nothing is lost."""
    from hive.testweb import Web

    with WebProcess(Web(seed=3, hosts=4, pages=1, hostile=False), tmp_path / "requests.jsonl",
                    host="127.0.0.2") as web:
        # One fetch at a time at the web's one address, a grant each half second: the
        # seeds' leases all go out at once, and all but one wait for their grant.
        cfg = crawl_config(web, politeness={"ip_concurrency": 1, "ip_min_delay": 0.5})
        worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
        holds = [True]
        worker.may_lease = lambda: holds[0]
        worker.add(web.seeds(), time.time())
        assert worker.addresses is not None
        deadline = time.monotonic() + 10
        while worker.addresses.waiting_count() < len(web.seeds()) - 1:
            assert time.monotonic() < deadline, worker.addresses.waiting_count()
            worker.wait(min(worker.loop_once(time.time()), 0.05))
        holds[0] = False
        lapsed = time.time()
        deadline = time.monotonic() + 2.5  # a grant for every lease waiting, and more
        while time.monotonic() < deadline:
            worker.wait(min(worker.loop_once(time.time()), 0.1))
        # Only the lease that had its grant before the lapse may have reached the server.
        started = {r.host for r in web.requests if r.received > lapsed}
        assert len(started) <= 1, started
        assert worker.stats().get("address/spoiled", 0) >= 2
        holds[0] = True
        assert worker.run_until_idle(timeout=60)
        worker.close()
        assert web.in_scope_urls() <= {r.url for r in web.requests}


class SlowPages(BaseHTTPRequestHandler):
    """robots.txt: 404 (allow all) at once; every page after PAGE_SECONDS, linking nowhere."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.paths.append(  # type: ignore[attr-defined]
            (time.time(), self.headers["Host"], self.path))
        body = b"<html><body>a page</body></html>"
        if self.path == "/robots.txt":
            self.send_response(404)
            body = b""
        else:
            time.sleep(PAGE_SECONDS)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


PAGE_SECONDS = 0.3


def test_a_lease_queued_to_a_busy_fetch_thread_does_not_start_after_the_fence_lapsed(
        tmp_path: Path) -> None:
    """Without address limits, leases wait in the fetch threads' queue behind a slow page:
    one taken by the thread after its machine's lease lapsed (hive/procs/fence.py) does not
    start; it goes once the fence holds again. Nothing is lost."""
    server = ThreadingHTTPServer(("127.0.0.2", 0), SlowPages)
    server.paths = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        cfg = config.load(environ={}).replace(
            dns={"resolve": ["*.test=127.0.0.2"], "allow_nets": ["127.0.0.2/32"]},
            politeness={"min_delay": 0.05, "max_delay": 0.2, "ip_concurrency": 0},
            fetch={"threads": 1, "total_timeout": 5.0})
        worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
        holds = [True]
        worker.may_lease = lambda: holds[0]
        seeds = [f"http://h{i}.test:{port}/" for i in range(6)]
        worker.add(seeds, time.time())
        deadline = time.monotonic() + 10
        # Until the one thread is in a slow page with more leases queued behind it.
        while not (any(path == "/" for _, _, path in server.paths)  # type: ignore[attr-defined]
                   and worker.in_flight >= 2):
            assert time.monotonic() < deadline, server.paths  # type: ignore[attr-defined]
            worker.wait(min(worker.loop_once(time.time()), 0.01))
        holds[0] = False
        lapsed = time.time()
        deadline = time.monotonic() + 4 * PAGE_SECONDS
        while time.monotonic() < deadline:
            worker.wait(min(worker.loop_once(time.time()), 0.05))
        after = [(host, path) for when, host, path in server.paths  # type: ignore[attr-defined]
                 if when > lapsed]
        assert after == [], after
        holds[0] = True
        assert worker.run_until_idle(timeout=60)
        worker.close()
        pages = {host for _, host, path in server.paths  # type: ignore[attr-defined]
                 if path == "/"}
        assert pages == {f"h{i}.test:{port}" for i in range(6)}
    finally:
        server.shutdown()
        server.server_close()
