"""The synthetic web: determinism, reachability, robots variants, hostile hosts, log, checkers."""

from __future__ import annotations

import codecs
import http.client
import json
import re
import selectors
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections import deque
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import protego
import pytest

from hive.testweb import (
    Request,
    Web,
    WebServer,
    as_received,
    duplicates,
    graph,
    politeness_violations,
    received,
    serve,
)
from hive.testweb.cookies import CookieWeb
from hive.testweb.requestlog import load_log
from tests.conftest import wait_for

ADDRESS = "127.0.0.2"
HREF = re.compile(r'href="([^"]*)"')


@pytest.fixture(scope="module")
def server() -> Iterator[WebServer]:
    with serve(Web(seed=3, hosts=10, pages=8, links=12, page_bytes=2000), ADDRESS) as running:
        yield running


def fetch(
    server: WebServer, host: str, path: str, amount: int | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection; reads at most ``amount`` bytes of the body."""
    with closing(http.client.HTTPConnection(server.address, server.port, timeout=5)) as conn:
        conn.request("GET", path, headers={"Host": f"{host}:{server.port}"})
        with closing(conn.getresponse()) as response:
            body = response.read(amount) if amount is not None else response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def canonical(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path or "/", parts.query, ""))


def host_of(web: Web, kind: str) -> str:
    return next(name for name, k in {**web.robots, **web.hostile}.items() if k == kind)


def all_pages(web: Web) -> list[tuple[str, str]]:
    return [
        (name, path)
        for name in web.names
        for path in ["/", "/robots.txt", *(f"/p/{i}.html" for i in range(1, web.pages))]
    ]


# --- the model ---


def page(web: Web, name: str, path: str) -> graph.Response:
    reply = web.respond(name, path, port=8080, tripwire=9)
    assert isinstance(reply, graph.Response)
    return reply


def test_same_seed_same_web_other_seed_other_web() -> None:
    def render(web: Web) -> list[bytes]:
        return [page(web, name, path).wire() for name, path in all_pages(web)]

    one, two, other = (Web(seed=s, hosts=8, pages=6) for s in (5, 5, 6))
    assert one.robots == two.robots and render(one) == render(two)
    assert one.seeds(8080) == two.seeds(8080) and one.in_scope_urls(8080) == two.in_scope_urls(8080)
    assert render(one) != render(other)


def test_pages_have_the_promised_links_and_size() -> None:
    web = Web(seed=1, hosts=10, pages=12, links=20, cross_host=0.2, page_bytes=3000)
    hrefs: list[str] = []
    repeats = cross = 0
    for name, path in all_pages(web):
        if path == "/robots.txt":
            continue
        reply = page(web, name, path)
        links = HREF.findall(reply.body.decode())
        assert reply.status == 200 and len(links) >= 20
        if name != web.names[0]:
            assert 3000 <= len(reply.body) <= 3100
            repeats += len(links) > len(set(links))
            here = web.url(name, path, 8080)
            cross += sum(urlsplit(urljoin(here, h)).hostname != name for h in links)
        hrefs += links
    assert repeats > 0
    assert 0.1 < cross / len(hrefs) < 0.3
    spellings = (r"http://h.*", r"http://H.*", r"//h.*", r"/p/.*", r"\.\./.*", r"[0-9]+\.html")
    for pattern in (*spellings, r".*#s[0-9]"):
        assert any(re.fullmatch(pattern, h) for h in hrefs), pattern


def test_expected_answers_follow_the_robots_variants() -> None:
    web = Web(seed=2, hosts=12, pages=5)
    assert list(web.robots.values()).count("standard") == 12 - len(graph.ROBOTS_VARIANTS)
    assert web.robots[web.names[0]] == "standard"
    scope, banned = web.in_scope_urls(8080), web.disallowed_urls(8080)
    assert not scope & banned
    assert web.seeds(8080)[0] == "http://h000.web.test:8080/"
    error, missing = host_of(web, "error"), host_of(web, "missing")
    assert web.url(error, "/p/1.html", 8080) in banned
    assert web.url(missing, "/private/0.html", 8080) in scope
    assert web.url(web.names[0], "/private/2.html", 8080) in banned
    assert len(scope) == 11 * 5 + graph.PRIVATE_PAGES
    assert web.url(web.names[0], "/", 80) == "http://h000.web.test/"
    assert web.crawl_delay == {host_of(web, "crawl-delay"): 0.5}


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        Web(hosts=0)
    with pytest.raises(ValueError):
        Web(cross_host=1.5)


def test_a_tame_web_links_nothing_hostile() -> None:
    web = Web(hosts=3, pages=2, hostile=False)
    links = HREF.findall(page(web, web.names[0], "/").body.decode())
    assert web.hostile == {} and web.private_links(9) == []
    assert {urlsplit(urljoin("http://h000.web.test:8080/", h)).hostname for h in links} <= {
        *web.names, None
    }


# --- served over loopback ---


def test_every_in_scope_page_is_reachable_from_the_seeds(server: WebServer) -> None:
    web, banned = server.web, server.disallowed_urls()
    crawlable = {name for name, kind in web.robots.items() if kind != "error"}
    queue, seen, fetched = deque(server.seeds()), set(server.seeds()), set()
    linked_banned: set[str] = set()
    with closing(http.client.HTTPConnection(server.address, server.port, timeout=5)) as conn:
        while queue:
            url = queue.popleft()
            parts = urlsplit(url)
            if parts.hostname not in crawlable:
                continue
            conn.request("GET", parts.path, headers={"Host": parts.netloc})
            with closing(conn.getresponse()) as response:
                assert response.status == 200, url
                body = response.read().decode()
            fetched.add(url)
            for href in HREF.findall(body):
                link = canonical(urljoin(url, href))
                if link in banned:
                    linked_banned.add(link)
                elif urlsplit(link).hostname in web.names and link not in seen:
                    seen.add(link)
                    queue.append(link)
    assert fetched == server.in_scope_urls()
    assert linked_banned <= banned
    assert any("/private/" in url for url in linked_banned)


def test_robots_variants_are_served_as_specified(server: WebServer) -> None:
    web = server.web
    server.reset()
    status, _, body = fetch(server, web.names[0], "/robots.txt")
    rules = protego.Protego.parse(body.decode())
    assert status == 200
    assert not rules.can_fetch("/private/0.html", "hive") and rules.can_fetch("/p/1.html", "hive")
    assert not rules.can_fetch("/p/1.html", "badbot")
    status, _, body = fetch(server, host_of(web, "crawl-delay"), "/robots.txt")
    assert status == 200 and protego.Protego.parse(body.decode()).crawl_delay("hive") == 0.5
    status, _, body = fetch(server, host_of(web, "bom"), "/robots.txt")
    assert status == 200 and body.startswith(codecs.BOM_UTF8)
    rules = protego.Protego.parse(body.decode("utf-8-sig"))
    assert not rules.can_fetch("/private/1.html", "hive")
    assert fetch(server, host_of(web, "missing"), "/robots.txt")[0] == 404
    assert fetch(server, host_of(web, "error"), "/robots.txt")[0] == 500
    unavailable = host_of(web, "unavailable")
    status, headers, _ = fetch(server, unavailable, "/robots.txt")
    assert status == 503 and headers["retry-after"] == "1"
    status, _, body = fetch(server, unavailable, "/robots.txt")
    assert status == 200 and b"Disallow: /private/" in body
    hostile = fetch(server, "drip.web.test", "/robots.txt")
    assert hostile[0] == 200 and protego.Protego.parse(hostile[2].decode()).can_fetch("/", "hive")


def test_h000_links_every_hostile_host_and_private_address(server: WebServer) -> None:
    _, _, body = fetch(server, server.web.names[0], "/")
    hrefs = set(HREF.findall(body.decode()))
    assert set(server.web.hostile_links(server.port)) <= hrefs
    assert set(server.web.private_links(server.tripwire)) <= hrefs
    assert {urlsplit(h).hostname for h in server.web.hostile_links(server.port)} == set(
        server.web.hostile
    )
    assert {"http://10.0.0.1/", f"http://[::ffff:127.0.0.1]:{server.tripwire}/"} <= hrefs
    assert server.resolve == f"*.web.test={ADDRESS}"


def test_gzip_bomb_inflates_past_100_mb(server: WebServer) -> None:
    status, headers, body = fetch(server, "gzip-bomb.web.test", "/")
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert int(headers["content-length"]) == len(body) < 1 << 20
    assert struct.unpack("<I", body[-4:])[0] == graph.BOMB_INFLATED & 0xFFFFFFFF
    inflate, inflated, pending = zlib.decompressobj(31), 0, body
    while inflated <= 100_000_000 and pending:
        inflated += len(inflate.decompress(pending, 1 << 22))
        pending = inflate.unconsumed_tail
    assert inflated > 100_000_000


def test_endless_body_streams_until_the_client_leaves(server: WebServer) -> None:
    server.reset()
    status, headers, body = fetch(server, "endless.web.test", "/", amount=1 << 20)
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert "content-length" not in headers and len(body) == 1 << 20
    wait_for(lambda: any(r.hostname == "endless.web.test" for r in server.requests))
    record = next(r for r in server.requests if r.hostname == "endless.web.test")
    assert record.status == 200 and record.end >= record.start


def test_drip_sends_a_byte_every_half_second(server: WebServer) -> None:
    with closing(http.client.HTTPConnection(server.address, server.port, timeout=3)) as conn:
        conn.request("GET", "/", headers={"Host": "drip.web.test"})
        with closing(conn.getresponse()) as response:
            assert response.getheader("content-length") == str(graph.DRIP_BYTES)
            times = []
            for _ in range(3):
                assert len(response.read(1)) == 1
                times.append(time.monotonic())
    assert all(b - a > graph.DRIP_INTERVAL * 0.8 for a, b in zip(times, times[1:], strict=False))


def test_redirects_loop_and_point_at_private_addresses(server: WebServer) -> None:
    chain = [fetch(server, "redirect-loop.web.test", path) for path in ("/", "/a", "/b")]
    assert [(s, h["location"]) for s, h, _ in chain] == [(302, "/a"), (302, "/b"), (302, "/a")]
    locations = {
        path: fetch(server, "redirect-private.web.test", path)[1]["location"]
        for path in ("/loopback", "/decimal", "/mapped", "/localhost", "/metadata", "/private-net")
    }
    assert locations["/loopback"] == f"http://127.0.0.1:{server.tripwire}/tripwire"
    assert locations["/decimal"] == f"http://2130706433:{server.tripwire}/tripwire"
    assert locations["/metadata"] == "http://169.254.169.254/latest/meta-data/"
    assert locations["/private-net"] == "http://10.0.0.1/"
    assert all(ADDRESS not in location for location in locations.values())


def test_rate_limited_host_answers_429_with_retry_after(server: WebServer) -> None:
    for path in ("/", "/p/1.html"):
        status, headers, _ = fetch(server, "rate-limited.web.test", path)
        assert status == 429 and headers["retry-after"] == "2"


def test_calendar_never_ends(server: WebServer) -> None:
    _, _, body = fetch(server, "calendar.web.test", "/")
    url, seen = HREF.findall(body.decode())[0], set()
    for _ in range(40):
        status, _, body = fetch(server, "calendar.web.test", url)
        assert status == 200 and url not in seen
        seen.add(url)
        url = HREF.findall(body.decode())[0]
    _, _, body = fetch(server, "calendar.web.test", "/cal/2024/01/31")
    assert HREF.findall(body.decode()) == ["/cal/2024/02/01", "/cal/2024/02/29", "/cal/2025/01/31"]
    assert fetch(server, "calendar.web.test", "/cal/2024/02/30")[0] == 404


def test_huge_page_and_binary_page(server: WebServer) -> None:
    status, headers, body = fetch(server, "huge.web.test", "/", amount=1 << 16)
    assert status == 200 and int(headers["content-length"]) >= 30 << 20
    assert body.startswith(b"<!doctype html>")
    status, headers, body = fetch(server, "binary.web.test", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert len(body) == graph.BINARY_BYTES and b"\x00" in body


def test_log_records_each_request_and_strays(server: WebServer) -> None:
    server.reset()
    name = server.web.names[1]
    with closing(http.client.HTTPConnection(server.address, server.port, timeout=5)) as conn:
        for method, path in (("GET", "/p/1.html"), ("HEAD", "/"), ("GET", "/nothing")):
            before = time.time()
            conn.request(method, path, headers={"Host": f"{name.upper()}:{server.port}"})
            with closing(conn.getresponse()) as response:
                response.read()
    # A record is added once its answer is written; streams of earlier tests may still end.
    wait_for(lambda: len([r for r in server.requests if r.hostname == name]) == 3)
    first, head, missing = [r for r in server.requests if r.hostname == name]
    assert first.host == f"{name}:{server.port}" and first.url == server.url(name, "/p/1.html")
    assert (first.method, first.status, head.method, missing.status) == ("GET", 200, "HEAD", 404)
    assert before <= missing.start <= missing.end <= time.time()
    assert first.client == head.client and first.client.startswith("127.")  # kept alive
    with closing(http.client.HTTPConnection("127.0.0.1", server.tripwire, timeout=5)) as conn:
        conn.request("GET", "/tripwire")
        with closing(conn.getresponse()) as response:
            assert response.status == 404
            response.read()
    wait_for(lambda: [r.path for r in server.web.strays(server.requests)] == ["/tripwire"])


def test_the_kernel_stamps_when_a_request_arrived_and_its_response_went_out(
    server: WebServer,
) -> None:
    """Each request of a kept-alive connection, the first included (it may arrive before
    the connection is accepted), has the kernel's stamps, and they keep causal order with
    the client's clock: sent after it asked, had whole before it read the last byte (a stamp
    of another response, an earlier send's, would break the order). The handler stamps a
    request after the kernel did."""
    server.reset()
    name = server.web.names[2]
    seen: list[tuple[float, float]] = []
    with closing(http.client.HTTPConnection(server.address, server.port, timeout=5)) as conn:
        for path in ("/", "/p/1.html", "/robots.txt", "/p/2.html"):
            asked = time.time()
            conn.request("GET", path, headers={"Host": f"{name}:{server.port}"})
            with closing(conn.getresponse()) as response:
                response.read()
            seen.append((asked, time.time()))
    wait_for(lambda: len([r for r in server.requests if r.hostname == name]) == 4)
    records = [r for r in server.requests if r.hostname == name]
    for (asked, had), record in zip(seen, records, strict=True):
        assert record.arrived is not None and record.sent is not None, record
        assert asked <= record.arrived <= record.sent <= had, (asked, record, had)
        assert record.arrived <= record.start and record.sent <= record.end, record
        assert (record.received, record.finished) == (record.arrived, record.sent)


def test_close_ends_open_streams() -> None:
    with serve(Web(hosts=1, pages=1), ADDRESS) as running:
        conn = http.client.HTTPConnection(running.address, running.port, timeout=5)
        with closing(conn):
            conn.request("GET", "/", headers={"Host": "drip.web.test"})
            with closing(conn.getresponse()) as response:
                response.read(1)
                started = time.monotonic()
                running.close()
                assert time.monotonic() - started < 2
                with pytest.raises(http.client.IncompleteRead):
                    response.read()
    assert running.requests[-1].hostname == "drip.web.test"


# --- the checkers ---


def req(host: str, start: float, end: float, path: str = "/", status: int = 200) -> Request:
    return Request(host, path, "GET", status, start, end, "127.0.0.1:1")


def test_politeness_violations_catch_overlap_and_short_gaps() -> None:
    polite = [req("a:1", 0.0, 1.0), req("a:1", 2.0, 2.5), req("b", 0.5, 3.0), req("a", 3.5, 4.0)]
    assert politeness_violations(polite, 1.0) == []
    overlap = [req("a", 0.0, 1.0), req("a", 0.5, 0.7, "/x")]
    [message] = politeness_violations(overlap)
    assert "in flight" in message and "/x" in message
    inside_long = [req("a", 0.0, 10.0), req("a", 3.0, 4.0), req("a", 1.0, 2.0)]
    assert len(politeness_violations(inside_long)) == 2
    short = [req("a", 0.0, 1.0), req("a", 1.2, 1.5, "/y")]
    [message] = politeness_violations(short, {"a": 0.5})
    assert "0.200s after" in message
    assert politeness_violations(short, {"b": 0.5}) == []
    assert politeness_violations(short, 0.5, tolerance=0.35) == []


def test_responses_end_when_the_crawler_had_them_if_the_server_stamped_later(
    tmp_path: Path,
) -> None:
    lines = [{"t": 1.01, "url": "http://a/x"}, {"t": 5.0, "url": "http://a/x"},
             {"t": 2.9, "url": "http://a/y"}]
    (tmp_path / "crawl-00.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + '{"t": 9, "url": "http://a/cut'
    )
    times = received(tmp_path)
    assert times == {"http://a/x": [1.01, 5.0], "http://a/y": [2.9]}
    late = req("a", 0.0, 1.5, "/x")
    early = req("a", 2.0, 2.5, "/y")
    again = req("a", 4.0, 4.5, "/x")
    unknown = req("a", 6.0, 6.5, "/z")
    timed = as_received([late, early, again, unknown], times)
    assert [r.end for r in timed] == [1.01, 2.5, 4.5, 6.5]
    assert politeness_violations([late, req("a", 2.0, 2.1, "/y")], 1.0) != []
    assert politeness_violations(as_received([late, req("a", 2.0, 2.1, "/y")], times), 0.95) == []


def test_duplicates_count_final_gets_only() -> None:
    records = [
        req("a", 0, 1, "/p/1.html"), req("a", 2, 3, "/p/1.html"), req("a", 0, 1, "/robots.txt"),
        req("a", 2, 3, "/robots.txt"), req("b", 0, 1, "/", 503), req("b", 2, 3, "/"),
        req("c", 0, 1, "/", 429), req("c", 2, 3, "/", 429),
    ]
    assert duplicates(records) == {"http://a/p/1.html": 2}


# --- its own process ---


def test_subprocess_serves_on_127_0_0_2_by_default_and_writes_its_log_on_sigterm(
    tmp_path: Path,
) -> None:
    log = tmp_path / "requests.jsonl"
    command = [sys.executable, "-m", "hive.testweb", "--hosts", "3", "--log", str(log)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        try:
            assert process.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(process.stdout, selectors.EVENT_READ)
                assert selector.select(timeout=10), "no port printed"
            port = int(process.stdout.readline())
            # The address the README's recipe resolves the web's names to.
            with closing(http.client.HTTPConnection("127.0.0.2", port, timeout=5)) as conn:
                conn.request("GET", "/p/2.html", headers={"Host": f"h001.web.test:{port}"})
                with closing(conn.getresponse()) as response:
                    assert response.status == 200
                    response.read()
            process.send_signal(signal.SIGTERM)
            _, errors = process.communicate(timeout=10)
        finally:
            # A failed assertion must not leave Popen's exit waiting on a server forever.
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0 and errors == b""
    [record] = load_log(log)
    assert record.url == f"http://h001.web.test:{port}/p/2.html" and record.status == 200


def test_cookie_hosts_set_the_cookies_asked_for_and_the_log_keeps_the_header(
    tmp_path: Path,
) -> None:
    web = Web(seed=3, hosts=1, pages=1, hostile=False)
    cookies = CookieWeb(web.domain, hosts=2, count=3, size=100, pages=2)
    host = cookies.names[1]
    assert cookies.respond("h000.web.test", "/") is None  # not a cookie host: the web's
    root = cookies.respond(host, "/")
    assert root is not None and root.headers == (("Set-Cookie", "session=s1; Path=/"),)
    assert cookies.set_path().encode() in root.body
    made = cookies.respond(host, "/set/3x100.html")
    assert made is not None and [len(v.partition(";")[0]) for _, v in made.headers] == [100] * 3
    assert all(p.encode() in made.body for p in cookies.after_paths())
    gone = cookies.respond(host, "/after/2.html")
    assert gone is not None and gone.status == 404
    with serve(web, ADDRESS, log=tmp_path / "log.jsonl", cookies=cookies) as running:
        with closing(http.client.HTTPConnection(running.address, running.port, timeout=5)) as c:
            for cookie in ("session=s1", ""):
                c.request("GET", "/after/0.html", headers={
                    "Host": f"{host}:{running.port}", **({"Cookie": cookie} if cookie else {})})
                with closing(c.getresponse()) as response:
                    assert response.status == 200
                    response.read()
        wait_for(lambda: len(running.requests) == 2)
        assert [r.cookie for r in running.requests] == ["session=s1", ""]
    assert [r.cookie for r in load_log(tmp_path / "log.jsonl")] == ["session=s1", ""]
