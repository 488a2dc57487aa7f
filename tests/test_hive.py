"""The hive end to end: the real CLI in subprocesses, the synthetic web in its own process.

Every invariant is measured at the server: politeness across all processes,
every in-scope page fetched once (retries of timeouts aside), nothing lost
across kill -9 of any process and restart.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from hive.config import Config
from hive.procs.lifecycle import ExitCode
from hive.storage.store import Store
from hive.testweb import Web, WebProcess, as_received, duplicates, politeness_violations, received
from tests.conftest import LAUNCHED, WEB_ADDRESS, crawl_config, wait_for

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
DELAY = 0.1
# How late a threaded Python server on two busy cores may stamp the end of a response.
STAMP_SKEW = 0.02


def write_config(cfg: Config, path: Path) -> Path:
    lines = []
    for section, values in cfg.to_dict().items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


class Hive:
    """Drives ``hive`` commands for one data directory."""

    def __init__(self, tmp: Path, server: WebProcess, **sections: dict[str, Any]) -> None:
        self.tmp = tmp
        self.data = tmp / "data"
        sections.setdefault("politeness", {}).setdefault("min_delay", DELAY)
        cfg = crawl_config(server, **sections)
        self.config = write_config(cfg, tmp / "hive.toml")
        self.seeds = tmp / "seeds.txt"
        self.seeds.write_text("\n".join(server.seeds()) + "\n")
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.runs = 0

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cli", "--config", str(self.config), *args]

    def start(self, procs: int, *extra: str) -> subprocess.Popen[str]:
        """``hive start`` in the background; its output goes to a file (a pipe could fill)."""
        self.runs += 1
        out = (self.tmp / f"start-{self.runs}.out").open("w")
        process = subprocess.Popen(
            self.command("start", "--procs", str(procs), "--data", str(self.data),
                         "--seeds", str(self.seeds), "--quiet", *extra),
            env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        LAUNCHED.append(process)
        out.close()
        process.output = Path(out.name)  # type: ignore[attr-defined]
        return process

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args, "--data", str(self.data)), env=self.env,
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    def state(self) -> dict[str, Any]:
        path = self.data / "hive.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def pid(self, role: str) -> int | None:
        pid = self.state().get("pids", {}).get(role)
        return pid if isinstance(pid, int) else None

    def status(self) -> dict[str, Any] | None:
        result = self.run("status", "--json")
        return json.loads(result.stdout) if result.returncode == 0 else None


def output(process: subprocess.Popen[str]) -> str:
    path: Path = process.output  # type: ignore[attr-defined]
    return path.read_text()


def finish(process: subprocess.Popen[str], timeout: float = 120,
           code: ExitCode | tuple[ExitCode, ...] = ExitCode.ENDED) -> str:
    """Wait for a ``hive start`` to exit with ``code``, or one of ``codes`` (the batch ended
    unless told)."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(
            f"hive did not finish in {timeout}s:\n{output(process)[-3000:]}"
        ) from None
    codes = code if isinstance(code, tuple) else (code,)
    assert process.returncode in codes, output(process)[-3000:]
    return output(process)


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=5, hosts=30, pages=8, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as server:
        yield server


def check_crawl(web: WebProcess, *, data: Path, allowed_repeats: int = 0) -> None:
    """The crawl of ``web`` into ``data`` was polite, complete and fetched nothing twice
    (beyond ``allowed_repeats``). A response ends when the hive had it, by its crawl log,
    if the busy server stamped it later."""
    requests = web.requests
    gaps = dict.fromkeys(web.web.names, DELAY)
    gaps.update(web.web.crawl_delay)
    timed = as_received(requests, received(data / "logs"))
    assert politeness_violations(timed, gaps, tolerance=STAMP_SKEW) == []
    fetched = {r.url for r in requests if r.method == "GET"}
    missing = web.in_scope_urls() - fetched
    assert not missing, sorted(missing)[:5]
    assert not fetched & web.web.disallowed_urls(web.port)
    repeated = duplicates(requests)
    assert sum(n - 1 for n in repeated.values()) <= allowed_repeats, repeated


