"""The CLI through click's CliRunner."""

from __future__ import annotations

from click.testing import CliRunner

import cli
from hive import __version__


def test_version_and_help() -> None:
    runner = CliRunner()
    result = runner.invoke(cli.main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output
    result = runner.invoke(cli.main, ["--help"])
    assert result.exit_code == 0 and "polite" in result.output
