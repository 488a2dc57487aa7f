"""Process lifecycle shared by the hive's roles: locks, the run loop, signals, logging.

Every role (splitter, worker process, supervisor) has ``open()``,
``loop_once(now) -> seconds to wait``, ``wait(seconds)``, ``close()``, a
``stopping`` flag and a ``finished`` property. ``Runner`` drives it: the first
signal stops it warmly (intake stops, in-flight work finishes, state commits),
a second stops it at once; an exception in one turn is logged and the loop
goes on, except a StoreError (the disk is full or the store is broken), which
stops the process cleanly with its message and exit code ``STORE_FAILED``, so
the supervisor stops the hive instead of restarting it. A role whose ``open()``
fails on a configuration, storage or OS error exits with ``START_FAILED`` after
writing its one-line message to the file it was given, so the supervisor can
stop the hive with that message instead of restarting the child in a loop.
``faulthandler`` dumps every thread's stack on SIGUSR1.

Signals: the supervisor takes SIGINT and SIGTERM. Its children take only
SIGTERM, the supervisor's word: a terminal's Ctrl-C goes to every process in
the foreground process group, and a child that took it as its own first
signal would take the supervisor's SIGTERM as its second and stop at once.
``spawn_quietly`` starts a child with SIGINT ignored from its first
instruction (the disposition survives exec, and Python keeps an ignored
SIGINT), so not even a child still importing its modules takes a Ctrl-C. It
also starts it without this process's main module: ``spawn`` would import the
parent's ``__main__`` again in every child (for functions defined there), and
hive's children run functions of ``hive.procs`` on plain data, so the CLI and
everything it imports (click, ~0.2 s of CPU per child) stay out of them.

``ExitCode`` is what ``hive start`` exits with, defined here once.

``Lock`` is a flock on a file: one hive per data directory, one process per
worker directory. ``die_with_parent`` asks Linux to kill a child when the
supervisor dies (PR_SET_PDEATHSIG), so no orphan outlives it to race a restart.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import faulthandler
import fcntl
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from pathlib import Path
from types import FrameType
from typing import Protocol

from hive.errors import HiveError, StoreError
from hive.logs import RepeatFilter

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
# mallopt's M_ARENA_MAX, and the arenas a worker keeps (see limit_malloc_arenas).
M_ARENA_MAX = -8
MALLOC_ARENAS = 2
# A child's own exit codes, read by the supervisor (EX_TEMPFAIL and EX_CONFIG of sysexits.h).
STORE_FAILED = 75
START_FAILED = 78
# The most of a start failure's message a child leaves for the supervisor.
FAILURE_CHARS = 2000


class ExitCode(IntEnum):
    """What ``hive start`` exits with (documented in ``hive start --help`` and the README)."""

    ENDED = 0  # the batch ended: nothing pending or in flight anywhere
    ERROR = 1  # config, storage, a child that cannot start, a damaged store
    USAGE = 2  # a usage error (click's own)
    STOPPED = 3  # stopped by `hive stop` or a signal (Ctrl-C, SIGTERM), warm or at once
    MAX_PAGES = 4  # --max-pages reached
    NOTHING = 5  # nothing to crawl: no seeds on a fresh data directory, every seed refused


class Role(Protocol):
    stopping: bool

    def open(self) -> None: ...
    def loop_once(self, now: float) -> float: ...
    def wait(self, seconds: float) -> None: ...
    def close(self) -> None: ...
    @property
    def finished(self) -> bool: ...


class LockedError(HiveError):
    """Another process holds the lock."""


class Lock:
    """An exclusive flock held for the life of the process (released on any exit)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.read(self.fd, 32).decode(errors="replace").strip() or "another process"
            os.close(self.fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LockedError(f"{what} is in use by pid {holder} ({path})") from exc
            raise
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process; False where that is not possible.

    glibc gives threads arenas of their own, up to eight per core, and memory
    freed in one arena is reused only by the threads that land on it: a worker's
    fetch threads grew its anonymous memory by 55-83 MB an hour in a soak run,
    and 8 MB an hour with two arenas (MALLOC_ARENA_MAX=2). Call it before the
    threads start.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))


