"""bench/soak.py's verdict on one process's samples: a leak of files fails, while TCP
connections climbing after the warm-up to what the configuration allows do not (CI saw a
busy worker reach its 32 fetch connections only after its warm-up sample, and the old
rule, open files within 8 of their early peak, called that a leak)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def soak(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # soak.py imports its sibling bench_crawl
    sys.modules.pop("soak", None)
    return importlib.import_module("soak")


def run(soak: ModuleType, files: list[int], tcp: list[int]) -> list[object]:
    """One sample a second of a worker with these non-TCP files and TCP connections."""
    return [soak.Sample(float(i), "worker 0", 10, 70.0, 45.0, f + t, t, 36, 50.0, float(i),
                        None, None, None) for i, (f, t) in enumerate(zip(files, tcp, strict=True))]


def test_connections_that_climb_to_the_configured_bound_after_warm_up_pass(
        soak: ModuleType) -> None:
    samples = run(soak, [35] * 45, [min(32, 21 + i // 3) for i in range(45)])
    lines, verdict = soak.judge(samples, 15.0, tcp_bound=32 * 9)
    assert verdict is True, lines


def test_connections_past_the_configured_bound_fail(soak: ModuleType) -> None:
    samples = run(soak, [35] * 45, [20] * 40 + [300] * 5)
    lines, verdict = soak.judge(samples, 15.0, tcp_bound=32 * 9)
    assert verdict is False and "over the configured 288" in lines[-1], lines


def test_files_that_climb_past_their_early_peak_fail(soak: ModuleType) -> None:
    samples = run(soak, [35 + max(0, i - 15) for i in range(45)], [20] * 45)
    lines, verdict = soak.judge(samples, 15.0, tcp_bound=32 * 9)
    assert verdict is False and "(over +8)" in lines[-1], lines
