"""A full disk stops the hive cleanly with a message that says so; freed space resumes it.

The data directory is a small tmpfs the test mounts (root only; skipped where
mounting is not allowed, but failed under CI, which runs as root). WARC files
fill it; a worker meets ENOSPC writing WARC or committing LMDB, stops with a
storage error, and the supervisor stops the hive instead of restarting it.
After the tmpfs is made larger, ``start`` resumes and completes with nothing
lost, measured at the server.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, tmpfs
from tests.test_hive import Hive, check_crawl, finish, output

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "size=3m") as mount:
        yield mount


def test_disk_full_stops_then_resumes(tmp_path: Path, small_disk: Path) -> None:
    web = Web(seed=9, hosts=20, pages=40, page_bytes=20000, hostile=False)
    with WebProcess(web, tmp_path / "requests.jsonl", host=WEB_ADDRESS) as server:
        hive = Hive(tmp_path, server, warc={"gzip_level": 0})
        hive.data = small_disk / "data"
        process = hive.start(2)
        assert process.wait(timeout=120) == 1, output(process)[-3000:]
        text = output(process)
        assert "stopped on a storage error: " in text, text[-3000:]
        assert "No space left on device" in text, text[-3000:]
        subprocess.run(["mount", "-o", "remount,size=200m", str(small_disk)], check=True)
        finish(hive.start(2), timeout=180)
        check_crawl(server, allowed_repeats=2 * 8, data=hive.data)
        result = hive.run("verify")
        assert result.returncode == 0, result.stdout + result.stderr
