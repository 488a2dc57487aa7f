"""Every socket address of a hive, derived in one place, and the sockets that use them.

A hive's addresses follow from one recipe: a run directory for ``ipc://``
sockets (the default) or a host and base port for ``tcp://``, plus, when the
hive uses CURVE, its key directory. The recipe is recorded in ``hive.json``
(:meth:`Endpoints.to_dict`) and handed to every spawned child, so ``hive
status`` and restarted children find the sockets, and the keys, without
deriving anything again. Keys themselves never travel: only their directory.

Policy:

- **Short run directories.** A Unix socket path is at most 107 bytes on Linux
  (``sun_path`` is 108 with its NUL), and a data directory can be deeper than
  that, so sockets live in ``/tmp/hive-<uid>-<16 hex>``, the hex being mmh3
  of the resolved data directory: one data directory, one run directory, how
  ever it is spelled; two data directories, two run directories (a 64-bit hash,
  so collisions are not a practical concern; ``DataDir.socket_dir`` in
  hive/storage/datadir.py derives it). :class:`Endpoints` refuses a run
  directory whose longest address would not fit, rather than let a bind fail
  later with a less helpful error.
- **Private run directories.** ``/tmp`` is shared, so :func:`make_run_dir`
  creates the directory with mode 0700, narrows the mode of an existing one,
  and refuses one that is a symlink, not a directory, or owned by another
  user: someone else's directory could hold sockets that impersonate ours.
  The supervisor removes it when the hive exits (:func:`remove_run_dir`):
  only its sockets and then the directory itself, never anything else.
- **Loopback by default; beyond it, CURVE or nothing.** ``tcp://`` binds to
  127.0.0.1 unless a host is given. Ports: splitter ``base``, supervisor
  ``base+1``, control ``base+2``, worker ``i`` ``base+3+i``. The same address
  is bound and connected to, so a wildcard host (``*``) is refused. An
  endpoint is *local* when it is ``ipc://``, ``inproc://`` or ``tcp://`` on a
  loopback address or ``localhost`` (:func:`is_local`); :func:`pull` and
  :func:`push` refuse any other without CURVE, so no hive socket listens or
  talks beyond loopback in the clear. With keys in the recipe, :meth:`Endpoints.curve` gives a
  process its :class:`hive.curve.Curve`: :func:`pull` makes the socket a CURVE
  server (ZAP admitting only the hive's clients), :func:`push` a CURVE client.
- **Never block, never linger.** :func:`push` gives every sender the same
  PUSH socket: linger 0 (a stopping process does not wait on a dead peer) and
  an explicit send high-water mark (senders use NOBLOCK and handle a full one).
- **IPv6 when the address is.** A ``tcp://[...]`` socket gets ``zmq.IPV6``.
- **A cluster's workers are peers elsewhere.** A machine of a cluster
  (``hive start --cluster``, hive/procs/cluster_plan.py) derives its own
  splitter, supervisor and control addresses as above, but every worker's
  inbox, its own and the other machines', comes from the recipe's ``peers``
  table: the address and the CURVE server public key of each (public keys
  travel; secret ones never do), so a sender authenticates each machine it
  reaches by that machine's own server key.
"""

from __future__ import annotations

import ipaddress
import json
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import zmq

from hive.core.ring import MAX_PROCS
from hive.core.wire import MAX_FRAME_BYTES
from hive.errors import HiveError
from hive.procs.curve import Curve

SEND_HWM = 1000
# Above wire's largest frame: a batch frame at the wire limit still passes.
FRAME_SLACK = 64 * 1024
SUN_PATH_MAX = 107
LOOPBACK = "127.0.0.1"
MAX_PORT = 65535
_PORTS_BEFORE_WORKERS = 3
_LONGEST_NAME = f"worker-{MAX_PROCS - 1}.in"


class RunDirError(HiveError):
    """The run directory is unsafe to use (a symlink, not a directory, someone else's)."""


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


def remove_run_dir(path: Path) -> None:
    """Remove a run directory the hive made: its sockets, then itself (if then empty).

    Anything that is not a socket stays, and so does the directory with it; a
    symlink in the directory's place is left alone (it was never ours).
    """
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                os.unlink(entry.path)
        except OSError:
            continue
    try:
        os.rmdir(path)
    except OSError:
        return


def is_local(endpoint: str) -> bool:
    """True for ipc://, inproc:// and tcp:// on a loopback address or ``localhost``."""
    transport, sep, address = endpoint.partition("://")
    if not sep:
        return False
    if transport in ("ipc", "inproc"):
        return True
    if transport != "tcp":
        return False
    return _is_loopback(address.rpartition(":")[0].strip("[]"))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_keys(keys: Path | None) -> None:
    if keys is not None and not keys.is_absolute():
        raise ValueError(f"endpoints: key directory must be absolute, got {keys}")


