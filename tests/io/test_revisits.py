"""Revisit records: a worker crawling pages of one body archives it once; the rest refer to it.

Real workers, stores, WARCs and a test web whose hosts serve copy pages of one body;
checked with warcio and cdxj-indexer. One test kills a worker process with SIGKILL.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cdxj_indexer.main import write_cdx_index
from warcio.archiveiterator import ArchiveIterator

from hive.config import Config
from hive.core.ring import Ring
from hive.core.urls import host_key
from hive.fetch import cdxj
from hive.fetch.revisits import decode
from hive.fetch.warc import REVISIT_PROFILE, Original, WarcWriter
from hive.procs.worker import Worker
from hive.storage.datadir import DataDir
from hive.storage.modes import read_only
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, crawl_config
from tests.io.test_warc import exchange
from tests.test_hive import Hive, finish

WARCIO = [sys.executable, "-c", "from warcio.cli import main; main()"]
COPIES = 3
HOSTS = 3


@pytest.fixture(scope="module")
def copy_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebProcess]:
    log = tmp_path_factory.mktemp("copyweb") / "requests.jsonl"
    web = Web(seed=5, hosts=HOSTS, pages=3, links=4, hostile=False, copies=COPIES)
    with WebProcess(web, log, host=WEB_ADDRESS) as server:
        yield server


def config(server: WebProcess, **warc: Any) -> Config:
    return crawl_config(server, scope={"mode": "any"}, warc=warc)


def crawl(cfg: Config, directory: Path, seeds: list[str]) -> dict[str, float]:
    worker = Worker(cfg, directory / "store", warc_dir=directory / "warc", log_dir=directory)
    worker.add(seeds, time.time())
    assert worker.run_until_idle(timeout=30)
    stats = worker.stats()
    worker.close()
    return stats


def records(warc_dir: Path) -> list[dict[str, str]]:
    """The WARC headers of every response and revisit record, in file order."""
    out = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("response", "revisit"):
                    fields = dict(record.rec_headers.headers)
                    fields["payload"] = record.content_stream().read().decode("latin-1")
                    fields["file"] = path.name
                    out.append(fields)
    return out


def copies_of(found: list[dict[str, str]]) -> list[dict[str, str]]:
    return [r for r in found if "/copy/" in r["WARC-Target-URI"]]


@pytest.mark.parametrize("threads", [1, 8])
def test_one_body_on_many_pages_and_hosts_is_archived_once(
    copy_web: WebProcess, tmp_path: Path, threads: int
) -> None:
    """One fetch thread archives the body once. Eight may fetch the first copies of
    several hosts at once, and two fetches that both miss the index both archive the body
    whole (hive/fetch/revisits.py): at most one whole copy a host, every other a revisit
    of one of them."""
    cfg = config(copy_web).replace(fetch={"threads": threads})
    stats = crawl(cfg, tmp_path, copy_web.seeds())
    found = copies_of(records(tmp_path / "warc"))
    assert len(found) == HOSTS * COPIES
    wholes = [r for r in found if r["WARC-Type"] == "response"]
    later = [r for r in found if r["WARC-Type"] != "response"]
    assert 1 <= len(wholes) <= (1 if threads == 1 else HOSTS), len(wholes)
    first = wholes[0]
    assert found[0] is first and len(first["payload"]) >= 256
    assert {r["WARC-Type"] for r in later} == {"revisit"}
    assert len({r["WARC-Target-URI"].split("/")[2] for r in later}) == HOSTS  # and other hosts
    by_id = {r["WARC-Record-ID"]: r for r in wholes}
    for revisit in later:
        original = by_id[revisit["WARC-Refers-To"]]
        assert revisit["WARC-Profile"] == REVISIT_PROFILE
        assert revisit["WARC-Refers-To-Target-URI"] == original["WARC-Target-URI"]
        assert revisit["WARC-Refers-To-Date"] == original["WARC-Date"]
        assert revisit["WARC-Payload-Digest"] == first["WARC-Payload-Digest"]
        assert "WARC-Truncated" not in revisit
        assert revisit["payload"] == ""
    assert stats["revisits/records"] == len(later)
    assert stats["revisits/payload_bytes_saved"] == len(later) * len(first["payload"])
    warcs = sorted((tmp_path / "warc").glob("*.warc.gz"))
    check = subprocess.run([*WARCIO, "check", "-v", *map(str, warcs)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    for path in warcs:
        out = tmp_path / "reference.cdxj"
        write_cdx_index(str(out), [str(path)], {"sort": True})
        beside = cdxj.index_path(path).read_text()
        assert beside == out.read_text()
        assert beside.count('"mime": "warc/revisit"') == len(later)


KILLED_CRAWL = """
import os, sys, time
from hive.config import from_dict
from hive.procs.worker import Worker
cfg = from_dict(__import__("json").loads(sys.argv[1]))
worker = Worker(cfg, __import__("pathlib").Path(sys.argv[2]) / "store",
                warc_dir=__import__("pathlib").Path(sys.argv[2]) / "warc",
                log_dir=__import__("pathlib").Path(sys.argv[2]))