def raise_open_files() -> int:
    """Raise this process's soft open-file limit to its hard limit; returns the new limit.

    A worker holds a socket per idle keep-alive connection and per fetch in
    flight, plus LMDB, WARC and log files; the common soft default (1024) is
    the first limit a busy worker meets.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d: %s", soft, exc)
    return soft


def setup_logging(level: str, log_file: Path | None, role: str) -> None:
    """Log lines carry the time, the role (and worker id) and the level.

    ``log_file`` (``DataDir.log_file``, under ``DATA/logs``) gets everything at
    ``level``; the terminal only warnings and errors, so a foreground crawl's progress
    line stays readable.
    Repeated warnings of one kind are rate-limited (hive/logs.py).
    """
    stream = logging.StreamHandler(sys.stderr)
    stream.setLevel(logging.WARNING)
    handlers: list[logging.Handler] = [stream]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    repeats = RepeatFilter()
    for handler in handlers:
        handler.addFilter(repeats)
    logging.basicConfig(
        level=level.upper(), handlers=handlers, force=True,
        format=f"%(asctime)s {role} %(levelname)s %(name)s: %(message)s",
    )


@contextmanager
def spawn_quietly() -> Iterator[None]:
    """Start child processes inside this block with SIGINT ignored (see the module docstring).

    SIGINT is blocked while it is ignored, so a Ctrl-C that arrives meanwhile
    waits (Linux never discards a blocked signal) and reaches this process's
    own handler when the block ends. The mask is the calling thread's: a
    Python thread of the caller's that does not block SIGINT (with CURVE, the
    ZAP authenticator's) could take, and so drop, a Ctrl-C in that instant;
    libzmq's own threads block every signal.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _main_module_hidden():
            yield
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Children started inside this block by ``spawn`` do not import ``__main__`` again:
    multiprocessing names it to them by its ``__spec__`` (``python -m``) or else its
    ``__file__`` (a script), read as each child starts."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    path = main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__spec__ = spec
        if path is not None:
            main.__file__ = path


def child_signals() -> None:
    """In a child started by ``spawn_quietly``: SIGINT stays ignored; unblock it all the same."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


# Stops the role: (why, at once?). The default sets ``stopping`` and exits at once on the second.
StopHandler = Callable[[str, bool], None]


class Runner:
    """Drives a role until it is finished; see the module docstring for signals and errors.

    ``signals`` are the ones the role takes (children: SIGTERM only); ``stop``
    is told of each (why, at once?); without it the first sets ``stopping``
    and the second exits the process at once. ``failure_file`` receives the
    message of a failed ``open()``.
    """

    def __init__(
        self, role: Role, name: str, tick: Callable[[float], None] | None = None, *,
        signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
        stop: StopHandler | None = None, failure_file: Path | None = None,
    ) -> None:
        self.role = role
        self.name = name
        self.tick = tick
        self.takes = signals
        self.stop = stop
        self.failure_file = failure_file
        self.signals = 0

    def _signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            log.info("%s: %s, stopping warmly (again to stop at once)", self.name, name)
            if self.stop is not None:
                self.stop(f"stopped by {name}", False)
            else:
                self.role.stopping = True
        else:
            log.warning("%s: second signal (%s), stopping at once", self.name, name)
            if self.stop is not None:
                self.stop(f"stopped at once by a second signal ({name})", True)
            else:
                os._exit(1)

    def _open(self) -> bool:
        """Open the role; False (after logging and leaving its message) if it cannot start.

        Without a ``failure_file`` (the supervisor) the error goes to the caller."""
        if self.failure_file is None:
            self.role.open()
            return True
        try:
            self.role.open()
        except (HiveError, OSError) as exc:
            message = describe(exc)
        except Exception as exc:
            log.exception("%s: cannot start", self.name)
            message = f"{type(exc).__name__}: {exc}"
        else:
            return True
        log.error("%s: cannot start: %s", self.name, message)
        with contextlib.suppress(OSError):
            self.failure_file.write_text(message[:FAILURE_CHARS])
        return False

    def run(self) -> int:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        for signum in self.takes:
            signal.signal(signum, self._signal)
        if self.failure_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.failure_file.unlink()
        if not self._open():
            return START_FAILED
        code = 0
        try:
            while not self.role.finished:
                try:
                    wait = self.role.loop_once(time.time())
                except StoreError as exc:
                    log.error("%s: stopping: %s", self.name, exc)
                    if self.failure_file is not None:
                        with contextlib.suppress(OSError):
                            self.failure_file.write_text(str(exc)[:FAILURE_CHARS])
                    code = STORE_FAILED
                    break
                except Exception:
                    log.exception("%s: a turn failed; going on", self.name)
                    wait = 0.1
                if self.tick is not None:
                    self.tick(time.time())
                self.role.wait(wait)
        finally:
            try:
                self.role.close()
            except Exception:
                # After a storage error, closing may fail on the same full disk: the
                # exit code must still say why the process stopped.
                log.exception("%s: close failed", self.name)
                if code == 0:
                    raise
        return code


def describe(exc: BaseException) -> str:
    """One line for an error met at start: an OSError names its file, not its errno."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


def read_failure(path: Path) -> str:
    """A child's start failure message; empty if it left none."""
    try:
        return path.read_text(errors="replace")[:FAILURE_CHARS].strip()
    except OSError:
        return ""
