"""DataDir: worker directory names, the stores there are, and hive.json written atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hive.errors import HiveError
from hive.storage.datadir import DataDir

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
