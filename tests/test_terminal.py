"""`hive start` at a terminal: Ctrl-C through a real pseudo-terminal.

The hive runs as a session leader with the pseudo-terminal as its controlling
terminal, as in a shell: the interrupt character written to the terminal makes
the kernel send SIGINT to the whole foreground process group, the hive's
children included. The first Ctrl-C must be the warm stop (summary with its
reason, WARC files closed, exit 3), a second stops at once, and no traceback
is ever printed.
"""

from __future__ import annotations

import os
import pty
import re
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive.procs.lifecycle import ExitCode
from hive.storage.datadir import DataDir
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, wait_for
from tests.test_hive import ROOT, Hive

pytestmark = pytest.mark.slow
INTERRUPT = b"\x03"


class Terminal:
    """A command run on a pseudo-terminal of its own; its output collected as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: a session leader whose controlling terminal is the pty
            try:
                os.chdir(ROOT)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        attrs = termios.tcgetattr(fd)
        attrs[3] &= ~termios.ECHO  # the terminal does not echo what the test types (^C)
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        self.chunks: list[bytes] = []
        self.code: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 4096)
            except OSError:  # EIO: every process holding the terminal has gone
                return
            if not data:
                return
            self.chunks.append(data)

    @property
    def output(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")

    def interrupt(self) -> None:
        os.write(self.fd, INTERRUPT)

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
                raise AssertionError(f"still running after {timeout}s:\n{self.output[-3000:]}")
            time.sleep(0.05)
        self._reader.join(5)
        os.close(self.fd)
        return self.code

    def kill(self) -> None:
        if self.code is None:
            try:
                os.killpg(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(self.fd)


@pytest.fixture
def slow_web(tmp_path: Path) -> Iterator[WebProcess]:
    """A web big enough that a crawl at these delays lasts well beyond a Ctrl-C."""
    with WebProcess(Web(seed=7, hosts=12, pages=40, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as server:
        yield server


def start_on_terminal(hive: Hive, procs: int) -> Terminal:
    argv = hive.command("start", "--procs", str(procs), "--data", str(hive.data),
                        "--seeds", str(hive.seeds))
    terminal = Terminal(argv, hive.env)
    return terminal


def pages_shown(terminal: Terminal) -> int:
    """The page count on the progress line as last drawn."""
    counts = re.findall(r"pages\s+(\d+)\s", terminal.output)
    return int(counts[-1]) if counts else 0


def open_warcs(data: Path) -> list[Path]:
    return sorted(data.glob("warc/**/*.open"))


def summary(output: str) -> str:
    lines = [line for line in re.split(r"[\r\n]+", output) if line.startswith("hive stopped:")]
    assert len(lines) == 1, output
    return lines[0]


def test_the_first_ctrl_c_mid_crawl_is_a_warm_stop(tmp_path: Path, slow_web: WebProcess) -> None:
    hive = Hive(tmp_path, slow_web, politeness={"min_delay": 0.3, "max_delay": 0.5})
    terminal = start_on_terminal(hive, 2)
    try:
        wait_for(lambda: pages_shown(terminal) >= 5, timeout=60)
        terminal.interrupt()
        code = terminal.wait(90)
    finally:
        terminal.kill()
    out = terminal.output
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert code == ExitCode.STOPPED, out
    line = summary(out)
    assert line.startswith("hive stopped: stopped by SIGINT;"), line
    assert open_warcs(hive.data) == []
    assert list(hive.data.glob("warc/**/*.warc.gz")), "no WARC file was written"
    assert not DataDir(hive.data).socket_dir().exists()
    # The workers stopped warmly, on the supervisor's word: each logged its close.
    for i in range(2):
        log = (hive.data / "logs" / f"worker-{i:02d}.log").read_text()
        assert f"worker {i} closed" in log, log[-2000:]


def test_a_ctrl_c_during_start_up_prints_only_the_summary(
    tmp_path: Path, slow_web: WebProcess
) -> None:
    hive = Hive(tmp_path, slow_web)
    terminal = start_on_terminal(hive, 6)
    try:
        # The supervisor holds its lock from the start of its open(): children are starting.
        wait_for(lambda: (hive.data / "lock").exists(), timeout=60, interval=0.005)
        terminal.interrupt()
        code = terminal.wait(90)
    finally:
        terminal.kill()
    out = terminal.output
    assert code == ExitCode.STOPPED, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("hive stopped: stopped by SIGINT;"), out
    assert not DataDir(hive.data).socket_dir().exists()
    assert open_warcs(hive.data) == []


def test_a_second_ctrl_c_stops_at_once(tmp_path: Path, slow_web: WebProcess) -> None:
    hive = Hive(tmp_path, slow_web, politeness={"min_delay": 0.3, "max_delay": 0.5})
    terminal = start_on_terminal(hive, 2)
    try:
        wait_for(lambda: pages_shown(terminal) >= 3, timeout=60)
        terminal.interrupt()
        wait_for(lambda: "stopping: stopped by SIGINT" in
                 (hive.data / "logs" / "supervisor.log").read_text(), timeout=10)
        terminal.interrupt()
        code = terminal.wait(30)
    finally:
        terminal.kill()
    out = terminal.output
    assert "Traceback" not in out, out
    assert code == ExitCode.STOPPED, out
    assert summary(out).startswith("hive stopped: stopped by SIGINT;")
    log = (hive.data / "logs" / "supervisor.log").read_text()
    assert "second signal (SIGINT), stopping at once" in log, log[-2000:]
    assert not DataDir(hive.data).socket_dir().exists()
