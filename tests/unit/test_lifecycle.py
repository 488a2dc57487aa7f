"""Process settings a worker applies to itself (open files, malloc arenas), how children
are started (SIGINT ignored), and a role that cannot start."""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import platform
import resource
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from hive.errors import ConfigError
from hive.procs.lifecycle import START_FAILED, Runner, raise_open_files, read_failure, spawn_quietly


def test_open_files_rise_to_the_hard_limit() -> None:
    soft = raise_open_files()
    assert soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 1024


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_malloc_arenas_are_capped_under_glibc() -> None:
    # In a child: mallopt changes the process it runs in, and threads must not exist yet.
    code = "from hive.procs.lifecycle import limit_malloc_arenas; print(limit_malloc_arenas())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=30, check=True)
    assert result.stdout.strip() == "True"


IGNORED = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"


def test_a_child_spawned_quietly_ignores_sigint_and_no_ctrl_c_is_lost() -> None:
    taken: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: taken.append(signum))
    try:
        with spawn_quietly():
            child = subprocess.run([sys.executable, "-c", IGNORED], capture_output=True,
                                   text=True, timeout=30, check=True)
            # A Ctrl-C while children start (to this thread: pytest may have others).
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            assert taken == []
        assert taken == [signal.SIGINT], "the Ctrl-C reached the handler once the block ended"
    finally:
        signal.signal(signal.SIGINT, before)
    assert child.stdout.strip() == "True"
    assert signal.getsignal(signal.SIGINT) is before


def _main_module_imported(answer: Connection) -> None:
    """Send the file of the main module spawn ran again in this child (None if none)."""
    answer.send(getattr(sys.modules.get("__mp_main__"), "__file__", None))


def test_a_child_spawned_quietly_does_not_import_the_parents_main_module_again() -> None:
    """hive's children run hive.procs functions on plain data: the CLI stays out of them."""
    spawn = multiprocessing.get_context("spawn")
    main = sys.modules["__main__"]
    spec, path = main.__spec__, getattr(main, "__file__", None)
    # A main module spawn runs again, as `python -m cli` has (it skips "pytest.__main__").
    main.__spec__ = importlib.util.find_spec("pytest")
    answers: list[str | None] = []
    try:
        for quietly in (False, True):
            mine, theirs = spawn.Pipe()
            child = spawn.Process(target=_main_module_imported, args=(theirs,))
            with spawn_quietly() if quietly else contextlib.nullcontext():
                child.start()
            assert mine.poll(60), "the child answers"
            answers.append(mine.recv())
            child.join(30)
    finally:
        main.__spec__ = spec
    assert answers == [importlib.util.find_spec("pytest.__main__").origin, None]
    assert main.__spec__ is spec and getattr(main, "__file__", None) == path


class CannotOpen:
    stopping = False
    finished = True
    closed = False

    def __init__(self, error: Exception) -> None:
        self.error = error

    def open(self) -> None:
        raise self.error

    def loop_once(self, now: float) -> float:
        raise AssertionError("no turn after a failed open")

    def wait(self, seconds: float) -> None:
        return None

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("error, message", [
    (ConfigError("dns.resolve: expected HOST=IP, got 'foo'"),
     "dns.resolve: expected HOST=IP, got 'foo'"),
    (PermissionError(13, "Permission denied", "/data/worker-00"),
     "Permission denied: /data/worker-00"),
])
def test_a_role_that_cannot_start_leaves_its_message(tmp_path: Path, error: Exception,
                                                     message: str) -> None:
    failed = tmp_path / "worker-00.failed"
    failed.write_text("from an earlier start")
    before = signal.getsignal(signal.SIGTERM)
    try:
        role = CannotOpen(error)
        code = Runner(role, "worker 0", signals=(signal.SIGTERM,), failure_file=failed).run()
    finally:
        signal.signal(signal.SIGTERM, before)
    assert code == START_FAILED and not role.closed
    assert read_failure(failed) == message


def test_the_supervisor_role_raises_its_start_error() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(ConfigError):
            Runner(CannotOpen(ConfigError("x")), "supervisor").run()
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
