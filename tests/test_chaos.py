"""Chaos in the suite: kill -9 the supervisor, the splitter and workers at random moments.

A short run of ``bench/chaos.py`` (its driver, loaded from its path): a seeded
schedule of five kills, one of each role at least, while the hive crawls the
synthetic web; then every invariant of the long run, measured at the server
and on disk. The politeness delay (2 s) is longer than a restart, so a hive
that forgot a host's delay (or its fetch in flight) across a kill would be
caught fetching it too soon; and the web is small but slow enough, by that
delay, for the five kills to land before the batch ends.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def load_chaos() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hive_bench_chaos", ROOT / "bench" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


chaos = load_chaos()
PARAMS = chaos.Params(hosts=24, pages=8, delay=2.0, crawl_delay=2.2, kills=5, seed=1,
                      timeout=120.0)


def test_kill_nine_at_random_moments(tmp_path: Path) -> None:
    kinds = {kill.kind for kill in chaos.schedule(PARAMS)}
    assert kinds == {chaos.SUPERVISOR, "splitter", "worker"}, "the seed must hit every role"
    result = chaos.run(tmp_path, PARAMS)
    report = chaos.table(result)
    assert sum(result.kills.values()) == PARAMS.kills, f"the batch ended first\n{report}"
    assert result.restarts >= result.kills[chaos.SUPERVISOR], report
    assert not result.lost, result.lost[:5]
    assert not result.forbidden, result.forbidden[:5]
    assert result.violations == [], result.violations[:5]
    assert result.fetched_twice <= result.twice_bound, result.twice
    assert result.verify_ok, result.verify_output