worker.add([sys.argv[3]], time.time())
assert worker.run_until_idle(timeout=30)
os.kill(os.getpid(), 9)
"""


def test_after_a_kill_the_index_refers_to_records_that_survived(
    copy_web: WebProcess, tmp_path: Path
) -> None:
    cfg = config(copy_web)
    cfg = cfg.replace(scope={"mode": "host"})
    first, second = copy_web.seeds()[:2]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_CRAWL, json.dumps(cfg.to_dict()), str(tmp_path), first],
        capture_output=True, text=True, timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list((tmp_path / "warc").glob("*.open"))  # the crash left its file open
    crawl(cfg, tmp_path, [second])
    found = copies_of(records(tmp_path / "warc"))
    assert [r["WARC-Type"] for r in found] == ["response"] + ["revisit"] * (2 * COPIES - 1)
    original = found[0]
    assert original["WARC-Target-URI"].startswith(first)
    assert all(r["WARC-Refers-To"] == original["WARC-Record-ID"] for r in found[1:])
    assert all(r["WARC-Refers-To-Date"] == original["WARC-Date"] for r in found[1:])
    assert any(r["WARC-Target-URI"].startswith(second) and r["file"] != original["file"]
               for r in found[1:])


def test_a_second_crawl_seeded_from_the_first_archives_only_what_changed(
    copy_web: WebProcess, tmp_path: Path
) -> None:
    crawl(config(copy_web), tmp_path / "one", copy_web.seeds())
    big = {r["WARC-Target-URI"] for r in records(tmp_path / "one" / "warc")
           if r["WARC-Type"] == "revisit" or len(r["payload"]) >= 256}
    index = tmp_path / "one.cdxj"
    cdxj.build_index(sorted((tmp_path / "one" / "warc").glob("*.warc.gz")), index)
    lines = index.read_text().splitlines()
    captures = sum('"warc/revisit"' not in line for line in lines)
    with index.open("a") as f:
        f.write("not a cdxj line\n" + "x" * (100 << 10) + "\n")
        f.write('com,a)/ 20240101000000 {"url": "http://a.com/", "digest": "sha1:NOPE"}\n')
    stats = crawl(config(copy_web, dedup_from=str(index)), tmp_path / "two", copy_web.seeds())
    assert stats["revisits/seeded"] == captures
    assert stats["revisits/seed/skipped/revisit"] == len(lines) - captures
    assert stats["revisits/seed/malformed/fields"] == 1
    assert stats["revisits/seed/malformed/too_long"] == 1
    assert stats["revisits/seed/malformed/digest"] == 1
    found = records(tmp_path / "two" / "warc")
    whole = [r for r in found if r["WARC-Type"] == "response" and len(r["payload"]) >= 256]
    assert whole == []
    revisits = [r for r in found if r["WARC-Type"] == "revisit"]
    assert {r["WARC-Target-URI"] for r in revisits} == big
    # A CDXJ line names its capture by URI and second, not by record ID.
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["WARC-Refers-To-Date"])
               and "WARC-Refers-To" not in r for r in revisits)


def test_a_file_a_crash_left_ending_in_a_revisit_is_recovered_whole(tmp_path: Path) -> None:
    body = b"<p>" + b"one body " * 100 + b"</p>"
    writer = WarcWriter(tmp_path, "hive-00", 10**9, 1, "hive/test")
    first = writer.write_exchange(**exchange(0, body=body))
    writer.write_exchange(**exchange(1, body=body), original=Original(
        "http://a.test/page/0", first.date, first.record_id))
    [left] = tmp_path.glob("*.open")
    assert writer._file is not None
    writer._file._raw.close()  # the file is left open, as a kill leaves it
    WarcWriter(tmp_path, "hive-00", 10**9, 1, "hive/test").close()
    with (tmp_path / left.name.removesuffix(".open")).open("rb") as f:
        kinds = [record.rec_type for record in ArchiveIterator(f)]
    assert kinds == ["warcinfo", "request", "response", "request", "revisit"]


def test_each_worker_of_a_hive_seeds_the_entries_of_its_own_hosts(
    copy_web: WebProcess, tmp_path: Path
) -> None:
    """``hive start --procs 2 --dedup-from``: the prior index is held once between the
    workers, each entry by the owner of its URL's host under the hive's ring (as resize
    places entries), not by every worker."""
    prior = tmp_path / "prior.cdxj"
    urls = [f"http://h{n}.test/p/{n}" for n in range(40)]
    digests = [base64.b32encode(bytes([n]) * 20).decode() for n in range(len(urls))]
    prior.write_text("".join(
        f'x 20260101000000 {{"url": "{url}", "digest": "sha1:{digest}"}}\n'
        for url, digest in zip(urls, digests, strict=True)))
    hive = Hive(tmp_path, copy_web)
    finish(hive.start(2, "--dedup-from", str(prior)))
    ring = Ring.from_params(hive.state()["ring"])
    held: dict[str, int] = {}
    for worker in range(2):
        with read_only(DataDir(hive.data).worker(worker)) as txn:
            for _, value in txn.items("payloads"):
                original = decode(value)
                assert original is not None
                if original.uri in urls:
                    held[original.uri] = held.get(original.uri, 0) + 1
                    assert ring.owner(host_key(original.uri)) == worker, original.uri
    assert held == dict.fromkeys(urls, 1)
