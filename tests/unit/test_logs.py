"""Repeated warnings are rate-limited per kind; info lines and distinct kinds pass."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hive.logs import RepeatFilter
from hive.procs.lifecycle import setup_logging


def record(msg: str, level: int = logging.WARNING, name: str = "hive.x") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, ("arg",), None)


def test_a_flood_of_one_warning_is_cut_to_the_burst_then_summarised() -> None:
    clock = [0.0]
    repeats = RepeatFilter(burst=3, window=10.0, clock=lambda: clock[0])
    passed = [repeats.filter(record("dropped a malformed message: %s")) for _ in range(1000)]
    assert passed.count(True) == 3
    assert repeats.filter(record("another kind: %s")), "another kind has its own budget"
    assert repeats.filter(record("chatty info %s", logging.INFO))
    clock[0] = 10.0
    summary = record("dropped a malformed message: %s")
    assert repeats.filter(summary)
    assert "997 more like it in 10s not logged" in str(summary.msg)


def test_a_record_is_judged_once_for_every_handler() -> None:
    repeats = RepeatFilter(burst=1, window=10.0, clock=lambda: 0.0)
    first, second = record("m"), record("m")
    assert repeats.filter(first) and repeats.filter(first)
    assert not repeats.filter(second) and not repeats.filter(second)


def test_the_kinds_remembered_are_bounded() -> None:
    repeats = RepeatFilter(burst=1, window=10.0, clock=lambda: 0.0)
    for i in range(5000):
        repeats.filter(record(f"message {i}"))
    assert len(repeats._kinds) <= 1000


def test_a_process_log_file_takes_a_flood_in_bounded_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_logging("info", tmp_path / "logs" / "supervisor.log", "supervisor")
    try:
        log = logging.getLogger("hive.flood")
        for i in range(20_000):
            log.warning("control: bad request: %s", i)
        for handler in logging.getLogger().handlers:
            handler.flush()
        lines = (tmp_path / "logs" / "supervisor.log").read_text().splitlines()
        assert len(lines) <= 25
        assert capsys.readouterr().err.count("bad request") <= 25
    finally:
        for handler in logging.getLogger().handlers[:]:
            handler.close()
            logging.getLogger().removeHandler(handler)
