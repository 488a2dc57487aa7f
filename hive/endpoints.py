"""Every socket address of a hive, derived in one place.

A hive's addresses follow from one recipe: a run directory for ``ipc://``
sockets (the default) or a host and base port for ``tcp://``. The recipe is
recorded in ``hive.json`` (:meth:`Endpoints.to_dict`) so ``hive status`` and
restarted children find the sockets without deriving anything again.

Policy:

- **Short run directories.** A Unix socket path is at most 107 bytes on Linux
  (``sun_path`` is 108 with its NUL), and a data directory can be deeper than
  that, so sockets live in ``/tmp/hive-<uid>-<16 hex>``, the hex being mmh3
  of the resolved data directory: one data directory, one run directory, how
  ever it is spelled; two data directories, two run directories (a 64-bit hash,
  so collisions are not a practical concern). :class:`Endpoints` refuses a run
  directory whose longest address would not fit, rather than let a bind fail
  later with a less helpful error.
- **Private run directories.** ``/tmp`` is shared, so :func:`make_run_dir`
  creates the directory with mode 0700, narrows the mode of an existing one,
  and refuses one that is a symlink, not a directory, or owned by another
  user: someone else's directory could hold sockets that impersonate ours.
- **Loopback by default.** ``tcp://`` binds to 127.0.0.1 unless a host is
  given. Ports: splitter ``base``, supervisor ``base+1``, control ``base+2``,
  worker ``i`` ``base+3+i``.
- **Never block, never linger.** :func:`push` gives every sender the same
  PUSH socket: linger 0 (a stopping process does not wait on a dead peer) and
  an explicit send high-water mark (senders use NOBLOCK and handle a full one).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import mmh3
import zmq

from hive.errors import HiveError
from hive.ring import MAX_PROCS

SEND_HWM = 1000
SUN_PATH_MAX = 107
RUN_BASE = Path("/tmp")
LOOPBACK = "127.0.0.1"
MAX_PORT = 65535
_PORTS_BEFORE_WORKERS = 3
_LONGEST_NAME = f"worker-{MAX_PROCS - 1}.in"


class RunDirError(HiveError):
    """The run directory is unsafe to use (a symlink, not a directory, someone else's)."""


def run_dir_for(data_dir: Path, base: Path = RUN_BASE) -> Path:
    """The run directory for ``data_dir``: short, per user, the same for every spelling."""
    digest: int = mmh3.hash64(os.fsencode(data_dir.resolve()), signed=False)[0]
    return base / f"hive-{os.getuid()}-{digest:016x}"


def make_run_dir(path: Path) -> Path:
    """Create ``path`` (mode 0700) or make an existing one safe; return it.

    The parent must exist. Raises :class:`RunDirError` for a symlink, a
    non-directory or a directory owned by another user.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise RunDirError(f"run directory {path} is a symlink; refusing it") from None
    try:
        # O_NOFOLLOW: the checks below are about the directory itself, even if
        # the path was swapped for a symlink since the lstat.
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except NotADirectoryError:
        raise RunDirError(f"run directory {path} is not a directory; refusing it") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            raise RunDirError(f"run directory {path} belongs to uid {info.st_uid}; refusing it")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


class Endpoints:
    """The addresses of one hive: ``Endpoints(run_dir)`` for ipc, ``Endpoints.tcp(...)``."""

    __slots__ = ("transport", "run_dir", "host", "base_port")

    def __init__(self, run_dir: Path) -> None:
        if not run_dir.is_absolute():
            raise ValueError(f"endpoints: run directory must be absolute, got {run_dir}")
        longest = len(os.fsencode(run_dir / _LONGEST_NAME))
        if longest > SUN_PATH_MAX:
            raise ValueError(
                f"endpoints: run directory {run_dir} is too long for a socket path "
                f"({longest} > {SUN_PATH_MAX} bytes)"
            )
        self.transport = "ipc"
        self.run_dir: Path | None = run_dir
        self.host = ""
        self.base_port = 0

    @classmethod
    def tcp(cls, base_port: int, host: str = LOOPBACK) -> Endpoints:
        """Addresses on ``host`` from ``base_port`` up; a host with a colon is IPv6.

        The role that binds or connects an IPv6 address must set ``zmq.IPV6``.
        """
        if isinstance(base_port, bool) or not isinstance(base_port, int):
            raise ValueError(f"endpoints: base_port must be an integer, got {base_port!r}")
        if not 1 <= base_port <= MAX_PORT - _PORTS_BEFORE_WORKERS:
            raise ValueError(f"endpoints: base_port out of range: {base_port}")
        if not host or any(c in host for c in "/[] \t\n"):
            raise ValueError(f"endpoints: bad host {host!r}")
        self = cls.__new__(cls)
        self.transport = "tcp"
        self.run_dir = None
        self.host = host
        self.base_port = base_port
        return self

    @property
    def splitter(self) -> str:
        """Where the splitter PULLs batches and acks."""
        return self._address("splitter.in", 0)

    @property
    def supervisor(self) -> str:
        """Where the supervisor PULLs stats."""
        return self._address("supervisor.in", 1)

    @property
    def control(self) -> str:
        """The supervisor's ROUTER for ``hive status | stop | add | deny``."""
        return self._address("control", 2)

    def worker(self, worker_id: int) -> str:
        """Where worker ``worker_id`` PULLs admissions, acks and commands."""
        if isinstance(worker_id, bool) or not isinstance(worker_id, int):
            raise ValueError(f"endpoints: worker id must be an integer, got {worker_id!r}")
        if not 0 <= worker_id < MAX_PROCS:
            raise ValueError(f"endpoints: worker id out of range: {worker_id}")
        port = self.base_port + _PORTS_BEFORE_WORKERS + worker_id
        if self.transport == "tcp" and port > MAX_PORT:
            raise ValueError(f"endpoints: no port for worker {worker_id} above {self.base_port}")
        return self._address(f"worker-{worker_id}.in", _PORTS_BEFORE_WORKERS + worker_id)

    def to_dict(self) -> dict[str, str | int]:
        """The recipe, for ``hive.json``; :meth:`from_dict` reverses it."""
        if self.run_dir is not None:
            return {"transport": "ipc", "run_dir": str(self.run_dir)}
        return {"transport": "tcp", "host": self.host, "base_port": self.base_port}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Endpoints:
        """Rebuild from :meth:`to_dict`; raises ValueError on anything else."""
        transport = data.get("transport")
        if transport == "ipc" and set(data) == {"transport", "run_dir"}:
            run_dir = data["run_dir"]
            if isinstance(run_dir, str) and run_dir:
                return cls(Path(run_dir))
        elif transport == "tcp" and set(data) == {"transport", "host", "base_port"}:
            host, base_port = data["host"], data["base_port"]
            if isinstance(host, str) and isinstance(base_port, int):
                return cls.tcp(base_port, host)
        raise ValueError(f"endpoints: not a recorded recipe: {dict(data)!r}")

    def _address(self, name: str, offset: int) -> str:
        if self.run_dir is not None:
            return f"ipc://{self.run_dir / name}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.base_port + offset}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Endpoints):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.to_dict().items()))

    def __repr__(self) -> str:
        if self.run_dir is not None:
            return f"Endpoints(Path({str(self.run_dir)!r}))"
        return f"Endpoints.tcp({self.base_port}, {self.host!r})"


def push(ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> zmq.Socket[bytes]:
    """A PUSH socket connected to ``endpoint`` (linger 0, send high-water mark SEND_HWM)."""
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, SEND_HWM)
    sock.connect(endpoint)
    return sock
