"""The CLI through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cli
from hive import __version__, statustext
from hive.frontier import Frontier
from hive.ring import Ring
from tests.frontier.conftest import rec, small_config


def test_version_and_help() -> None:
    runner = CliRunner()
    result = runner.invoke(cli.main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output
    result = runner.invoke(cli.main, ["--help"])
    assert result.exit_code == 0 and "polite" in result.output


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
    assert "worker-00: missing (hive.json names 2 workers)" in result.output
    assert "worker-01: missing" in result.output


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
