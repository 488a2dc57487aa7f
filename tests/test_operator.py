"""What an operator sees of a running hive: the tail of a batch, a warm stop, the rate after
a resume, add and deny. The real CLI in subprocesses against small servers on loopback whose
answers (a 429 with Retry-After, a slow page) make each situation happen on cue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest

from hive import config
from hive.core.ring import Ring
from hive.outcome import Outcome
from hive.procs.children import CPU_WINDOW, Child
from hive.procs.endpoints import Endpoints
from hive.procs.stats import HiveStats, WorkerReport
from hive.procs.worker import DELAYED_HOSTS, Worker
from hive.procs.workerproc import ANSWER_TTL, ANSWERS, WorkerProcess
from tests.conftest import LAUNCHED, WEB_ADDRESS, wait_for

ROOT = Path(__file__).resolve().parents[1]
RETRY_AFTER = 40
HOLD = 120.0  # at most this long /slow is held for a release that does not come
TOTAL_TIMEOUT = 10.0


class Handler(BaseHTTPRequestHandler):
    """robots.txt: 404 (allow all); /busy: 429 with Retry-After; /slow: a page once the
    test releases it (``server.release``); any other path: a page linking to nothing."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        if self.path == "/robots.txt":
            self._answer(404, b"")
        elif self.path == "/busy":
            self._answer(429, b"slow down\n", ("Retry-After", str(RETRY_AFTER)))
        else:
            if self.path == "/slow":
                self.server.release.wait(HOLD)  # type: ignore[attr-defined]
            self._answer(200, b"<html><body>a page</body></html>")

    def _answer(self, status: int, body: bytes, *headers: tuple[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer((WEB_ADDRESS, 0), Handler)
    httpd.paths = []  # type: ignore[attr-defined]
    httpd.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.release.set()  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()


class Hive:
    """``hive`` commands for one data directory, crawling ``*.test`` on the server."""

    def __init__(self, tmp: Path, server: ThreadingHTTPServer,
                 total_timeout: float = TOTAL_TIMEOUT) -> None:
        self.tmp, self.data = tmp, tmp / "data"
        self.port = server.server_address[1]
        cfg = config.load(environ={}).replace(
            dns={"resolve": [f"*.test={WEB_ADDRESS}"], "allow_nets": [f"{WEB_ADDRESS}/32"]},
            # every host shares one address: the address limits stay on (every fetch goes
            # through its grant) but do not bind, as tests/conftest.crawl_config has them
            politeness={"min_delay": 0.05, "max_delay": 0.2, "ip_concurrency": 8,
                        "ip_min_delay": 0.0},
            fetch={"threads": 2, "total_timeout": total_timeout},
        )
        lines = []
        for section, values in cfg.to_dict().items():
            lines.append(f"[{section}]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        self.config = tmp / "hive.toml"
        self.config.write_text("\n".join(lines) + "\n")
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.runs = 0

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}.test:{self.port}{path}"

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cli", "--config", str(self.config), *args]

    def start(self, procs: int, *urls: str) -> subprocess.Popen[str]:
        """``hive start`` in the background with the progress line on; output in a file."""
        self.runs += 1
        seeds = self.tmp / f"seeds-{self.runs}.txt"
        seeds.write_text("".join(f"{url}\n" for url in urls))
        self.out = self.tmp / f"start-{self.runs}.out"
        with self.out.open("w") as out:
            process = subprocess.Popen(
                self.command("start", "--procs", str(procs), "--data", str(self.data),
                             "--seeds", str(seeds)),
                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )
        LAUNCHED.append(process)
        return process

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args, "--data", str(self.data)), env=self.env,
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    def status(self) -> dict[str, Any] | None:
        result = self.run("status", "--json")
        return json.loads(result.stdout) if result.returncode == 0 else None

    def stop(self, process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
        result = self.run("stop")
        assert result.returncode == 0, result.stderr
        process.wait(timeout=60)
        return result


@pytest.mark.slow
def test_the_tail_of_a_batch_says_what_waits_and_until_when(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    hive = Hive(tmp_path, server)
    process = hive.start(2, hive.url("busy", "/busy"))
    asked = time.time()
    status = wait_for(lambda: (s := hive.status()) and s["waiting"] and s, timeout=30)
    waiting = status["waiting"]
    assert waiting["why"] == "retry_after" and waiting["status"] == 429
    assert waiting["host"] == f"busy.test:{hive.port}" and waiting["hosts"] == 1
    assert asked + RETRY_AFTER - 15 < waiting["until"] <= time.time() + RETRY_AFTER
    text = " ".join(hive.run("status").stdout.split())  # the notes wrap at the width
    assert f"waiting: 1 host, next busy.test:{hive.port} at " in text
    assert "the server's Retry-After (HTTP 429)" in text
    wait_for(lambda: "the server's Retry-After (HTTP 429)" in hive.out.read_text(), timeout=10)
    hive.stop(process)


@pytest.mark.slow
def test_stop_says_what_it_waits_for(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    """The server holds /slow until ``stop`` has said it waits for that fetch, then answers:
    no timing decides whether the fetch is still in flight when ``stop`` looks."""
    hive = Hive(tmp_path, server, total_timeout=HOLD)
    process = hive.start(2, hive.url("slow", "/slow"))
    wait_for(lambda: "/slow" in server.paths, timeout=30)  # type: ignore[attr-defined]
    wait_for(lambda: (s := hive.status()) and s["totals"]["worker/in_flight"] == 1, timeout=30)
    said = tmp_path / "stop.err"
    with said.open("w") as err:
        stop = subprocess.Popen(hive.command("stop", "--data", str(hive.data)), env=hive.env,
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        wait_for(lambda: "fetch in flight" in said.read_text(), timeout=60)
        server.release.set()  # type: ignore[attr-defined]
        out, _ = stop.communicate(timeout=60)
    finally:
        stop.kill()
    assert stop.returncode == 0, said.read_text()
    process.wait(timeout=60)
    assert "stopping: waiting for 1 fetch in flight to finish (worker " in said.read_text()
    assert f"each ends within {HOLD:g}s" in said.read_text()
    assert out.strip() == f"hive on {hive.data} stopped"


@pytest.mark.slow
def test_the_rate_after_a_resume_counts_only_this_starts_pages(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    hive = Hive(tmp_path, server)
    first = hive.start(2, *(hive.url(f"h{i}", "/page") for i in range(12)))
    first.wait(timeout=60)
    assert first.returncode == 0, hive.out.read_text()
    process = hive.start(2, hive.url("slow", "/slow"))
    # Every worker has reported and the hive has sampled for a second or more (cpu% and
    # the rate take a sample a second).
    status = wait_for(lambda: (s := hive.status()) and all(
        row.get("stats") and row["cpu"] is not None
        for row in s["processes"] if row["role"] != "splitter") and s, timeout=30)
    totals = status["totals"]
    assert totals["frontier/done/ok"] == 12
    assert totals["pages_per_s"] == 0.0, totals
    assert totals["pages_this_start"] == 0
    assert "pages this start" in hive.run("status").stdout
    server.release.set()  # type: ignore[attr-defined]  # /slow answers: the stop is prompt
    hive.stop(process)


def test_cpu_is_measured_over_a_fixed_window_whoever_asks() -> None:
    """cpu% comes from the supervisor's own samples: asking twice gives the same figure
    (it used to be CPU since whichever client asked last, so 0.0 the second time)."""
    child = Child("worker 0", "worker-00.log", start=lambda: None)  # type: ignore[arg-type,return-value]
    child.ps = psutil.Process()
    assert child.cpu_percent() is None
    child.sample_cpu(0.0)
    spent = time.process_time() + 0.2
    while time.process_time() < spent:
        pass
    child.sample_cpu(1.0)
    first = child.cpu_percent()
    assert first is not None and 15 <= first <= 100
    assert child.cpu_percent() == first
    for second in range(2, 100):
        child.sample_cpu(float(second))
    assert len(child.cpu) <= CPU_WINDOW + 2
    assert 99.0 - child.cpu[0][0] <= CPU_WINDOW + 1
    assert child.cpu_percent() is not None and child.cpu_percent() < first


@pytest.mark.slow
def test_add_says_what_was_added_seen_and_refused(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    hive = Hive(tmp_path, server)
    busy = hive.url("busy", "/busy")
    process = hive.start(2, busy)
    wait_for(lambda: "/busy" in server.paths, timeout=30)  # type: ignore[attr-defined]
    result = hive.run("add", hive.url("h1", "/page"), busy, "ftp://files.test/a", "http://")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "added 1, already seen 1, refused 2"
    assert "add: refused scheme: ftp: 'ftp://files.test/a'" in result.stderr
    assert result.stderr.count("add: refused ") == 2
    result = hive.run("add", busy, hive.url("h1", "/page"))
    assert result.returncode == 1
    assert result.stdout.strip() == "added 0, already seen 2, refused 0"
    result = hive.run("add", "ftp://files.test/b")
    assert result.returncode == 1 and result.stdout.strip() == "added 0, already seen 0, refused 1"
    hive.stop(process)
    # The refusals are told to whoever added the URLs, not written over the hive's live line.
    assert "ftp://files.test" not in hive.out.read_text()


@pytest.mark.slow
def test_deny_warns_of_a_host_not_in_the_crawl(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    hive = Hive(tmp_path, server)
    process = hive.start(2, hive.url("busy", "/busy"))
    wait_for(lambda: "/busy" in server.paths, timeout=30)  # type: ignore[attr-defined]
    result = hive.run("deny", "busy.test")
    assert result.returncode == 0 and result.stdout.strip() == "denied: busy.test"
    assert "deny: warning: busy.test is not in the crawl: no worker has seen it" in result.stderr
    result = hive.run("deny", f"busy.test:{hive.port}")
    assert result.returncode == 0 and result.stdout.strip() == f"denied: busy.test:{hive.port}"
    assert result.stderr == ""
    result = hive.run("deny", "not a host")
    assert result.returncode == 1 and result.stderr.count("deny:") == 1, result.stderr
    hive.stop(process)


@pytest.mark.slow
def test_verify_passes_a_crawl_in_which_workers_own_no_host(
    tmp_path: Path, server: ThreadingHTTPServer
) -> None:
    hive = Hive(tmp_path, server)
    process = hive.start(3, hive.url("only", "/page"))
    process.wait(timeout=60)
    assert process.returncode == 0, hive.out.read_text()
    result = hive.run("verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(": ok (urls 0,") >= 1 and result.stdout.count(": ok") == 3


# -- the figures behind them, on the real classes ---------------------------------------


def reported(stats: HiveStats, worker: int, number: int, **values: Any) -> None:
    """A worker's stats report as the supervisor's inbox takes it."""
    stats.take(WorkerReport(worker, number, False, 0.0, 0.0, values))


def test_pages_this_start_ignore_a_resumes_pages_and_a_restarted_worker() -> None:
    stats = HiveStats(range(2), {0: 500, 1: 300})  # on disk at open
    reported(stats, 0, 1, **{"frontier/done/ok": 500})
    reported(stats, 1, 1, **{"frontier/done/ok": 310})
    assert stats.pages_this_start == 10
    reported(stats, 1, 2, **{"frontier/done/ok": 305})  # restarted: lost 5 uncommitted
    reported(stats, 1, 3, **{"frontier/done/ok": 312})
    assert stats.pages_this_start == 12


def test_waiting_only_when_all_that_is_left_waits() -> None:
    stats = HiveStats(range(2))
    left = {"frontier/pending": 3, "frontier/hosts/parked": 1}
    a = {**left, "frontier/wait/until": 900.0, "frontier/wait/why/backoff": 1,
         "frontier/wait/host/a.test:8080": 1, "frontier/wait/status": 503}
    b = {**left, "frontier/wait/until": 800.0, "frontier/wait/why/robots_retry": 1,
         "frontier/wait/host/b.test": 1}
    reported(stats, 0, 1, **a)
    assert stats.waiting() is None, "worker 1 has not reported yet"
    reported(stats, 1, 1, **b)
    assert stats.waiting() == {"until": 800.0, "why": "robots_retry", "host": "b.test",
                               "status": None, "worker": 1, "hosts": 2}
    reported(stats, 1, 2, **a)
    assert stats.waiting() == {"until": 900.0, "why": "backoff", "host": "a.test:8080",
                               "status": 503, "worker": 0, "hosts": 2}
    reported(stats, 0, 2, **{**a, "worker/in_flight": 1})
    assert stats.waiting() is None
    reported(stats, 0, 3, **{**a, "frontier/hosts/ready": 1})
    assert stats.waiting() is None


def test_a_workers_memory_of_delayed_hosts_is_bounded(tmp_path: Path) -> None:
    worker = Worker(config.load(environ={}).replace(fetch={"threads": 1}), tmp_path / "store",
                    warc_dir=tmp_path / "warc", log_dir=tmp_path)
    try:
        for i in range(DELAYED_HOSTS + 50):
            worker._remember_delay(f"h{i}.test", Outcome("http_503", 503))
        assert len(worker.delayed) == DELAYED_HOSTS
        assert worker.delayed[f"h{DELAYED_HOSTS + 49}.test"] == ("backoff", 503)
        worker._remember_delay("h0.test", Outcome("robots_retry", 500, retry_after=5.0))
        worker._remember_delay("h1.test", Outcome("http_429", 429, retry_after=5.0))
        worker._remember_delay(f"h{DELAYED_HOSTS + 49}.test", Outcome("ok", 200))
        assert worker.delayed["h0.test"] == ("robots_retry", 500)
        assert worker.delayed["h1.test"] == ("retry_after", 429)
        assert f"h{DELAYED_HOSTS + 49}.test" not in worker.delayed
        assert len(worker.delayed) <= DELAYED_HOSTS
    finally:
        worker.close()


def test_a_workers_answers_are_bounded_and_the_first_stands(tmp_path: Path) -> None:
    role = WorkerProcess(config.load(environ={}), tmp_path, 0, Endpoints(tmp_path), Ring(1))
    role._answer("add/1/new", 5, 0.0)
    role._answer("add/1/new", 0, 1.0)  # the batch resent: its URLs are seen now
    assert role.answers["add/1/new"] == (5, 0.0)
    for i in range(ANSWERS + 10):
        role._answer(f"deny/{i}", 1, 10.0)
    assert len(role.answers) == ANSWERS and "add/1/new" not in role.answers
    role._answer("deny/x", 1, 10.0 + ANSWER_TTL)
    role._expire_answers(10.0 + ANSWER_TTL + 0.5)
    assert list(role.answers) == ["deny/x"]