def test_four_workers_crawl_to_the_end(tmp_path: Path, web: WebProcess) -> None:
    hive = Hive(tmp_path, web)
    process = hive.start(4)
    status = wait_for(hive.status, timeout=30)
    roles = {row["role"] for row in status["processes"]}
    assert roles == {"splitter", "worker 0", "worker 1", "worker 2", "worker 3"}
    assert all(row["alive"] and row["pid"] for row in status["processes"])
    second = hive.start(4)
    assert second.wait(timeout=60) != 0 and "in use" in output(second)
    finish(process)
    check_crawl(web, data=hive.data)
    assert hive.status() is None
    result = hive.run("status")
    assert result.returncode == 1 and "no hive is running" in result.stderr
    result = hive.run("verify")
    assert result.returncode == 0 and result.stdout.count(": ok") == 4, result.stdout
    warcs = list((hive.data / "warc").glob("*.warc.gz"))
    assert warcs


def test_kill_a_worker_and_the_splitter(tmp_path: Path, web: WebProcess) -> None:
    hive = Hive(tmp_path, web)
    process = hive.start(3)
    wait_for(lambda: len(web.requests) > 40, timeout=30)
    victim = hive.pid("worker 1")
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: hive.pid("worker 1") not in (None, victim), timeout=30)
    splitter = hive.pid("splitter")
    assert splitter is not None
    os.kill(splitter, signal.SIGKILL)
    wait_for(lambda: hive.pid("splitter") not in (None, splitter), timeout=30)
    finish(process)
    check_crawl(web, allowed_repeats=2 * 8, data=hive.data)


def test_kill_the_supervisor_then_resume(tmp_path: Path, web: WebProcess) -> None:
    hive = Hive(tmp_path, web)
    process = hive.start(2)
    wait_for(lambda: len(web.requests) > 40, timeout=30)
    children = [hive.pid(role) for role in ("splitter", "worker 0", "worker 1")]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    wait_for(lambda: not any(pid and psutil.pid_exists(pid) and
                             psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                             for pid in children), timeout=10)
    finish(hive.start(2))
    check_crawl(web, allowed_repeats=2 * 8, data=hive.data)
    result = hive.run("verify")
    assert result.returncode == 0, result.stdout + result.stderr


def test_stop_then_start_fetches_nothing_twice(tmp_path: Path, web: WebProcess) -> None:
    hive = Hive(tmp_path, web)
    process = hive.start(2)
    wait_for(lambda: len(web.requests) > 40, timeout=30)
    result = hive.run("stop")
    assert result.returncode == 0, result.stderr
    finish(process, code=ExitCode.STOPPED)
    assert hive.state().get("pid") is None
    before = len(web.requests)
    finish(hive.start(2))
    assert len(web.requests) > before
    check_crawl(web, data=hive.data)


def test_verify_fails_on_a_corrupt_store(tmp_path: Path, web: WebProcess) -> None:
    hive = Hive(tmp_path, web)
    finish(hive.start(2, "--max-pages", "10"), code=ExitCode.MAX_PAGES)
    store = Store(hive.data / "worker-00", sync_interval=0.0)
    cursor = store.cursor("back") if store.entries("back") else store.cursor("front")
    assert cursor.first(), "the stopped crawl should still have pending URLs"
    cursor.delete()
    store.close(0.0)
    result = hive.run("verify")
    assert result.returncode == 1 and "worker-00" in result.stdout, result.stdout


def test_control_commands_without_a_hive(tmp_path: Path, web: WebProcess) -> None:
    hive = Hive(tmp_path, web)
    for command in (("status",), ("stop",), ("add", "http://a.test/"), ("deny", "a.test")):
        result = hive.run(*command)
        assert result.returncode == 1 and "no hive is running" in result.stderr, command


