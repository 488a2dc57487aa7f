"""Page requisites crawled as embeds, measured at the server: every one fetched, politely,
under robots.txt, past max_depth, off scope as scope.embeds says, chains bounded."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hive.procs.worker import Worker
from hive.testweb import Web, WebProcess, as_received, duplicates, politeness_violations, received
from hive.testweb.requisites import CHAIN, FONT, GALLERY, GALLERY_IMAGES, STATIC_PATHS
from tests.conftest import WEB_ADDRESS, crawl_config

GAP = 0.1


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebProcess]:
    """Two hosts of one page each, embedding requisites on themselves and a static host."""
    web = Web(seed=5, hosts=2, pages=1, hostile=False, robots_crawl_delay=0.2, requisites=True)
    log = tmp_path_factory.mktemp("web") / "requests.jsonl"
    with WebProcess(web, log, host=WEB_ADDRESS) as server:
        yield server


def crawl(site: WebProcess, directory: Path, **scope: Any) -> dict[str, Any]:
    """Crawl the site's seeds with one worker, links refused past depth 0 (max_depth)."""
    before = len(site.requests)
    cfg = crawl_config(site, scope=scope, politeness={"min_delay": GAP},
                       frontier={"max_depth": 0})
    worker = Worker(cfg, directory / "store", warc_dir=directory / "warc", log_dir=directory)
    worker.add(site.seeds(), time.time())
    finished = worker.run_until_idle(timeout=40)
    stats = worker.stats()
    worker.close()
    log = [json.loads(line) for line in (directory / "crawl-00.jsonl").read_text().splitlines()]
    return {"finished": finished, "stats": stats, "requests": site.requests[before:],
            "log": log, "received": received(directory)}


@pytest.fixture(scope="module")
def default_crawl(site: WebProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return crawl(site, tmp_path_factory.mktemp("default"), mode="host")


def test_every_requisite_is_fetched_once_past_max_depth(
    default_crawl: dict[str, Any], site: WebProcess
) -> None:
    assert default_crawl["finished"], default_crawl["stats"]
    got = {r.url for r in default_crawl["requests"] if r.method == "GET" and r.status == 200}
    expected = site.web.requisite_urls(site.port)
    assert expected - got == set()
    # max_depth 0 refused every link: the pages fetched are the seeds alone.
    pages = {url for url in got if url.endswith("/") or url.endswith(".html")}
    assert pages == set(site.seeds())
    assert duplicates(default_crawl["requests"]) == {}
    assert default_crawl["stats"]["embeds/found"] >= len(expected)
    assert not [url for url in got if url.endswith("@2x.png")], "of a srcset, the 1x image"


def test_embeds_are_fetched_politely_under_robots(
    default_crawl: dict[str, Any], site: WebProcess
) -> None:
    requests = default_crawl["requests"]
    gaps = {host: GAP for host in [*site.web.names, site.web.static]}
    gaps.update(site.web.crawl_delay)
    timed = as_received(requests, default_crawl["received"])
    assert politeness_violations(timed, gaps, tolerance=0.01) == []
    forbidden = site.web.forbidden_requisites(site.port)
    assert not forbidden & {r.url for r in requests}
    static = [r for r in requests if r.hostname == site.web.static]
    assert static[0].path == "/robots.txt"
    lines = {e["url"]: e for e in default_crawl["log"]}
    assert lines[forbidden.pop()]["outcome"] == "robots"


def test_the_crawl_log_says_how_each_url_was_reached(
    default_crawl: dict[str, Any], site: WebProcess
) -> None:
    hops = {e["url"]: e.get("hop", "") for e in default_crawl["log"] if e["outcome"] == "ok"}
    home = site.seeds()[0]
    assert hops[home] == ""
    assert hops[home + "static/site.css"] == "E"
    assert hops[home + "static/theme.css"] == "EE"
    assert hops[home + "static/h1.png"] == "EEE"
    assert hops[site.url(site.web.static, FONT)] == "EEE"
    refused = {e["url"]: e["reason"] for e in default_crawl["log"] if e["outcome"] == "refused"}
    assert refused[home + "private/0.html"] == "max_depth"


def test_embeds_off_scope_obey_scope_embeds(site: WebProcess, tmp_path: Path) -> None:
    """Host scope: ``off`` leaves the static host alone, ``same_domain`` fetches it (the
    same registered domain), and a chain stops at max_embed_hops."""
    off = crawl(site, tmp_path / "off", mode="host", embeds="off")
    assert off["finished"]
    assert not [r for r in off["requests"] if r.hostname == site.web.static]
    reasons = {e["reason"] for e in off["log"]
               if e["outcome"] == "refused" and site.web.static in e["url"]}
    assert reasons == {"scope_host"}

    same = crawl(site, tmp_path / "same", mode="host", embeds="same_domain", max_embed_hops=2)
    assert same["finished"]
    got = {r.url for r in same["requests"] if r.status == 200}
    static = {site.url(site.web.static, path) for path in STATIC_PATHS}
    assert static - got == {site.url(site.web.static, FONT)}
    home = site.seeds()[0]
    assert home + "static/bg.png" in got and home + "static/h1.png" not in got


def test_a_crowded_page_keeps_its_stylesheets_one_srcset_candidate_and_its_imports(
    site: WebProcess, tmp_path: Path
) -> None:
    """Issue 27, break 4, at the server: the gallery's head has two stylesheets, its body
    one image with a 5,000-candidate srcset, 60 images and a script last. With a budget
    of 20 embeds, the crawl used to request the first 20 found (the image and 19 srcset
    candidates, no stylesheet). Now: both stylesheets and the script, of the srcset the
    1280w candidate (1x in a 1280-pixel window), the image's src and the first 15
    images; each stylesheet's imports within max_embed_hops (4: the chain stops after
    chain-3), the loop of imports each fetched once."""
    cfg = crawl_config(site, politeness={"min_delay": 0.02}, frontier={"max_depth": 0},
                       parse={"max_embeds_per_page": 20}, scope={"max_embed_hops": 4})
    before = len(site.requests)
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)
    try:
        worker.add([site.url(site.web.static, GALLERY)], time.time())
        assert worker.run_until_idle(timeout=40)
    finally:
        worker.close()
    requests = [r for r in site.requests[before:] if r.path != "/robots.txt"]
    assert duplicates(requests) == {}
    g = "/cdn/g/"
    kept = (["a.css", "loop-a.css", "app.js", "hero.png", "w/1280.png"]
            + [f"i/{k}.png" for k in range(15)])
    imports = ["chain-1.css", "bg.png", "chain-2.css", "chain-3.css", "loop-b.css"]
    assert sorted(r.path for r in requests) == sorted(
        [GALLERY] + [g + path for path in kept + imports])
    assert GALLERY_IMAGES > 15 and CHAIN > 3, "the page holds more than the budget"