class Endpoints:
    """The addresses of one hive: ``Endpoints(run_dir)`` for ipc, ``Endpoints.tcp(...)``.

    ``keys`` is the hive's CURVE key directory, or None for plain sockets.
    """

    __slots__ = ("transport", "run_dir", "host", "base_port", "keys", "peers")

    def __init__(self, run_dir: Path, keys: Path | None = None) -> None:
        if not run_dir.is_absolute():
            raise ValueError(f"endpoints: run directory must be absolute, got {run_dir}")
        longest = len(os.fsencode(run_dir / _LONGEST_NAME))
        if longest > SUN_PATH_MAX:
            raise ValueError(
                f"endpoints: run directory {run_dir} is too long for a socket path "
                f"({longest} > {SUN_PATH_MAX} bytes)"
            )
        _check_keys(keys)
        self.transport = "ipc"
        self.run_dir: Path | None = run_dir
        self.host = ""
        self.base_port = 0
        self.keys = keys
        self.peers: dict[int, tuple[str, str]] = {}

    @classmethod
    def tcp(cls, base_port: int, host: str = LOOPBACK, keys: Path | None = None,
            peers: Mapping[int, tuple[str, str]] | None = None) -> Endpoints:
        """Addresses on ``host`` from ``base_port`` up; a host with a colon is IPv6.

        ``peers`` (a cluster's machine) names every worker's inbox and its CURVE server
        public key (Z85 text): worker ``i``'s address is then ``peers[i][0]``."""
        if isinstance(base_port, bool) or not isinstance(base_port, int):
            raise ValueError(f"endpoints: base_port must be an integer, got {base_port!r}")
        if not 1 <= base_port <= MAX_PORT - _PORTS_BEFORE_WORKERS:
            raise ValueError(f"endpoints: base_port out of range: {base_port}")
        if not host or any(c in host for c in "/[] \t\n*"):
            raise ValueError(f"endpoints: bad host {host!r}")
        _check_keys(keys)
        self = cls.__new__(cls)
        self.transport = "tcp"
        self.run_dir = None
        self.host = host
        self.base_port = base_port
        self.keys = keys
        self.peers = {}
        for worker, (address, key) in (peers or {}).items():
            if not (isinstance(worker, int) and 0 <= worker < MAX_PROCS) or not (
                    isinstance(address, str) and address.startswith("tcp://")
                    and isinstance(key, str)):
                raise ValueError(f"endpoints: bad peer {worker!r}: {address!r}")
            self.peers[worker] = (address, key)
        if self.peers and keys is None:
            raise ValueError("endpoints: a cluster's peers need CURVE keys")
        return self

    @property
    def local(self) -> bool:
        """True when every address is ipc or on loopback: only then may sockets go plain."""
        return self.run_dir is not None or _is_loopback(self.host)

    def with_keys(self, keys: Path) -> Endpoints:
        """The same addresses, served and reached with the CURVE keys in ``keys``."""
        if self.run_dir is not None:
            return Endpoints(self.run_dir, keys)
        return Endpoints.tcp(self.base_port, self.host, keys, self.peers)

    def curve(self, ctx: zmq.Context[Any]) -> Curve | None:
        """This process's CURVE for the recipe's keys (None without keys)."""
        return Curve(ctx, self.keys) if self.keys is not None else None

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
        if self.peers:
            if worker_id not in self.peers:
                raise ValueError(f"endpoints: worker {worker_id} is no peer of this cluster")
            return self.peers[worker_id][0]
        port = self.base_port + _PORTS_BEFORE_WORKERS + worker_id
        if self.transport == "tcp" and port > MAX_PORT:
            raise ValueError(f"endpoints: no port for worker {worker_id} above {self.base_port}")
        return self._address(f"worker-{worker_id}.in", _PORTS_BEFORE_WORKERS + worker_id)

    def server_key(self, worker_id: int) -> bytes | None:
        """Worker ``worker_id``'s CURVE server public key when it is a cluster's peer (None:
        the hive's own server key)."""
        peer = self.peers.get(worker_id)
        return peer[1].encode() if peer is not None and peer[1] else None

    def to_dict(self) -> dict[str, Any]:
        """The recipe, for ``hive.json``; :meth:`from_dict` reverses it."""
        data: dict[str, Any]
        if self.run_dir is not None:
            data = {"transport": "ipc", "run_dir": str(self.run_dir)}
        else:
            data = {"transport": "tcp", "host": self.host, "base_port": self.base_port}
            if self.peers:
                data["peers"] = {str(i): list(peer) for i, peer in sorted(self.peers.items())}
        if self.keys is not None:
            data["keys"] = str(self.keys)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Endpoints:
        """Rebuild from :meth:`to_dict`; raises ValueError on anything else."""
        transport = data.get("transport")
        fields = set(data) - {"keys"}
        key_path = None
        if "keys" in data:
            keys = data["keys"]
            if not isinstance(keys, str) or not keys:
                raise ValueError(f"endpoints: bad key directory: {keys!r}")
            key_path = Path(keys)
        if transport == "ipc" and fields == {"transport", "run_dir"}:
            run_dir = data["run_dir"]
            if isinstance(run_dir, str) and run_dir:
                return cls(Path(run_dir), key_path)
        elif transport == "tcp" and fields - {"peers"} == {"transport", "host", "base_port"}:
            host, base_port = data["host"], data["base_port"]
            if isinstance(host, str) and isinstance(base_port, int):
                return cls.tcp(base_port, host, key_path, _peers(data.get("peers", {})))
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
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def __repr__(self) -> str:
        keys = f", keys=Path({str(self.keys)!r})" if self.keys is not None else ""
        if self.run_dir is not None:
            return f"Endpoints(Path({str(self.run_dir)!r}){keys})"
        return f"Endpoints.tcp({self.base_port}, {self.host!r}{keys})"


