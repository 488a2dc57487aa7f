"""The issue's cookie case through a whole hive (bench/cookie_memory.py): 200 hosts each
setting 49 cookies of 64,000 bytes. The worker's jars never account for more than
fetch.cookie_jar_mb, and every page asked for after the big cookies carries its host's
session cookie, at the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cookie_memory import ROOT, run

pytestmark = pytest.mark.slow


def test_a_hive_under_the_issues_cookies(tmp_path: Path) -> None:
    samples, after, carried, code = run("big", ROOT, tmp_path, timeout=300)
    assert code == 0
    assert 0 < samples.jar_peak <= 16 << 20
    assert samples.counters['hive_cookies_refused{reason="too_large"}'] == 200 * 49
    assert after == carried == 600
