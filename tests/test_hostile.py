"""The short hostile run of bench/hostile.py: hostile pages mixed with a normal web.

Pages of 200,000 links, 512 KB robots.txt files of 25,000 rules, a body of
empty gzip members, robots.txt files that redirect to a victim that disallows
everything, a same-host robots.txt chain, a Retry-After in Arabic-Indic digits
— beside hive.testweb's web with its own hostile hosts. A worker's growth stays
under the stated budget, every in-scope page of the normal web is fetched,
nothing is impolite at either server, and the victim never has two requests
at once nor a disallowed path fetched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.hostile import Plan, report, run

pytestmark = pytest.mark.slow


def test_hostile_pages_beside_a_normal_web(tmp_path: Path) -> None:
    result = run(Plan.short(), tmp_path)
    text = report(result)
    assert result.exit_code == 0, text
    assert result.peak_rss_mb and result.start_rss_mb, text
    assert result.ok, text
