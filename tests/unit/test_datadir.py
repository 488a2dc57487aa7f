"""DataDir: the names of what is in a data directory (worker stores, crawl logs, the files
of the commands), the stores there are, and hive.json written atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hive.errors import HiveError
from hive.fetch.crawllog import CrawlLog
from hive.storage.datadir import CrawlLogName, DataDir

ROOT = Path(__file__).resolve().parents[2]


def test_worker_names_are_formatted_and_parsed_in_one_place(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    assert dd.worker(3) == tmp_path / "worker-03" and dd.worker(123).name == "worker-123"
    assert [DataDir.worker_id(n) for n in ("worker-03", "worker-123", "worker-7")] == [3, 123, 7]
    for other in ("worker-03.retired-20240101T000000Z", "worker-", "worker-x", "supervisor"):
        assert DataDir.worker_id(other) is None


def test_workers_lists_the_worker_stores_by_id(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    assert dd.workers() == []
    for name in ("worker-10", "worker-02", "worker-01.retired-20240101T000000Z", "supervisor"):
        (tmp_path / name).mkdir()
    (tmp_path / "worker-05").write_text("a file, not a store")
    assert dd.workers() == [(2, tmp_path / "worker-02"), (10, tmp_path / "worker-10")]


def test_a_retired_name_is_never_one_in_use(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    first = dd.retired(1)
    assert first.name.startswith("worker-01.retired-")
    first.mkdir()
    assert dd.retired(1) != first


def test_state_round_trips_and_updates_keep_other_fields(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    assert dd.read_state() is None
    dd.write_state({"pid": 12, "ring": {"procs": 2}})
    dd.update_state(pid=None, ended="stopped")
    assert dd.read_state() == {"pid": None, "ring": {"procs": 2}, "ended": "stopped"}


@pytest.mark.parametrize(("text", "why"), [('{"pid": 1', "not JSON"), ("[1]", "not a JSON")])
def test_a_damaged_state_is_named(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "hive.json").write_text(text)
    with pytest.raises(HiveError, match=why) as caught:
        DataDir(tmp_path).read_state()
    assert str(tmp_path / "hive.json") in str(caught.value)


def test_a_crash_between_the_write_and_the_rename_leaves_the_old_file_whole(
    tmp_path: Path,
) -> None:
    """A process killed after writing the new hive.json beside the old one, before the
    rename: the old file is there, whole, and the next write replaces it."""
    dd = DataDir(tmp_path)
    old = {"pid": None, "ring": {"procs": 3}, "config": {"pad": "x" * 10_000}}
    dd.write_state(old)
    crash = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from hive.storage.datadir import DataDir\n"
        "os.replace = lambda *args: os._exit(9)\n"
        "DataDir(Path(sys.argv[1])).write_state({'pid': 1, 'ring': {'procs': 5}})\n"
    )
    result = subprocess.run([sys.executable, "-c", crash, str(tmp_path)], timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 9
    assert json.loads((tmp_path / "hive.json.tmp").read_text())["ring"] == {"procs": 5}
    assert dd.read_state() == old
    dd.write_state({"pid": 2})
    assert dd.read_state() == {"pid": 2} and not (tmp_path / "hive.json.tmp").exists()


def test_every_file_of_the_data_directory_is_named_here(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    assert dd.logs == tmp_path / "logs" and dd.warc == tmp_path / "warc"
    assert dd.supervisor_out == tmp_path / "logs" / "hive.out"
    assert dd.merged_index == tmp_path / "index.cdxj"
    assert dd.report_page == tmp_path / "report.html"
    assert dd.web_requests == tmp_path / "web-requests.jsonl"
    assert DataDir.store_data(dd.worker(2)) == tmp_path / "worker-02" / "data.mdb"
    assert dd.log_file("worker-02") == tmp_path / "logs" / "worker-02.log"
    assert dd.failure_file("worker-02.log") == tmp_path / "logs" / "worker-02.failed"


def test_crawl_log_names_are_built_and_parsed_in_one_place(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    assert DataDir.crawl_log_stem(3) == "crawl-03" and DataDir.crawl_log_stem(123) == "crawl-123"
    assert dd.crawl_log(3) == tmp_path / "logs" / "crawl-03.jsonl"
    live = DataDir.crawl_log_name("crawl-03.jsonl")
    assert live == CrawlLogName(3) and live.live
    assert DataDir.crawl_log_name("crawl-03.20250101000000.jsonl") == (3, "20250101000000", 0)
    assert DataDir.crawl_log_name("crawl-03.20250101000000-12.jsonl") == (3, "20250101000000", 12)
    for other in ("crawl-03.log", "crawl-.jsonl", "crawl-03.jsonl.gz", "crawl-03.bak.jsonl",
                  "worker-03.log", "hive.out", "crawl-03.2025.jsonl"):
        assert DataDir.crawl_log_name(other) is None, other


def test_crawl_logs_are_listed_by_worker_in_the_order_they_were_written(tmp_path: Path) -> None:
    """Rotated files by time, then by their number in that second (-10 after -2), the live
    one last; files that are not crawl logs, and directories, are not listed."""
    dd = DataDir(tmp_path)
    assert dd.crawl_logs() == []
    dd.logs.mkdir()
    names = ["crawl-01.jsonl", "crawl-00.jsonl", "crawl-00.20250102000000.jsonl",
             "crawl-00.20250101000000-10.jsonl", "crawl-00.20250101000000-2.jsonl",
             "crawl-00.20250101000000.jsonl", "worker-00.log", "hive.out"]
    for name in names:
        (dd.logs / name).write_text("")
    (dd.logs / "crawl-02.jsonl").mkdir()
    assert [p.name for p in dd.crawl_logs()] == [
        "crawl-00.20250101000000.jsonl", "crawl-00.20250101000000-2.jsonl",
        "crawl-00.20250101000000-10.jsonl", "crawl-00.20250102000000.jsonl", "crawl-00.jsonl",
        "crawl-01.jsonl",
    ]


def test_the_files_a_crawl_log_rotates_to_are_its_own_in_order(tmp_path: Path) -> None:
    """What CrawlLog (given crawl_log_stem) writes and rotates to is what crawl_log_name
    recognises, and crawl_logs gives its lines back in the order they were written."""
    dd = DataDir(tmp_path)
    log = CrawlLog(dd.logs, DataDir.crawl_log_stem(7), 150)
    for n in range(40):
        log.write(float(n), "ok", f"http://a.test/{n}")
    log.close()
    files = dd.crawl_logs()
    assert len(files) == len(list(dd.logs.iterdir())) > 12, "rotated within one second"
    assert files[-1] == dd.crawl_log(7)
    written = [json.loads(line)["t"] for path in files for line in path.read_text().splitlines()]
    assert written == [float(n) for n in range(40)]
