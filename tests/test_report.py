"""`hive report`: a crawl of the test web gives a page with every section drawn, which a
headless Chromium opens without a console message; odd logs still give a page that says
what it skipped."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from hive.procs.lifecycle import ExitCode
from hive.storage.datadir import DataDir
from hive.storage.store import Store
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, wait_for
from tests.test_hive import Hive, finish

SECTIONS = ("summary", "rates", "outcomes", "mime", "hosts", "refusals", "depth", "waits",
            "slowest", "skipped")
# Sections drawn from data: each has a plot once the crawl has done anything.
PLOTTED = ("rates", "outcomes", "hosts", "refusals", "depth", "waits", "slowest")
LINE = ('{"t": 1.5, "outcome": "ok", "status": 200, "bytes": 9, "dl": 0.1, '
        '"url": "http://a.test/", "via": "", "depth": 0}\n')


def sections(page: str) -> dict[str, str]:
    found = dict(re.findall(r'<section id="([a-z]+)">(.*?)</section>', page, re.S))
    assert tuple(found) == SECTIONS
    return found


def report(data: Path) -> tuple[str, str]:
    result = CliRunner().invoke(main, ["report", "--data", str(data)])
    assert result.exit_code == 0, result.output
    return result.output, DataDir(data).report_page.read_text()


def assert_self_contained(page: str) -> None:
    """Nothing the page would load: no script, no external reference of any kind."""
    assert "<script" not in page.lower()
    assert re.findall(r'(?:src|href)="(?!#)', page) == []
    assert re.findall(r"url\((?!#)", page) == []
    assert "@import" not in page


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A crawl of the test web (hostile hosts included) stopped with URLs still pending."""
    tmp = tmp_path_factory.mktemp("crawl")
    with WebProcess(Web(seed=3, hosts=24, pages=12), tmp / "requests.jsonl",
                    host=WEB_ADDRESS) as web:
        hive = Hive(tmp, web)
        finish(hive.start(2, "--max-pages", "150"), code=ExitCode.MAX_PAGES)
    return hive.data


@pytest.mark.slow
def test_a_crawls_report_has_every_section_with_data(crawled: Path) -> None:
    output, page = report(crawled)
    assert "report.html" in output and "skipped" not in output
    assert_self_contained(page)
    found = sections(page)
    for name in PLOTTED:
        assert "<svg" in found[name] and 'class="empty"' not in found[name], name
    hosts = found["hosts"]
    assert hosts.count("<svg") == 3, "pages, pending URLs and errors by host"
    assert "scope_domain" in found["refusals"] and "robots.txt disallows" in found["refusals"]
    assert "No line was skipped" in found["skipped"]


@pytest.mark.slow
def test_a_crawls_report_shows_its_mime_types(crawled: Path) -> None:
    found = sections(report(crawled)[1])
    assert "<svg" in found["mime"] and "text/html" in found["mime"]


