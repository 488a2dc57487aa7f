"""CURVE for a hive whose sockets reach beyond loopback: its keys, its servers, its clients.

A hive's sockets use ZeroMQ CURVE (encryption and authentication) when its
endpoints recipe names a key directory (:attr:`hive.procs.endpoints.Endpoints.keys`).
The supervisor decides (``hive.curve`` in conf/default.toml): ``auto`` uses
CURVE exactly when an endpoint is beyond loopback, ``always`` on every
transport. ``ipc://`` and loopback ``tcp://`` stay plain under ``auto``, so the
default path costs nothing.

Policy:

- **One hive, two key pairs, in the data directory.** ``DATA/keys/`` holds a
  server pair (every socket that binds: the splitter's, the supervisor's and
  each worker's PULL, the control ROUTER) and a client pair (every socket that
  connects: the PUSH senders, ``hive status | stop | add | deny``), plus
  ``clients/``, the client public keys the hive admits. :func:`ensure_keys`
  makes them on the first start that needs them and reuses them after; it
  never replaces them, since that would lock out every client holding the old
  ones. To admit another client (say, a CLI on another machine), copy its
  ``*.key`` public certificate into ``clients/``; a start reads that directory.
- **Private or refused.** The directories are mode 0700 and every key file
  0600, written in a private staging directory renamed into place, so a crash
  never leaves half a key set. Keys found group- or world-accessible, owned by
  someone else or incomplete are refused with :class:`KeysError` (as ssh
  refuses a private key others can read) rather than quietly repaired: a key
  others could read may already be someone else's.
- **Keys never travel.** Spawned children get the key directory's path in the
  endpoints recipe and read the files themselves; no key crosses a socket or a
  pickle.
- **ZAP, fail closed.** CURVE alone admits any client that knows the server's
  public key. So each process that binds runs one ZAP authenticator (a
  :class:`zmq.auth.thread.ThreadAuthenticator` on its context, started before
  its first CURVE bind) that admits only the public keys in ``clients/``, and
  every CURVE server socket sets ``ZAP_ENFORCE_DOMAIN``: should the
  authenticator be gone, the socket refuses every client instead of admitting
  all. A refused peer's messages are never delivered; it costs the hive a
  handshake, nothing else.
- **Connecting sockets authenticate the server too**: a client holds the
  server's public key, so an impostor bound to the hive's address learns
  nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq

from hive.errors import HiveError

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

__all__ = [
    "ClientKeys",
    "Curve",
    "KeyFiles",
    "KeysError",
    "ensure_keys",
    "make_keys",
]

log = logging.getLogger(__name__)

SERVER_NAME = "server"
CLIENT_NAME = "client"
CLIENTS_SUBDIR = "clients"
ZAP_DOMAIN = "hive"
_PRIVATE_BITS = 0o077


class KeysError(HiveError):
    """The hive's CURVE keys are missing, incomplete, unreadable or open to others."""


@dataclass(frozen=True, slots=True)
class KeyFiles:
    """Where each CURVE key file of a key directory is."""

    directory: Path
    server_public: Path
    server_secret: Path
    client_public: Path
    client_secret: Path
    clients_dir: Path

    @classmethod
    def at(cls, directory: Path) -> KeyFiles:
        return cls(
            directory=directory,
            server_public=directory / f"{SERVER_NAME}.key",
            server_secret=directory / f"{SERVER_NAME}.key_secret",
            client_public=directory / f"{CLIENT_NAME}.key",
            client_secret=directory / f"{CLIENT_NAME}.key_secret",
            clients_dir=directory / CLIENTS_SUBDIR,
        )


