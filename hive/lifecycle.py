"""Process lifecycle shared by the hive's roles: locks, the run loop, signals, logging.

Every role (splitter, worker process, supervisor) has ``open()``,
``loop_once(now) -> seconds to wait``, ``wait(seconds)``, ``close()``, a
``stopping`` flag and a ``finished`` property. ``Runner`` drives it: the first
SIGINT/SIGTERM stops it warmly (intake stops, in-flight work finishes, state
commits), a second stops it at once; an exception in one turn is logged and
the loop goes on, except a StoreError (the disk is full or the store is
broken), which stops the process cleanly with its message and exit code
``STORE_FAILED``, so the supervisor stops the hive instead of restarting it. ``faulthandler``
dumps every thread's stack on SIGUSR1.

``Lock`` is a flock on a file: one hive per data directory, one process per
worker directory. ``die_with_parent`` asks Linux to kill a child when the
supervisor dies (PR_SET_PDEATHSIG), so no orphan outlives it to race a restart.
"""

from __future__ import annotations

import ctypes
import errno
import faulthandler
import fcntl
import json
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from hive.errors import HiveError, StoreError
from hive.logs import RepeatFilter

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
# mallopt's M_ARENA_MAX, and the arenas a worker keeps (see limit_malloc_arenas).
M_ARENA_MAX = -8
MALLOC_ARENAS = 2
STORE_FAILED = 75


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


def setup_logging(level: str, directory: Path | None, role: str) -> None:
    """Log lines carry the time, the role (and worker id) and the level.

    The file under ``DATA/logs`` gets everything at ``level``; the terminal only
    warnings and errors, so a foreground crawl's progress line stays readable.
    Repeated warnings of one kind are rate-limited (hive/logs.py).
    """
    stream = logging.StreamHandler(sys.stderr)
    stream.setLevel(logging.WARNING)
    handlers: list[logging.Handler] = [stream]
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(directory / f"{role}.log"))
    repeats = RepeatFilter()
    for handler in handlers:
        handler.addFilter(repeats)
    logging.basicConfig(
        level=level.upper(), handlers=handlers, force=True,
        format=f"%(asctime)s {role} %(levelname)s %(name)s: %(message)s",
    )


class Runner:
    """Drives a role until it is finished; see the module docstring for signals and errors."""

    def __init__(
        self, role: Role, name: str, tick: Callable[[float], None] | None = None
    ) -> None:
        self.role = role
        self.name = name
        self.tick = tick
        self.signals = 0

    def _signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals == 1:
            log.info("%s: %s, stopping warmly (again to stop at once)", self.name,
                     signal.Signals(signum).name)
            self.role.stopping = True
        else:
            log.warning("%s: second signal, stopping at once", self.name)
            os._exit(1)

    def run(self) -> int:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        signal.signal(signal.SIGTERM, self._signal)
        signal.signal(signal.SIGINT, self._signal)
        self.role.open()
        code = 0
        try:
            while not self.role.finished:
                try:
                    wait = self.role.loop_once(time.time())
                except StoreError as exc:
                    log.error("%s: stopping: %s", self.name, exc)
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


def worker_dir(data_dir: Path, worker_id: int) -> Path:
    """Worker ``worker_id``'s directory in ``data_dir``: its LMDB store, WARC files and logs."""
    return data_dir / f"worker-{worker_id:02d}"


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """The running (or last) hive's ``hive.json`` in ``data_dir``; None if there is none.

    A file that is not a JSON object raises StoreError naming it.
    """
    path = data_dir / "hive.json"
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path} is damaged: {exc}") from exc
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise StoreError(f"{path} is damaged: not JSON ({exc})") from exc
    if not isinstance(state, dict):
        raise StoreError(f"{path} is damaged: not a JSON object")
    return state