@pytest.mark.slow
def test_a_running_crawl_gets_a_report_from_its_live_logs_and_stores(tmp_path: Path) -> None:
    # 300 pages a host, 0.3 s apart: the crawl runs for 90 s unless stopped.
    with WebProcess(Web(seed=4, hosts=6, pages=300, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as web:
        hive = Hive(tmp_path, web, politeness={"min_delay": 0.3, "max_delay": 0.5},
                    frontier={"max_urls_per_host": 400})
        process = hive.start(2)
        logs = hive.data / "logs"
        wait_for(lambda: sum(p.stat().st_size for p in logs.glob("crawl-*.jsonl")) > 4000,
                 timeout=60)
        assert hive.status() is not None, "the crawl should still be running"
        output, page = report(hive.data)
        hive.run("stop")
        finish(process, code=ExitCode.STOPPED)
    found = sections(page)
    assert "<svg" in found["rates"] and "<svg" in found["hosts"]
    assert re.search(r"[1-9][\d,]* URLs queued in hosts", found["hosts"]), found["hosts"]
    assert 'class="note"' not in found["hosts"], "the live stores should read"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs the Debian package)")
        pytest.skip("chromium is not installed")
    return found


def console_messages(browser: str, page: Path, tmp: Path) -> tuple[list[str], Path]:
    """The console messages Chromium logs while it loads ``page``, and its screenshot."""
    shot = tmp / f"{page.stem}.png"
    result = subprocess.run(
        [browser, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={tmp / 'profile'}", "--window-size=1200,3000",
         f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return [line for line in result.stderr.splitlines() if ":CONSOLE" in line], shot


@pytest.mark.slow
def test_chromium_opens_the_report_without_a_console_message(
    crawled: Path, tmp_path: Path
) -> None:
    browser = chromium()
    report(crawled)
    # The check is seen to work: a page that does log is caught.
    noisy = tmp_path / "noisy.html"
    noisy.write_text("<!DOCTYPE html><script>console.error('noisy')</script>")
    caught, _ = console_messages(browser, noisy, tmp_path)
    assert any("noisy" in line for line in caught), caught
    messages, shot = console_messages(browser, crawled / "report.html", tmp_path)
    assert messages == []
    assert shot.stat().st_size > 10_000, "the screenshot should show the page"


def test_odd_logs_still_give_a_report_that_says_what_it_skipped(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "crawl-00.jsonl").write_text(LINE + "{not json\n" + LINE[:40])
    (logs / "crawl-01.jsonl").write_text("")
    output, page = report(tmp_path)
    assert "1 lines from 2 crawl log file(s), 2 skipped" in output
    assert_self_contained(page)
    skipped = sections(page)["skipped"]
    assert "not JSON" in skipped and "unfinished last line" in skipped
    assert "crawl-00.jsonl:2" in skipped and "crawl-00.jsonl:3" in skipped


def test_an_empty_log_gives_a_report_that_says_so(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "crawl-00.jsonl").write_text("")
    output, page = report(tmp_path)
    assert "0 lines from 1 crawl log file(s)" in output
    found = sections(page)
    assert "no usable line yet" in found["summary"]
    for name in PLOTTED:
        assert 'class="empty"' in found[name], name


def test_hostile_strings_in_a_log_are_shown_not_obeyed(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    hostile = LINE.replace('"ok"', '"<script>alert(1)</script>$x^2$"')
    (tmp_path / "logs" / "crawl-00.jsonl").write_text(hostile)
    page = report(tmp_path)[1]
    assert_self_contained(page)
    shown = "&lt;script&gt;alert(1)&lt;/script&gt;$x^2$"
    assert f"<td>{shown}</td>" in page
    assert re.search(f">{re.escape(shown)}</text>", page), "the plot's label is text, not math"


def test_an_unreadable_store_is_named_and_the_report_still_made(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "crawl-00.jsonl").write_text(LINE)
    (tmp_path / "worker-00").mkdir()
    (tmp_path / "worker-00" / "data.mdb").write_bytes(b"\0" * 8192)
    hosts = sections(report(tmp_path)[1])["hosts"]
    assert 'class="note">worker-00:' in hosts


def test_the_stores_a_resize_retired_are_not_read(tmp_path: Path) -> None:
    """Only worker stores are: a retired one (what it held moved to its owners) is neither
    counted nor, when it does not read, named as a problem."""
    dd = DataDir(tmp_path)
    dd.logs.mkdir()
    dd.crawl_log(0).write_text(LINE)
    for store in (dd.worker(0), tmp_path / "worker-01.retired-20240101T000000Z"):
        Store(store, sync_interval=0.0).close(0.0)
    damaged = tmp_path / "worker-00.retired-20240101T000000Z"
    damaged.mkdir()
    DataDir.store_data(damaged).write_bytes(b"\0" * 8192)
    hosts = sections(report(tmp_path)[1])["hosts"]
    assert "in 1 store(s)." in hosts
    assert 'class="note"' not in hosts


def test_a_directory_without_crawl_logs_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", "--data", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert "has no crawl logs" in result.output and "Traceback" not in result.output