def test_add_and_deny_on_a_running_hive(tmp_path: Path, web: WebProcess) -> None:
    """``deny`` takes a host out at once: no request to it starts after the command returns."""
    hive = Hive(tmp_path, web, politeness={"min_delay": 0.3, "max_delay": 0.5})
    hive.seeds.write_text(web.seeds()[0] + "\n")
    process = hive.start(2)
    wait_for(hive.status, timeout=30)
    denied = web.web.names[1]
    result = hive.run("deny", f"{denied}:{web.port}")
    assert result.returncode == 0, result.stderr
    denied_at = time.time()
    result = hive.run("add", *web.seeds()[2:5])
    # Links from the first seed's pages may have brought some of them already.
    added = re.fullmatch(r"added (\d), already seen (\d), refused 0\n", result.stdout)
    assert added and int(added[1]) + int(added[2]) == 3, result.stdout + result.stderr
    assert result.returncode == (0 if int(added[1]) else 1)
    wait_for(lambda: any(r.hostname == web.web.names[4] for r in web.requests), timeout=30)
    hive.run("stop")
    # On a loaded machine the batch may end before the stop arrives: either way, no request
    # to the denied host started after the deny returned.
    finish(process, code=(ExitCode.STOPPED, ExitCode.ENDED))
    late = [r for r in web.requests if r.hostname == denied and r.start > denied_at]
    assert not late, late


def test_a_site_larger_than_its_cap_shows_as_such(tmp_path: Path) -> None:
    """Refusals are counted by reason and host in every worker's stats (``status --json``),
    summed in ``hive status`` and named in the line that ends the batch, with the counts the
    crawl logs' ``refused`` lines give."""
    cap = 15
    with WebProcess(Web(seed=7, hosts=3, pages=40, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as web:
        hive = Hive(tmp_path, web, frontier={"max_urls_per_host": cap},
                    politeness={"min_delay": 0.5, "max_delay": 0.5})
        process = hive.start(2)

        def refusals_shown() -> dict[str, int]:
            status = hive.status() or {"processes": []}
            return {k: v for row in status["processes"] for k, v in row.get("stats", {}).items()
                    if k.startswith("refusals/max_urls_per_host")}

        assert wait_for(refusals_shown, timeout=30)
        table = hive.run("status")
        assert table.returncode == 0, table.stderr
        assert "refused: " in table.stdout and "max_urls_per_host" in table.stdout, table.stdout
        ended = next(line for line in finish(process).splitlines()
                     if line.startswith("hive stopped:"))
        fetched = Counter(r.hostname for r in web.requests if r.path != "/robots.txt")
    logged = [entry for path in (hive.data / "logs").glob("crawl-*.jsonl")
              for entry in map(json.loads, path.read_text().splitlines())
              if entry["outcome"] == "refused" and entry["reason"] == "max_urls_per_host"]
    by_host = Counter(entry["url"].split("/")[2] for entry in logged)
    assert len(fetched) == 3 and max(fetched.values()) <= cap and len(by_host) == 3
    assert "the batch ended" in ended and f"max_urls_per_host {len(logged):,} (" in ended, ended
    for host, n in by_host.items():
        assert f"{host} {n:,}" in ended, (host, n, ended)


def test_add_from_stdin_takes_any_number_of_urls(tmp_path: Path, web: WebProcess) -> None:
    """``hive add - < file`` with 40,000 URLs failed: "request of 1228914 bytes exceeds
    1048576 bytes". They go in chunks; the owners' cap refuses most, and every URL is
    accounted for."""
    hive = Hive(tmp_path, web, politeness={"min_delay": 0.3, "max_delay": 0.5})
    hive.seeds.write_text(web.seeds()[0] + "\n")
    process = hive.start(2)
    wait_for(hive.status, timeout=30)
    host = f"{web.web.names[3]}:{web.port}"
    urls = "".join(f"http://{host}/added/{i:05d}-{'x' * 12}\n" for i in range(40_000))
    assert len(urls) > 1 << 20
    result = subprocess.run(hive.command("add", "-", "--data", str(hive.data)), input=urls,
                            env=hive.env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    hive.run("stop")
    finish(process, code=ExitCode.STOPPED)
    counts = re.fullmatch(r"added (\d+), already seen (\d+), refused (\d+) \((\d+) by their "
                          r"owner\)\n", result.stdout)
    assert counts, result.stdout + result.stderr
    added, seen, refused, by_owner = map(int, counts.groups())
    assert added + seen + refused == 40_000 and by_owner == refused
    assert 0 < added <= 60, "the host's budget (frontier.max_urls_per_host) takes the rest"
    assert result.returncode == 0
