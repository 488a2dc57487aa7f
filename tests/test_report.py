"""`hive report`: a crawl of the test web gives a page with every section drawn, which a
headless Chromium opens without a console message and on which it draws every plot (judged
on its screenshot); odd logs still give a page that says what it skipped."""

from __future__ import annotations

import html
import json
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

SECTIONS = ("summary", "rates", "outcomes", "mime", "hosts", "domains", "addresses", "refusals",
            "depth", "waits", "slowest", "skipped")
# Sections drawn from data: each has a plot once the crawl has done anything.
PLOTTED = ("rates", "outcomes", "hosts", "domains", "addresses", "refusals", "depth", "waits",
           "slowest")
# The plots of each section in the report of the crawl below (the rest have none).
PLOTS = {"rates": 1, "outcomes": 2, "mime": 1, "hosts": 3, "domains": 1, "addresses": 1,
         "refusals": 1, "depth": 1, "waits": 1, "slowest": 1}
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
    assert f"<td>{WEB_ADDRESS}</td>" in found["addresses"], "every host of the web at one address"
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


def run_chromium(browser: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with ``args`` at one layout: 1200 px wide, no scrollbars (which
    would narrow the page as it grows taller), one pixel a CSS pixel."""
    result = subprocess.run(
        [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--enable-logging=stderr", "--v=0",
         f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def console_messages(browser: str, page: Path, tmp: Path) -> list[str]:
    """The console messages Chromium logs while it loads ``page``."""
    result = run_chromium(browser, tmp, "--window-size=1200,3000", "--dump-dom", page.as_uri())
    return [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


# Run in a copy of the page (the report itself has no script): where each section's plots
# (its outermost <svg> elements) are laid out, in page pixels, and how tall the page is.
PROBE = """<script>
const boxes = Object.fromEntries([...document.querySelectorAll("section")].map(section =>
  [section.id, [...section.querySelectorAll("svg")]
    .filter(svg => !svg.parentElement.closest("svg"))
    .map(svg => svg.getBoundingClientRect())
    .map(r => [r.left + scrollX, r.top + scrollY, r.width, r.height])]));
const out = document.createElement("pre");
out.id = "probe";
out.textContent = JSON.stringify({height: document.documentElement.scrollHeight, boxes});
document.body.append(out);
</script>"""
# A plot's data is drawn in colour (bars #4a7ab0 and #b05a4a, matplotlib's blue and orange
# lines), its axes and text in grey: a pixel is ink when its channels differ this much.
INK_SPREAD = 60
# Colour pixels a plot must show: the thinnest drawn in a crawl's report (the rates' line
# over a few steps) shows thousands; a plot left empty, hidden or drawn blank shows none.
MIN_INK = 300


def drawn_plots(browser: str, page: Path, tmp: Path) -> dict[str, list[int]]:
    """Section id -> the colour pixels Chromium shows inside each of its plots that has a
    box of its own (an <svg> hidden, collapsed or left out has none), read from a
    screenshot of the whole page, as tall as it is laid out."""
    from PIL import Image, ImageChops

    probe = tmp / f"{page.stem}-probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = run_chromium(browser, tmp, "--window-size=1200,3000", "--dump-dom",
                       probe.as_uri()).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found is not None, "the probe script did not run"
    layout = json.loads(html.unescape(found.group(1)))
    shot = tmp / f"{page.stem}.png"
    run_chromium(browser, tmp, f"--window-size=1200,{layout['height']}",
                 f"--screenshot={shot}", page.as_uri())
    with Image.open(shot) as image:
        r, g, b = image.convert("RGB").split()
    spread = ImageChops.subtract(ImageChops.lighter(ImageChops.lighter(r, g), b),
                                 ImageChops.darker(ImageChops.darker(r, g), b))
    ink = spread.point(lambda v: 255 if v >= INK_SPREAD else 0)
    drawn: dict[str, list[int]] = {}
    for section, boxes in layout["boxes"].items():
        drawn[section] = [
            ink.crop((round(x), round(y), round(x + w), round(y + h))).histogram()[255]
            for x, y, w, h in boxes if w >= 1 and h >= 1
        ]
    return drawn


@pytest.mark.slow
def test_chromium_opens_the_report_without_a_console_message(
    crawled: Path, tmp_path: Path
) -> None:
    browser = chromium()
    report(crawled)
    # The check is seen to work: a page that does log is caught.
    noisy = tmp_path / "noisy.html"
    noisy.write_text("<!DOCTYPE html><script>console.error('noisy')</script>")
    caught = console_messages(browser, noisy, tmp_path)
    assert any("noisy" in line for line in caught), caught
    assert console_messages(browser, crawled / "report.html", tmp_path) == []


@pytest.mark.slow
def test_chromium_draws_every_plot_of_the_report(crawled: Path, tmp_path: Path) -> None:
    """Each plot is laid out with a box of its own and shows its data in colour, judged on
    what Chromium draws, not on the HTML; and a report whose plots are removed, or kept
    in the page but drawn blank, is seen to fail the same check."""
    browser = chromium()
    page = report(crawled)[1]
    drawn = drawn_plots(browser, crawled / "report.html", tmp_path)
    assert {name: len(inks) for name, inks in drawn.items() if inks} == PLOTS, drawn
    assert all(ink >= MIN_INK for inks in drawn.values() for ink in inks), drawn
    removed = tmp_path / "removed.html"
    removed.write_text(re.sub(r"<svg.*?</svg>", "", page, flags=re.S))
    assert not any(drawn_plots(browser, removed, tmp_path).values())
    blank = tmp_path / "blank.html"
    blank.write_text(page.replace("</style>", "svg *{visibility:hidden}</style>", 1))
    drawn = drawn_plots(browser, blank, tmp_path)
    assert {name: len(inks) for name, inks in drawn.items() if inks} == PLOTS, drawn
    assert all(ink == 0 for inks in drawn.values() for ink in inks), drawn


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


def test_a_clusters_report_reads_every_machines_logs_with_a_row_each(tmp_path: Path) -> None:
    """A cluster driver's directory: one report over every machine's crawl logs and stores,
    and a row per machine; a machine with no logs there (not copied) is named."""
    dd = DataDir(tmp_path)
    machines = [{"name": name} for name in ("a", "b", "c")]
    dd.write_state({"cluster": {"plan": {"machines": machines}, "dropped": ["b"]},
                    "config": {"cluster": {"node_data": "{data}/nodes/{node}"}}})
    for name, worker, lines in (("a", 0, 2), ("b", 1, 1)):
        machine = DataDir(tmp_path / "nodes" / name)
        machine.logs.mkdir(parents=True)
        machine.crawl_log(worker).write_text(LINE * lines)
        Store(machine.worker(worker), sync_interval=0.0).close(0.0)
    output, page = report(tmp_path)
    assert "3 lines from 2 crawl log file(s)" in output
    found = dict(re.findall(r'<section id="([a-z]+)">(.*?)</section>', page, re.S))
    assert tuple(found) == (SECTIONS[0], "machines", *SECTIONS[1:])
    rows = re.findall(r"<tr><td>([abc])</td><td>(\w*)</td>((?:<td class=\"n\">[\d,]+</td>)+)",
                      found["machines"])
    assert [(name, state, re.findall(r">([\d,]+)<", cells)[:4]) for name, state, cells in rows] \
        == [("a", "", ["1", "2", "2", "2"]), ("b", "dropped", ["1", "1", "1", "1"])]
    assert "No crawl logs for c (" in html.unescape(found["machines"])
    assert "in 2 store(s)." in found["hosts"]
    shutil.rmtree(tmp_path / "nodes")
    result = CliRunner().invoke(main, ["report", "--data", str(tmp_path)])
    assert result.exit_code == 1 and "none of its machines' directories" in result.output
