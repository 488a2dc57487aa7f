"""hive against a real web server: nginx with virtual hosts, TLS, gzip and real documentation.

Judged at the server, from nginx's access log: every URL reachable by links
(worked out from the served files by tests/real/reachable.py, not by hive's
code) fetched once and answered as the files say, nothing else fetched,
nothing robots.txt forbids, no two requests to one host at once and none
sooner than the host's delay after the last ended, robots.txt included. The
WARC payloads are the files on disk, byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive import config
from hive.fetch.client import OUTCOME_KINDS
from hive.testweb import politeness_violations
from tests.conftest import LAUNCHED
from tests.real.conftest import ADDRESS, DOMAIN, Hit, Nginx
from tests.real.reachable import walk
from tests.test_hive import write_config

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DELAY = 0.05
# nginx stamps times to the millisecond; a start is the difference of two stamps.
STAMP_ROUNDING = 0.002


def url_key(url: str) -> str:
    """A URL as the server sees it: percent-escapes decoded in the path, fragment dropped."""
    parts = urlsplit(url)
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.hostname}:{parts.port}{unquote(parts.path)}{query}"


def hit_key(hit: Hit) -> str:
    return url_key(f"{hit.origin}{hit.target}")


def crawl(nginx: Nginx, tmp: Path, timeout: float = 120) -> Path:
    """Run ``hive start --procs 2`` over the vhosts to its end; returns the data directory."""
    cfg = config.load(environ={}).replace(
        dns={"resolve": [nginx.resolve], "allow_nets": [f"{ADDRESS}/32"]},
        # one host at one address: the address limits stay on but do not bind (the host's
        # delay is what the test measures at nginx's log)
        politeness={"min_delay": DELAY, "max_delay": 0.2, "crawl_delay_cap": 0.5,
                    "ip_concurrency": 8, "ip_min_delay": 0.0},
        robots={"retry_delay": 0.2, "tries": 2},
        fetch={"threads": 8, "connect_timeout": 2.0, "read_timeout": 5.0, "total_timeout": 10.0},
        # No per-host cap or depth limit short of the site: coverage is the point.
        frontier={"max_urls_per_host": 5000, "max_depth": 64, "sync_interval": 0.5},
    )
    data = tmp / "data"
    seeds = tmp / "seeds.txt"
    seeds.write_text("\n".join(nginx.seeds()) + "\n")
    # hive has no setting for a CA yet: SSL_CERT_FILE makes OpenSSL trust the test CA
    # (instead of the system's, which no test host needs).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SSL_CERT_FILE": str(nginx.ca.path)}
    out = tmp / "start.out"
    with out.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "--config", str(write_config(cfg, tmp / "hive.toml")),
             "start", "--procs", "2", "--data", str(data), "--seeds", str(seeds), "--quiet"],
            env=env, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
    LAUNCHED.append(process)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"hive did not finish in {timeout}s:\n{out.read_text()[-3000:]}"
                             ) from None
    assert process.returncode == 0, out.read_text()[-3000:]
    return data


def warc_payloads(data: Path) -> dict[str, tuple[int, str, bytes]]:
    """Response records by target URL: (status, Content-Encoding, decoded payload); a
    revisit record's payload is its original's (``WARC-Refers-To-Target-URI``)."""
    out, revisits = {}, {}
    for path in sorted((data / "warc").glob("*.warc.gz")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type not in ("response", "revisit"):
                    continue
                headers, target = record.http_headers, record.rec_headers.get_header
                found = (int(headers.get_statuscode()),
                         headers.get_header("Content-Encoding") or "")
                if record.rec_type == "revisit":
                    original = target("WARC-Refers-To-Target-URI")
                    revisits[target("WARC-Target-URI")] = (found, original)
                    continue
                out[target("WARC-Target-URI")] = (*found, record.content_stream().read())
    for uri, ((status, encoding), original) in revisits.items():
        out[uri] = (status, encoding, out[original][2])
    return out


def crawl_log(data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((data / "logs").glob("crawl-*.jsonl"))
            for line in path.read_text().splitlines()]


def test_a_crawl_of_nginx_is_complete_polite_and_faithful(nginx: Nginx, tmp_path: Path) -> None:
    vhosts = {vhost.origin: vhost for vhost in nginx.vhosts.values()}
    site = walk(nginx.seeds(), vhosts, DOMAIN)
    assert not site.foreign, sorted(site.foreign)
    expected = {url_key(url): status for url, status in site.status.items()}
    # The site has what the test is about: a few hundred real pages, redirects, dead links,
    # links robots.txt forbids, on every host.
    statuses = Counter(expected.values())
    assert statuses[200] > 250 and statuses[301] >= 1 and statuses[404] >= 10, statuses
    assert {urlsplit(url).hostname for url in site.forbidden} >= {
        f"www.{DOMAIN}", f"lib.{DOMAIN}", f"capi.{DOMAIN}"}

    data = crawl(nginx, tmp_path)
    hits = nginx.hits()
    assert {hit.method for hit in hits} == {"GET"}
    assert {hit.origin for hit in hits} <= set(vhosts), "a request for a host not served"
    robots = [hit for hit in hits if hit.path == "/robots.txt"]
    pages = [hit for hit in hits if hit.path != "/robots.txt"]

    # Nothing robots.txt forbids, judged by each host's rules, not only on the links seen.
    forbidden = [hit_key(hit) for hit in pages if not vhosts[hit.origin].allowed(hit.path)]
    assert not forbidden, forbidden

    # Polite: per host, no overlap and at least its delay (Crawl-delay where given) between
    # one request's end and the next one's start, robots.txt included.
    gaps = {vhost.name: max(DELAY, vhost.crawl_delay or 0.0) for vhost in vhosts.values()}
    violations = politeness_violations([hit.request() for hit in hits], gaps,
                                       tolerance=STAMP_ROUNDING)
    assert not violations, violations[:10]

    # Complete: every reachable URL fetched, with the answer the files give; nothing else.
    fetched = {hit_key(hit): hit.status for hit in pages}
    missing = sorted(set(expected) - set(fetched))
    assert not missing, (len(missing), missing[:10])
    unexpected = sorted(set(fetched) - set(expected))
    assert not unexpected, (len(unexpected), unexpected[:10])
    wrong = {key: (fetched[key], status) for key, status in expected.items()
             if fetched[key] != status}
    assert not wrong, wrong
    repeated = {key: n for key, n in Counter(hit_key(hit) for hit in pages).items() if n > 1}
    assert not repeated, repeated
    assert sorted(hit.origin for hit in robots) == sorted(vhosts), "robots.txt once a host"

    # The server's connection limits cost nothing: no fetch failed or was retried.
    outcomes = Counter(entry["outcome"] for entry in crawl_log(data))
    failures = set(OUTCOME_KINDS) - {"ok", "redirect"} | {"robots_unreachable"}
    assert not failures & set(outcomes), outcomes
    assert (outcomes["ok"], outcomes["redirect"], outcomes["http_404"]) == (
        statuses[200], statuses[301], statuses[404]), outcomes
    by_host = {short: [hit for hit in hits if hit.host == vhost.name]
               for short, vhost in nginx.vhosts.items()}
    # lib closes a connection (shared with www: same address and port) once it has served
    # three requests; the idle connections of howto are closed before each next request.
    last = {hit.connection: hit.connection_requests for hit in sorted(hits, key=lambda h: h.end)}
    closing = [hit for hit in by_host["lib"] if hit.connection_requests >= 3]
    assert closing and all(last[hit.connection] == hit.connection_requests for hit in closing)
    stale = by_host["howto"]
    assert len({hit.connection for hit in stale}) > len(stale) / 2, "idle connections not closed"

    # gzip was on the wire, and the WARC holds what was sent: each response's decoded
    # payload is the file on disk.
    plain = [hit.target for hit in pages
             if hit.status == 200 and hit.path.endswith((".html", "/")) and hit.encoding != "gzip"]
    assert not plain, plain
    records = warc_payloads(data)
    stored = {url_key(url): record for url, record in records.items()}
    for url, file in site.files.items():
        status, encoding, payload = stored[url_key(url)]
        assert status == 200 and payload == file.read_bytes(), url
        if file.suffix == ".html":
            assert encoding == "gzip", url
