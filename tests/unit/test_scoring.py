"""The scoring hook: the example scorer reads quality off the power-law web, and a scorer
that raises, hangs or answers garbage is counted and ignored per page."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import pytest

from hive import config
from hive.errors import ConfigError
from hive.export.captures import _logged
from hive.export.parquet import COLUMNS, columns
from hive.fetch.crawllog import CrawlLog
from hive.fetch.scoring import MAX_HUNG, Page, Scorer, text_quality, visible_text
from hive.testweb.powerlaw import PowerWeb


def page(body: str | bytes, content_type: str = "text/html; charset=utf-8") -> Page:
    data = body.encode() if isinstance(body, str) else body
    return Page("http://a.test/", 200, [("Content-Type", content_type)], content_type, data)


def test_the_example_scorer_tells_the_labels_of_the_power_law_web_apart() -> None:
    web = PowerWeb(seed=2, hosts=10, pages=20)
    good, poor = [], []
    for index in range(200):
        host, _, path = web.url(index).partition("//")[2].partition("/")
        body = web.respond(host, "/" + path, 80).body
        (good if web.good(index) else poor).append(text_quality(page(body)) or 0.0)
    assert good and poor
    assert min(good) > 0.6 and max(poor) < 0.3, (min(good), max(poor))


def test_the_example_scorer_on_odd_pages() -> None:
    assert text_quality(page("")) is None
    assert text_quality(page("<a href=x>only a link</a>")) == 0.0
    long = "<p>" + "word " * 1000 + "</p><script>" + "x" * 9000 + "</script>"
    assert text_quality(page(long)) == 1.0, "a script's text is not the page's"
    latin = "<p>caf\xe9</p>".encode("latin-1")
    assert visible_text(page(latin, "text/html; charset=iso-8859-1")) == "caf\xe9"


def test_a_scorer_that_raises_or_answers_garbage_is_counted_and_ignored() -> None:
    def raises(_: Page) -> float:
        raise RuntimeError("model not loaded")

    scorer = Scorer(raises, timeout=1.0)
    assert scorer.score(page("<p>x</p>")) == (None, "error")
    for garbage in ("0.5", 1.5, -0.1, math.nan, True, [0.5]):
        scorer.func = lambda _, value=garbage: value
        assert scorer.score(page("<p>x</p>")) == (None, "bad_value"), garbage
    scorer.func = lambda _: None
    assert scorer.score(page("<p>x</p>")) == (None, "")
    scorer.func = lambda _: 1
    assert scorer.score(page("<p>x</p>")) == (1.0, "")
    assert scorer.stats() == {"priority/scorer/error": 1, "priority/scorer/bad_value": 6,
                              "priority/scorer/none": 1, "priority/scorer/scored": 1}
    scorer.close()


def test_a_hung_scorer_costs_its_page_the_time_limit_and_then_is_switched_off() -> None:
    release = threading.Event()

    def hangs(_: Page) -> float:
        release.wait(30)
        return 0.5

    scorer = Scorer(hangs, timeout=0.05)
    started = time.monotonic()
    results = [scorer.score(page("<p>x</p>")) for _ in range(MAX_HUNG + 2)]
    took = time.monotonic() - started
    assert results == [(None, "timeout")] * MAX_HUNG + [(None, "off")] * 2
    assert took < MAX_HUNG * 0.05 + 2.0, "each call waited its limit, no more"
    assert scorer.stats()["priority/scorer/off"] == 1
    scorer.func = lambda _: 0.5
    release.set()
    deadline = time.monotonic() + 10
    while scorer.hung and time.monotonic() < deadline:
        time.sleep(0.01)
    assert scorer.hung == 0, "the hung calls finished and their helpers ended"
    scorer.close()


def test_the_scorer_path_is_checked_before_a_crawl() -> None:
    base = config.load(environ={})
    with pytest.raises(ConfigError, match="priority.scorer"):
        base.replace(priority={"scorer": "no.such.module:score"})
    with pytest.raises(ConfigError, match="priority.scorer: expected"):
        base.replace(priority={"scorer": "hive.fetch.scoring"})
    with pytest.raises(ConfigError, match="priority.scorer_timeout"):
        base.replace(priority={"scorer_timeout": 0})
    cfg = base.replace(priority={"scorer": "hive.fetch.scoring:text_quality"})
    assert Scorer.from_config(cfg) is not None and Scorer.from_config(base) is None


def test_a_score_in_the_crawl_log_is_the_parquet_indexs_score_column(tmp_path: Path) -> None:
    """The crawl log's ``score`` reaches the export's row and its ``score`` column; a line
    without one (or with garbage) has none."""
    log = CrawlLog(tmp_path, "crawl-00", 1 << 20)
    log.write(1.0, "ok", "http://a.test/", status=200, score=0.8125, scorer="")
    log.write(2.0, "ok", "http://a.test/b", status=200, scorer="timeout")
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "crawl-00.jsonl").read_text().splitlines()]
    assert lines[0]["score"] == 0.8125 and "scorer" not in lines[0]
    assert "score" not in lines[1] and lines[1]["scorer"] == "timeout"
    rows = [_logged(line) for line in [*lines, {**lines[0], "score": "high"}]]
    assert [row.score for row in rows] == [0.8125, None, None]
    at = [name for name, _, _ in COLUMNS].index("score")
    assert columns(rows)[at] == [0.8125, None, None]
