"""A real crawl's WARCs are indexed as webrecorder's cdxj-indexer indexes them: beside each
file when a worker closes it, and merged by ``hive index``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdxj_indexer.main import write_cdx_index

from hive.fetch import cdxj
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS
from tests.test_hive import Hive, finish

pytestmark = pytest.mark.slow


@pytest.fixture
def small_web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=11, hosts=6, pages=6, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as server:
        yield server


def test_a_crawls_indexes_agree_with_cdxj_indexer(tmp_path: Path, small_web: WebProcess) -> None:
    hive = Hive(tmp_path, small_web)
    finish(hive.start(2))
    warc_dir = hive.data / "warc"
    warcs = sorted(warc_dir.glob("*.warc.gz"))
    assert len(warcs) == 2
    for path in warcs:
        reference = tmp_path / (path.name + ".reference")
        write_cdx_index(str(reference), [str(path)], {"sort": True})
        assert cdxj.index_path(path).read_text() == reference.read_text(), path.name
    result = hive.run("index")
    assert result.returncode == 0, result.stderr
    merged = tmp_path / "reference.cdxj"
    write_cdx_index(str(merged), [str(warc_dir)], {"sort": True})
    index = (hive.data / "index.cdxj").read_text()
    assert index == merged.read_text()
    # Every page the server answered is in the index (some more than once: a retry).
    fetched = {r.url for r in small_web.requests if r.method == "GET"}
    assert {json.loads(line.split(" ", 2)[2])["url"] for line in index.splitlines()} == fetched
