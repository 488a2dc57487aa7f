"""The README's two memory guarantees, measured by the benchmarks that measure them, at sizes
a test can afford: a worker's anonymous memory does not grow with its pending URLs
(bench/bench_growth.py), and no process's memory or open files grow over a crawl
(bench/soak.py). Each script is run as a user runs it and held to its own verdict: it
exits 1 when its bound is broken, and prints why."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def bench(script: str, tmp: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python bench/<script> <args>`` from the checkout, its temporary files under ``tmp``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_a_workers_memory_does_not_grow_with_its_pending_urls(tmp_path: Path) -> None:
    """20,000 and then 200,000 URLs pending over 200 hosts, each store opened by a fresh
    worker that crawls 2,000 pages: its RssAnon peak with ten times the URLs is within
    bench_growth's 1.10 of the other's (about 45 MB; held in memory, 180,000 more URLs
    would add tens of MB)."""
    result = bench("bench_growth.py", tmp_path, "--sizes", "20000", "200000",
                   "--hosts", "200", "--pages", "2000", "--seconds", "40", timeout=300)
    out = result.stdout + result.stderr
    verdict = re.search(r"RssAnon crawl peak, 200,000 vs 20,000 pending: ([\d.]+) \((\w+)", out)
    assert verdict is not None, out[-3000:]
    assert verdict[2] == "PASS" and result.returncode == 0, out[-3000:]
    assert "WARNING" not in out, "each size crawls its 2,000 pages, all on the test web"


def test_no_process_grows_its_memory_or_open_files_over_a_crawl(tmp_path: Path) -> None:
    """30 s of ``hive start --procs 2`` over a 60,000-page web at a 0.05 s delay (bound by
    the cores, not by politeness: tens of thousands of pages), every process sampled each
    second: from its first sample after 10 s to the end, RssAnon grows by less than 5 MB
    or 10 %, open files but TCP connections stay within 8 of their early peak and TCP
    connections within what the fetch threads may hold; no page lost, fetched twice
    or fetched too soon; no restart. The WARC files are the default 1 GB, so none closes:
    a worker's index lines of its open file wait on disk past 4,096 (they grew it by
    about 7 MB in this run while it kept them all)."""
    result = bench("soak.py", tmp_path, "--minutes", "0.5", "--hosts", "200",
                   "--pages", "300", "--delay", "0.05", "--interval", "1", "--warmup", "0.33",
                   timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "soak            PASS" in out, out[-6000:]
    fetched = re.search(r"pages fetched +([\d,]+) of", out)
    assert fetched is not None and int(fetched[1].replace(",", "")) >= 5000, out[-6000:]
