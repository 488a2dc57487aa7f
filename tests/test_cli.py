"""The CLI through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import cli
from hive import __version__
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
