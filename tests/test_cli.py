"""The CLI: click's CliRunner where nothing starts, the real `hive` in a subprocess where
a start could (a bounded run, its whole process group killed at the end)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cli
from hive import __version__, config
from hive.core.ring import Ring
from hive.frontier.frontier import Frontier
from hive.procs import statustext
from hive.procs.lifecycle import ExitCode
from hive.procs.stats import WorkerReport
from hive.procs.supervisor import Supervisor
from hive.storage.datadir import DataDir
from hive.testweb import WebProcess
from tests.conftest import WEB_ADDRESS, tmpfs
from tests.frontier.conftest import rec, small_config

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_version_and_help() -> None:
    runner = CliRunner()
    result = runner.invoke(cli.main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output
    result = runner.invoke(cli.main, ["--help"])
    assert result.exit_code == 0 and "polite" in result.output


def test_start_help_lists_the_exit_codes() -> None:
    result = CliRunner().invoke(cli.main, ["start", "--help"])
    assert result.exit_code == 0
    for code, meaning in ((0, "the batch ended"), (1, "an error"), (2, "a usage error"),
                          (3, "stopped by `hive stop` or a signal"), (4, "--max-pages reached"),
                          (5, "nothing to crawl")):
        assert f"  {code}  {meaning}" in result.output, result.output


def hive(*args: str, timeout: float = 60, cwd: Path = ROOT,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``hive ARGS`` in a session of its own; on a timeout, kill it all and fail."""
    process = subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=cwd, env=env or ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(f"hive {' '.join(args)} ran over {timeout}s:\n{out}\n{err}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture
def seeds(tmp_path: Path) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_text("http://a.web.test/\n")
    return path


@pytest.mark.parametrize("args, message", [
    (["-s", "hive.procs=500", "start"], "hive.procs: must be at most 256, got 500"),
    (["start", "-s", "hive.procs=500"], "hive.procs: must be at most 256, got 500"),
    (["start", "--resolve", "foo"], "dns.resolve: expected HOST=IP, got 'foo'"),
    (["start", "--resolve", "*.web.test=300.1.1.1"], "dns.resolve: bad address '300.1.1.1'"),
    (["start", "--allow-net", "10.0.0.0/33"], "dns.allow_nets: bad network '10.0.0.0/33'"),
    (["start", "--resolve", "@/no/such/names"], "dns.resolve: cannot read /no/such/names"),
    (["-s", "frontier.prioritizer=nosuch:rank", "start"], "frontier.prioritizer: cannot load"),
    (["start", "--dedup-from", "/no/such.cdxj"], "'/no/such.cdxj' does not exist"),
    (["-s", "warc.dedup_from=/no/such.cdxj", "start"], "warc.dedup_from: no such file"),
])
def test_config_is_checked_before_anything_starts(tmp_path: Path, seeds: Path, args: list[str],
                                                  message: str) -> None:
    data = tmp_path / "data"
    result = hive(*args, "--seeds", str(seeds), "--data", str(data), timeout=30)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not data.exists()


@pytest.mark.slow
def test_a_child_that_cannot_start_stops_the_hive_with_its_message(
    tmp_path: Path, seeds: Path
) -> None:
    data = tmp_path / "data"
    # The supervisor checks the stores themselves before any child starts; a lock file
    # that is a directory is met by the worker alone.
    (data / "worker-01" / "lock").mkdir(parents=True)
    result = hive("start", "--procs", "2", "--seeds", str(seeds), "--data", str(data),
                  "--resolve", "*.web.test=127.0.0.2", "--allow-private", "--quiet")
    assert result.returncode == ExitCode.ERROR, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "restarting" not in result.stderr, result.stderr
    lock = data / "worker-01" / "lock"
    assert (f"hive stopped: worker 1 could not start: Is a directory: {lock};"
            in result.stdout), result.stdout
    assert not DataDir(data).socket_dir().exists()


def test_seeds_file_that_cannot_be_read(tmp_path: Path) -> None:
    for path, why in ((tmp_path / "missing.txt", "No such file or directory"),
                      (tmp_path, "Is a directory")):
        result = CliRunner().invoke(cli.main, ["start", "--seeds", str(path),
                                               "--data", str(tmp_path / "data")])
        assert result.exit_code == ExitCode.ERROR, result.output
        assert one_line(result.output) == f"Error: cannot read seeds file {path}: {why}"
        assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("content, args, message", [
    (None, [], "nothing to crawl: no --seeds, and {data} holds no crawl to resume"),
    (b"", ["--seeds", "{seeds}"], "nothing to crawl: {seeds} holds no URLs"),
    (b"# only a comment\n\n", ["--seeds", "{seeds}"], "nothing to crawl: {seeds} holds no URLs"),
    (b"http://a.web.test/\n", ["--seeds", "{seeds}", "--resolve", "*.web.test=127.0.0.2"],
     "nothing to crawl: all 1 seeds refused: 127.0.0.2 is loopback; use --allow-private"),
    (b"http://10.1.2.3/\n", ["--seeds", "{seeds}"],
     "nothing to crawl: all 1 seeds refused: 10.1.2.3 is private; use --allow-private"),
    (b"ftp://a.test/\nmailto:x@a.test\n", ["--seeds", "{seeds}"],
     "nothing to crawl: all 2 seeds refused: "),
])
def test_nothing_to_crawl_says_so_and_exits_5(tmp_path: Path, content: bytes | None,
                                              args: list[str], message: str) -> None:
    data, seeds = tmp_path / "data", tmp_path / "seeds.txt"
    if content is not None:
        seeds.write_bytes(content)
    args = [a.format(seeds=seeds) for a in args]
    result = CliRunner().invoke(cli.main, ["start", "--data", str(data), *args])
    assert result.exit_code == ExitCode.NOTHING, result.output
    assert message.format(data=data, seeds=seeds) in result.output.splitlines()[-1]
    assert "Traceback" not in result.output
    assert not data.exists()


def test_refused_seeds_are_listed_briefly(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    seeds = tmp_path / "seeds.txt"
    long_url = "http://a.web.test/" + "x" * 5000
    bad = [f"ftp://{i}.test/" for i in range(20)]
    seeds.write_bytes(b"http://a.web.test/\nhttp://b.web.test/\xff\n" + long_url.encode()
                      + b"\n" + "\n".join(bad).encode() + b"\n")
    cfg = config.load(environ={}).replace(dns={"resolve": ["*.web.test=127.0.0.2"],
                                               "allow_private": True})
    screened = cli._screen_seeds(cfg, str(seeds), tmp_path / "data")
    assert [record.url for record in screened] == ["http://a.web.test/"]
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"refused seed '{seeds} line 2': not UTF-8 (byte 19)"
    assert err[1].startswith("refused seed 'http://a.web.test/xxx") and "...': " in err[1]
    assert len(err[1]) < len("refused seed ''") + 200 + 40, err[1]
    assert len(err) == cli.REFUSALS_SHOWN + 1 and err[-1] == "... and 12 more seeds refused"


def test_data_under_a_file(tmp_path: Path, seeds: Path) -> None:
    (tmp_path / "file").write_text("a file\n")
    data = tmp_path / "file" / "sub"
    result = CliRunner().invoke(cli.main, ["start", "--data", str(data), "--seeds", str(seeds),
                                           "--resolve", "*.web.test=127.0.0.2",
                                           "--allow-private"])
    assert result.exit_code == ExitCode.ERROR, result.output
    assert one_line(result.output) == f"Error: --data {data}: Not a directory"


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "ro", "ro,size=1m") as mount:
        yield mount


def test_read_only_data(read_only: Path, seeds: Path) -> None:
    for data, why in ((read_only, "not writable"), (read_only / "data", "Read-only file system")):
        result = CliRunner().invoke(cli.main, ["start", "--data", str(data), "--seeds",
                                               str(seeds), "--resolve", "*.web.test=127.0.0.2",
                                               "--allow-private"])
        assert result.exit_code == ExitCode.ERROR, result.output
        assert one_line(result.output) == f"Error: --data {data}: {why}"


def test_demo_refuses_a_negative_delay() -> None:
    result = CliRunner().invoke(cli.main, ["demo", "--delay", "-1"])
    assert result.exit_code == ExitCode.USAGE
    assert "Invalid value for '--delay'" in result.output and "Traceback" not in result.output


def test_progress_adds_a_line_per_interval_off_a_terminal(tmp_path: Path) -> None:
    supervisor = Supervisor(config.load(environ={}), tmp_path, 1)
    stream = io.StringIO()
    progress = cli.Progress(supervisor, quiet=False, stream=stream)
    progress(100.0)
    assert stream.getvalue() == "", "nothing before the first worker report"
    supervisor.stats.take(WorkerReport(0, 1, False, 100.0, 100.0, {}))
    for now in (100.0, 101.0, 109.0, 110.5, 115.0, 121.0):
        progress(now)
    progress.end()
    lines = stream.getvalue().split("\n")
    assert "\r" not in stream.getvalue()
    assert len(lines) == 4 and lines[-1] == "" and all(x.startswith("pages ") for x in lines[:3])


@pytest.mark.slow
def test_a_start_runs_to_max_pages_and_cleans_up(tmp_path: Path, web_server: WebProcess) -> None:
    """Refused seeds are shown and the others crawled; exit 4; no socket directory left."""
    data, seeds = tmp_path / "data", tmp_path / "seeds.txt"
    seeds.write_bytes(("\n".join(web_server.seeds()) + "\n").encode() + b"http://\xff/\n")
    result = hive("start", "--procs", "2", "--data", str(data), "--seeds", str(seeds),
                  "--resolve", web_server.resolve, "--allow-net", f"{WEB_ADDRESS}/32",
                  "--max-pages", "3", timeout=120)
    assert result.returncode == ExitCode.MAX_PAGES, result.stdout + result.stderr
    assert f"refused seed '{seeds} line {len(web_server.seeds()) + 1}': not UTF-8" in result.stderr
    assert "Traceback" not in result.stderr and "\r" not in result.stderr
    assert result.stdout.startswith("hive stopped: --max-pages 3 reached;"), result.stdout
    assert not DataDir(data).socket_dir().exists()


@pytest.mark.slow
def test_detach_reports_the_real_error(tmp_path: Path, seeds: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with (data / "lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = hive("start", "--detach", "--data", str(data), "--seeds", str(seeds),
                      "--resolve", "*.web.test=127.0.0.2", "--allow-private")
    assert result.returncode == ExitCode.ERROR, result.stdout + result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"hive did not start: the hive at {data} is in use by pid"), line


@pytest.mark.slow
@pytest.mark.parametrize("keep", [False, True])
def test_demo_removes_its_directory_unless_kept(tmp_path: Path, keep: bool) -> None:
    env = {**ENV, "TMPDIR": str(tmp_path)}
    result = hive("demo", "--hosts", "2", "--pages", "2", "--delay", "0",
                  *(["--keep"] if keep else []), env=env, timeout=120)
    assert result.returncode == ExitCode.ENDED, result.stdout + result.stderr
    left = list(tmp_path.glob("hive-demo-*"))
    assert len(left) == (1 if keep else 0), left


def test_a_damaged_hive_json_is_named(tmp_path: Path, seeds: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "hive.json").write_text('{"pid": 12')
    result = hive("start", "--data", str(data), "--seeds", str(seeds),
                  "--resolve", "*.web.test=127.0.0.2", "--allow-private", timeout=30)
    assert result.returncode == ExitCode.ERROR, result.stdout + result.stderr
    assert one_line(result.stderr).startswith(f"Error: {data / 'hive.json'} is damaged (not JSON")


def test_a_start_that_fails_in_the_supervisor_leaves_nothing_behind(
    tmp_path: Path, seeds: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "supervisor").write_text("not a store\n")
    for _ in range(2):  # the lock was released: the second start meets the same error
        result = hive("start", "--data", str(data), "--seeds", str(seeds),
                      "--resolve", "*.web.test=127.0.0.2", "--allow-private", timeout=30)
        assert result.returncode == ExitCode.ERROR, result.stdout + result.stderr
        assert one_line(result.stderr) == f"Error: File exists: {data / 'supervisor'}"
        assert not DataDir(data).socket_dir().exists()


# -- verify ----------------------------------------------------------------------------


def stopped_hive(data: Path, procs: int) -> Ring:
    """A stopped hive's hive.json, as the supervisor leaves it."""
    ring = Ring(procs)
    data.mkdir(parents=True, exist_ok=True)
    (data / "hive.json").write_text(json.dumps({"pid": None, "procs": procs, "ring": ring.params}))
    return ring


def test_verify_passes_when_a_worker_owns_no_hosts(tmp_path: Path) -> None:
    ring = stopped_hive(tmp_path, 2)
    mine = [f"http://h{i}.test/" for i in range(40) if ring.owner(f"h{i}.test") == 0][:5]
    cfg = small_config()
    owner = Frontier.from_config(tmp_path / "worker-00", cfg)
    owner.admit([rec(url) for url in mine], 0.0)
    owner.close(0.0)
    Frontier.from_config(tmp_path / "worker-01", cfg).close(0.0)
    result = CliRunner().invoke(cli.main, ["verify", "--data", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.count(": ok") == 2


def test_verify_says_what_it_found_beside_a_lone_hive_json(tmp_path: Path) -> None:
    stopped_hive(tmp_path, 2)
    result = CliRunner().invoke(cli.main, ["verify", "--data", str(tmp_path)])
    assert result.exit_code == 1
    assert "the store of worker 0 is missing" in result.output
    assert "the store of worker 1 is missing" in result.output


def test_verify_names_a_damaged_hive_json(tmp_path: Path) -> None:
    (tmp_path / "hive.json").write_text('{"pid": null}')
    result = CliRunner().invoke(cli.main, ["verify", "--data", str(tmp_path)])
    assert result.exit_code == 1 and "hive.json is damaged" in result.output
    assert "Traceback" not in result.output


# -- status ----------------------------------------------------------------------------


def a_status(**extra: Any) -> dict[str, Any]:
    """A status answer as the supervisor gives it: a splitter and two workers."""
    stats = {"frontier/pending": 123456, "frontier/hosts/bound": 250, "frontier/hosts/ready": 12,
             "frontier/hosts/parked": 4000, "worker/in_flight": 8, "frontier/done/ok": 9876543,
             "frontier/done/http_404": 17, "outbox/size": 3, "dns/hits": 9, "dns/misses": 1}
    rows: list[dict[str, Any]] = [{"role": "splitter", "pid": 4242, "alive": True, "cpu": 3.5,
                                   "rss_mb": 40.0, "open_files": 12}]
    rows += [{"role": f"worker {i}", "pid": 4243 + i, "alive": True, "cpu": 97.0,
              "rss_mb": 512.0, "open_files": 1000, "stats": dict(stats), "errors": 17}
             for i in range(2)]
    totals = {key: 2.0 * value for key, value in stats.items()}
    totals.update(errors=34.0, pages_per_s=61.5, pages_this_start=3600.0)
    return {"processes": rows, "totals": totals, "stopping": False, "waiting": None,
            "cpu_window": 10.0, **extra}


@pytest.mark.parametrize("width", [80, 100])
def test_the_status_table_fits_the_terminal(width: int) -> None:
    text = cli.format_status(a_status(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width, text
    header = text.splitlines()[0].split()
    for title in ("role", "pid", "cpu%", "pending", "ready", "parked", "flight", "pages", "errors"):
        assert title in header
    assert "61.5 pages/s over the last minute, 3600 pages this start" in text


def test_a_wide_terminal_shows_every_column() -> None:
    text = cli.format_status(a_status(), width=200)
    assert all(c.title in text.splitlines()[0] for c in statustext.COLUMNS)
    assert "90%" in text  # the dns hit rate


def test_the_tail_and_a_stop_are_spelled_out() -> None:
    waiting = {"until": 1000.0 + 598, "why": "retry_after", "status": 429, "host": "a.test:8080",
               "worker": 1, "hosts": 1.0}
    text = cli.format_status(a_status(waiting=waiting), width=80, now=1000.0)
    assert "waiting: 1 host, next a.test:8080 at " in text
    assert "(in 9m58s): the server's Retry-After (HTTP 429)" in " ".join(text.split())
    stopping = a_status(stopping=True, fetch_total_timeout=60.0)
    assert ("stopping: waiting for 16 fetches in flight to finish (worker 0: 8, worker 1: 8; "
            "each ends within 60s)") in " ".join(cli.format_status(stopping, width=80).split())
    for row in stopping["processes"][1:]:
        row["stats"]["worker/in_flight"] = 0
    stopping["processes"][2]["alive"] = False
    assert statustext.stopping_note(stopping) == "stopping: waiting for splitter, worker 0 to close"


@pytest.mark.parametrize("watch", ["0", "0.0", "-1"])
def test_watch_must_be_more_than_zero(tmp_path: Path, watch: str) -> None:
    result = CliRunner().invoke(cli.main, ["status", "--data", str(tmp_path), "--watch", watch])
    assert result.exit_code == 2, result.output
    assert "--watch': 0.0 is not in the range" in result.output or watch == "-1"


def test_a_wide_figure_widens_its_line_and_is_never_cut_or_run_together() -> None:
    status = a_status()
    worker = status["processes"][1]
    worker["role"] = "worker 100"
    worker["stats"].update({"frontier/done/ok": 123456789012, "worker/in_flight": 1234567})
    line = cli.format_status(status, width=80).splitlines()[2]
    assert line.split()[:2] == ["worker", "100"]
    assert "1234567 123456789012" in line


def test_index_writes_where_the_data_directory_says(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    result = CliRunner().invoke(cli.main, ["index", "--data", str(tmp_path)])
    assert result.exit_code == 1 and f"{dd.warc}: no such directory" in result.output
    dd.warc.mkdir()
    result = CliRunner().invoke(cli.main, ["index", "--data", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"indexed 0 records from 0 WARC files into {dd.merged_index}" in result.output
    assert dd.merged_index.read_text() == ""


def test_a_recrawls_changes_are_counted_in_status() -> None:
    status = a_status()
    assert "changes:" not in cli.format_status(status, width=80)
    for i, row in enumerate(status["processes"][1:]):
        row["stats"].update({"changes/changed": 3 + i, "changes/unchanged": 40, "changes/new": 1})
    text = " ".join(cli.format_status(status, width=80).split())
    assert "changes: 2 new, 7 changed, 80 unchanged, 0 gone, 0 moved" in text


def test_recrawl_from_what_is_no_crawl_is_named(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for source, said in ((tmp_path / "missing", "not a directory"),
                         (empty, "holds no closed WARC file"),
                         (tmp_path / "data", "is the data directory of this crawl")):
        (tmp_path / "data").mkdir(exist_ok=True)
        result = CliRunner().invoke(cli.main, ["start", "--data", str(tmp_path / "data"),
                                               "--seeds", str(seeds), "--recrawl-from",
                                               str(source)])
        assert result.exit_code == 1, result.output
        assert said in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(cli.main, ["changes", "--data", str(empty)])
    assert result.exit_code == 1 and "was --data started with --recrawl-from?" in result.output


def test_a_cluster_status_shows_every_machine_and_worker() -> None:
    """``hive status`` of a cluster (hive/procs/cluster.py merges the machines' answers):
    each machine's processes by its name, the totals summed, each machine's epoch and state."""
    from hive.procs.cluster import merge_status

    a = {**a_status(), "machine": "a", "epoch": 3, "alive": True, "quiet": True, "outbox": 1}
    b = {**a_status(), "machine": "b", "epoch": 5, "alive": True, "rejoins": 1, "lost": True}
    merged = merge_status([a, b, {"machine": "c", "alive": False},
                           {"machine": "d", "epoch": 9, "alive": False, "lost": True,
                            "dropped": True}], data_dir="/d", started=0.0, stopping=False)
    assert merged["totals"]["frontier/done/ok"] == 4 * 9876543 and merged["outbox"] == 1
    text = cli.format_status(merged, width=100)
    assert "a: worker 1" in text and "b: worker 0" in text and "b: splitter" in text
    assert ("machines: a (epoch 3, quiet), b (epoch 5, lost, started again 1x), "
            "c (epoch None, down), d (epoch 9, dropped)") in text.replace("\n  ", " ")


def test_drop_names_what_it_cannot_drop_without_a_traceback(tmp_path: Path) -> None:
    """``hive drop`` of a one-machine hive's directory, or with no hive running: a clear
    error (the cluster's refusals, an unknown or a live machine, are in test_cluster)."""
    one = tmp_path / "one"
    one.mkdir()
    DataDir(one).write_state({"pid": None, "ring": {"procs": 1, "vnodes": 1, "seed": 0}})
    result = CliRunner().invoke(cli.main, ["drop", "a", "--data", str(one)])
    assert result.exit_code == 1 and "is not a cluster's" in result.output, result.output
    result = CliRunner().invoke(cli.main, ["drop", "a", "--data", str(tmp_path / "none")])
    assert result.exit_code == 1 and "no hive is running" in result.output, result.output
    assert "Traceback" not in result.output