def _peers(data: object) -> dict[int, tuple[str, str]]:
    """A recorded peers table back as :meth:`Endpoints.tcp` takes it."""
    if not isinstance(data, Mapping):
        raise ValueError(f"endpoints: bad peers table: {data!r}")
    peers: dict[int, tuple[str, str]] = {}
    for worker, peer in data.items():
        if not (isinstance(worker, str) and worker.isdigit() and isinstance(peer, list)
                and len(peer) == 2 and all(isinstance(p, str) for p in peer)):
            raise ValueError(f"endpoints: bad peer {worker!r}: {peer!r}")
        peers[int(worker)] = (peer[0], peer[1])
    return peers


def use_ipv6(sock: zmq.Socket[Any], endpoint: str) -> None:
    """Set ``zmq.IPV6`` on ``sock`` if ``endpoint`` is an IPv6 ``tcp://[...]`` address.

    libzmq binds and connects IPv6 addresses only with it.
    """
    if endpoint.startswith("tcp://["):
        sock.setsockopt(zmq.IPV6, 1)


def _refuse_clear(endpoint: str, curve: Curve | None) -> None:
    if curve is None and not is_local(endpoint):
        raise ValueError(f"endpoints: {endpoint} is beyond loopback; it needs CURVE keys")


def _prepare(sock: zmq.Socket[bytes], endpoint: str) -> None:
    sock.setsockopt(zmq.LINGER, 0)
    use_ipv6(sock, endpoint)


def incoming(sock: zmq.Socket[bytes], limit: int) -> Iterator[list[bytes]]:
    """Up to ``limit`` messages already waiting on ``sock``, without blocking.

    Asks the socket whether a message waits before each receive: a NOBLOCK
    receive on an empty socket raises zmq.Again, and building that exception
    cost more than a busy worker's whole receive.
    """
    for _ in range(limit):
        events: int = sock.get(zmq.EVENTS)  # type: ignore[assignment]
        if not events & zmq.POLLIN:
            return
        try:
            yield sock.recv_multipart(flags=zmq.NOBLOCK)
        except zmq.Again:
            return


def push(
    ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str, curve: Curve | None = None,
    server: bytes | None = None,
) -> zmq.Socket[bytes]:
    """A PUSH socket connected to ``endpoint`` (linger 0, send high-water mark SEND_HWM).

    With ``curve`` it is a CURVE client holding the hive's client key (and
    expecting ``server``'s public key, by default the hive's own); without,
    ``endpoint`` must be local (``ValueError`` otherwise).
    """
    _refuse_clear(endpoint, curve)
    sock = ctx.socket(zmq.PUSH)
    _prepare(sock, endpoint)
    sock.setsockopt(zmq.SNDHWM, SEND_HWM)
    if curve is not None:
        curve.connect(sock, server)
    sock.connect(endpoint)
    return sock


def pull(
    ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str, curve: Curve | None = None,
    hwm: int | None = None, max_bytes: int = MAX_FRAME_BYTES + FRAME_SLACK,
) -> zmq.Socket[bytes]:
    """A PULL socket bound to ``endpoint`` (linger 0; receive high-water mark ``hwm``).

    A peer that sends a frame over ``max_bytes`` is disconnected by ZeroMQ before
    the frame is buffered (ZMQ_MAXMSGSIZE): what a message can cost its receiver is
    bounded by the socket, not by what the sender chose. With ``curve`` it is a
    CURVE server behind the process's ZAP authenticator; without, ``endpoint``
    must be local (``ValueError`` otherwise, before any bind).
    """
    _refuse_clear(endpoint, curve)
    sock = ctx.socket(zmq.PULL)
    try:
        _prepare(sock, endpoint)
        sock.setsockopt(zmq.MAXMSGSIZE, max_bytes)
        if hwm is not None:
            sock.setsockopt(zmq.RCVHWM, hwm)
        if curve is not None:
            curve.serve(sock)
        sock.bind(endpoint)
    except BaseException:
        sock.close(linger=0)
        raise
    return sock