def make_keys(directory: Path) -> KeyFiles:
    """Write a server and a client key pair into a new ``directory``; return where.

    ``directory`` must not exist (``FileExistsError``); its parent is created.
    The keys are written in a private staging directory next to it and renamed
    into place, so ``directory`` either holds a whole key set or does not exist.
    """
    if directory.exists() or directory.is_symlink():
        raise FileExistsError(f"CURVE key directory already exists: {directory}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    # mkdtemp makes the directory 0700, so no key is ever readable by others, whatever the umask.
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        files = KeyFiles.at(staging)
        files.clients_dir.mkdir(mode=0o700)
        files.clients_dir.chmod(0o700)
        # Imported here, as in the functions below: only a hive that uses CURVE pays for
        # zmq.auth and the asyncio it brings.
        from zmq.auth import create_certificates

        create_certificates(staging, SERVER_NAME)
        create_certificates(staging, CLIENT_NAME)
        admitted = files.clients_dir / files.client_public.name
        admitted.write_bytes(files.client_public.read_bytes())
        for path in (files.server_public, files.server_secret, files.client_public,
                     files.client_secret, admitted):
            path.chmod(0o600)
        staging.rename(directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return KeyFiles.at(directory)


def ensure_keys(directory: Path) -> KeyFiles:
    """The hive's keys in ``directory``: made if it does not exist, else checked and reused.

    Raises :class:`KeysError` for a key set that is incomplete, owned by
    someone else or open to other users; the message says how to fix it.
    """
    if not directory.exists() and not directory.is_symlink():
        files = make_keys(directory)
        log.info("CURVE keys created in %s", directory)
        return files
    files = KeyFiles.at(directory)
    for folder in (files.directory, files.clients_dir):
        _check_private(folder, files.directory, want_dir=True)
    for path in (files.server_secret, files.client_secret):
        _check_private(path, files.directory, want_dir=False)
    for path in (files.server_public, files.client_public):
        if not path.is_file():
            raise KeysError(f"incomplete CURVE keys: {path} is missing; {_remake(files.directory)}")
    _check_admits(files.clients_dir)
    log.info("CURVE keys reused from %s", directory)
    return files


#: A cluster machine's client certificate in another machine's clients directory.
MACHINE_CERT = "machine-{}.key"


def admit_machines(clients_dir: Path, certs: dict[str, str]) -> None:
    """Admit exactly the cluster machines ``certs`` names (machine name -> its client's
    public certificate): each one's certificate written (replaced if it changed: a machine
    that made new keys), and a machine no longer in the cluster (it left by a resize) no
    longer admitted. The hive's own clients (``hive.key``) are untouched."""
    wanted = {MACHINE_CERT.format(name): cert for name, cert in certs.items()}
    for path in clients_dir.glob(MACHINE_CERT.format("*")):
        if path.name not in wanted:
            path.unlink()
    for name, cert in wanted.items():
        path = clients_dir / name
        if not path.exists() or path.read_text() != cert:
            staged = clients_dir / f".{name}.tmp"
            staged.write_text(cert)
            staged.chmod(0o600)
            staged.replace(path)


def _remake(directory: Path) -> str:
    return (f"delete {directory} to have the next start make new keys "
            "(every client must then get the new ones)")


def _check_private(path: Path, directory: Path, *, want_dir: bool) -> None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise KeysError(f"incomplete CURVE keys: {path} is missing; {_remake(directory)}") from None
    kind_ok = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        kind = "a directory" if want_dir else "a file"
        raise KeysError(f"CURVE keys: {path} is not {kind}; {_remake(directory)}")
    if info.st_uid != os.getuid():
        raise KeysError(f"CURVE keys: {path} belongs to uid {info.st_uid}; refusing it")
    mode = stat.S_IMODE(info.st_mode)
    if mode & _PRIVATE_BITS:
        raise KeysError(
            f"CURVE keys: {path} is open to other users (mode {mode:04o}); if nobody else "
            f"could have read it, chmod go-rwx it, else {_remake(directory)}"
        )


def _check_admits(clients_dir: Path) -> None:
    if not any(clients_dir.glob("*.key")):
        raise KeysError(f"CURVE keys: {clients_dir} holds no client public key; nobody could "
                        "connect")


def _load_pair(path: Path) -> tuple[bytes, bytes]:
    """The (public, secret) key pair of a secret certificate file."""
    from zmq.auth import load_certificate

    try:
        public, secret = load_certificate(path)
    except (OSError, ValueError) as exc:
        raise KeysError(f"cannot read CURVE key {path}: {exc}") from exc
    if secret is None:
        raise KeysError(f"{path} holds no secret key")
    return public, secret


def _load_public(path: Path) -> bytes:
    from zmq.auth import load_certificate

    try:
        public, _ = load_certificate(path)
    except (OSError, ValueError) as exc:
        raise KeysError(f"cannot read CURVE key {path}: {exc}") from exc
    return public


@dataclass(frozen=True, slots=True)
class ClientKeys:
    """What a connecting socket needs: the client pair and the server's public key."""

    public: bytes
    secret: bytes = field(repr=False)
    server: bytes

    @classmethod
    def load(cls, directory: Path) -> ClientKeys:
        """Read them from a key directory; :class:`KeysError` if a file is missing or bad."""
        files = KeyFiles.at(directory)
        public, secret = _load_pair(files.client_secret)
        return cls(public, secret, _load_public(files.server_public))

    def apply(self, sock: zmq.Socket[Any]) -> None:
        """Make ``sock`` a CURVE client of the hive; call before ``connect``."""
        sock.curve_publickey = self.public
        sock.curve_secretkey = self.secret
        sock.curve_serverkey = self.server


class Curve:
    """One process's CURVE: the hive's keys, and the ZAP authenticator of its context.

    Read every key at construction (:class:`KeysError` if one is missing or
    bad). :meth:`serve` starts the authenticator on first use; the owner calls
    :meth:`close` after closing its sockets and before terminating the context.
    """

    def __init__(self, ctx: zmq.Context[Any], directory: Path) -> None:
        files = KeyFiles.at(directory)
        self.directory = directory
        self.client = ClientKeys.load(directory)
        self._public, self._secret = _load_pair(files.server_secret)
        _check_admits(files.clients_dir)
        self._clients = files.clients_dir
        self._ctx = ctx
        self._auth: ThreadAuthenticator | None = None

    def serve(self, sock: zmq.Socket[Any]) -> None:
        """Make ``sock`` a CURVE server admitting only the hive's clients; call before ``bind``."""
        if self._auth is None:
            from zmq.auth.thread import ThreadAuthenticator

            auth = ThreadAuthenticator(self._ctx)
            auth.start()
            auth.configure_curve(domain=ZAP_DOMAIN, location=str(self._clients))
            self._auth = auth
        sock.zap_domain = ZAP_DOMAIN.encode()
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        sock.curve_secretkey = self._secret
        sock.curve_publickey = self._public
        sock.curve_server = True

    def connect(self, sock: zmq.Socket[Any], server: bytes | None = None) -> None:
        """Make ``sock`` a CURVE client of the hive; call before ``connect``. ``server`` is
        the public key of the server it reaches when not the hive's own (another machine
        of a cluster)."""
        self.client.apply(sock)
        if server is not None:
            sock.curve_serverkey = server

    def close(self) -> None:
        """Stop the authenticator (a server socket left open then refuses everyone)."""
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
