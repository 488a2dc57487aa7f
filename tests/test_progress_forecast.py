"""The live progress line of ``hive start`` carries the drain forecast (hive/procs/hoststatus.py).

A real crawl whose tail is one slow host (a robots.txt Crawl-delay): off a terminal
the progress goes to stderr one line per interval, and once the workers have looked
at their hosts a line says how long the batch has left at least and which host
bounds it (the slow one, at the worker the ring gives it).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive.core.ring import Ring
from hive.procs.lifecycle import ExitCode
from hive.testweb import Web, WebProcess
from tests.conftest import LAUNCHED, WEB_ADDRESS, crawl_config, wait_for
from tests.test_hive import ROOT, Hive, finish

pytestmark = pytest.mark.slow
PROCS = 2
CRAWL_DELAY = 4.0
PAGES = 8
FORECAST = re.compile(r"pending\s+(\d+)\s.*drain ≥ (\S+) \(slowest: (\S+), worker (\d+)\)$")
DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=5, hosts=6, pages=PAGES, hostile=False,
                        robots_crawl_delay=CRAWL_DELAY),
                    tmp_path / "requests.jsonl", host=WEB_ADDRESS) as server:
        yield server


def test_the_progress_line_shows_the_drain_forecast(tmp_path: Path, web: WebProcess) -> None:
    [slow] = [f"{name}:{web.port}" for name in web.web.crawl_delay]
    hive = Hive(tmp_path, web, politeness={"crawl_delay_cap": 2 * CRAWL_DELAY})
    err = tmp_path / "start.err"
    with err.open("w") as stderr, (tmp_path / "start.out").open("w") as stdout:
        process = subprocess.Popen(
            hive.command("start", "--procs", str(PROCS), "--data", str(hive.data),
                         "--seeds", str(hive.seeds)),
            env=hive.env, cwd=ROOT, stdout=stdout, stderr=stderr, text=True,
            start_new_session=True,
        )
    LAUNCHED.append(process)
    process.output = err  # type: ignore[attr-defined]

    def forecasts() -> list[re.Match[str]]:
        lines = err.read_text(encoding="utf-8").splitlines()
        return [m for line in lines if (m := FORECAST.search(line))]

    def forecast() -> re.Match[str] | None:
        return next((m for m in forecasts() if m[3] == slow), None)

    # Lines come every 10 s off a terminal (cli.PROGRESS_LOG): the second or third has the
    # forecast naming the slow host, while it still has most of its pages to go. Not
    # necessarily the first: the test web links a host's pages in a chain, so while the
    # slow host's one pending page is being fetched it has none queued, no drain, and the
    # line names the host with the most left of the others.
    found = wait_for(forecast, timeout=35, interval=0.2)
    assert process.poll() is None, "the slow host should hold the batch for a while yet"
    assert hive.run("stop").returncode == 0
    finish(process, timeout=30, code=ExitCode.STOPPED)
    text = err.read_text(encoding="utf-8")
    assert "\r" not in text, "off a terminal, a line per interval, none redrawn"
    assert found.string in text.splitlines(), "the forecast is on a progress line of its own"
    pending, duration, host, worker = found.groups()
    assert host == slow
    ring = crawl_config(web).hive
    assert int(worker) == Ring(PROCS, ring.vnodes, ring.ring_seed).owner(slow)
    # The slow host goes no faster than one page per Crawl-delay: the forecast is at least
    # one delay, and no more than its pages could ever take.
    assert int(pending) >= 1
    assert CRAWL_DELAY <= seconds_of(duration) <= (PAGES + 1) * (CRAWL_DELAY + 1), duration
    # No line forecasts more than the slow host's pages could ever take.
    assert all(seconds_of(m[2]) <= (PAGES + 1) * (CRAWL_DELAY + 1) for m in forecasts())


def seconds_of(duration: str) -> int:
    """``45s``, ``9m58s``, ``2h03m`` (hive/procs/statustext.py) in seconds."""
    match = DURATION.fullmatch(duration)
    assert match is not None and duration, duration
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds
