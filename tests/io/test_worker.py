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
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive import config
from hive.testweb import (
    UNAVAILABLE_RETRY_AFTER,
    WebProcess,
    as_received,
    duplicates,
    politeness_violations,
    received,
)
from hive.urls import canonicalize
from hive.worker import Worker
from tests.conftest import crawl_config
from tests.proxyserver import ConnectProxy

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
