"""The control plane: the supervisor's control socket and the CLI's client for it.

The supervisor owns a :class:`ControlServer`; ``hive status | stop | add | deny``
each make one :class:`ControlClient` call. The protocol is JSON over ZeroMQ,
never pickle: a request is one frame holding a JSON object ``{"cmd": str,
...args}``, and the reply is one frame holding ``{"ok": true, "result": ...}``
or ``{"ok": false, "error": "message"}``.

Server policy: the server is a ROUTER with ``linger=0`` that answers every
request it can address, and nothing a peer sends can take it down. Malformed
frames, oversized or non-UTF-8 bodies, bad JSON, a missing or unknown ``cmd``,
bad arguments (a handler's ``ValueError``/``TypeError``/``KeyError``) and any
other exception inside a handler are logged and answered with an error; only
``BaseException`` outside ``Exception`` (``KeyboardInterrupt``, ``SystemExit``)
passes through. Both REQ clients (ROUTER sees ``identity, "", body``) and
DEALER clients (``identity, body``) are served; the reply mirrors the envelope.
The size cap is checked after a message arrives, so an oversized request is
answered too.

Client policy: each call uses a fresh DEALER socket with ``linger=0``, closed
when the call ends, so a call that timed out cannot leave a stale reply for the
next one. Every failure — an error answer, a garbled answer or no answer within
the timeout — raises :class:`hive.errors.ControlError`.

Security: ``ipc://``, ``inproc://`` and loopback ``tcp://`` endpoints are
trusted as local. Any other endpoint is refused unless CURVE is enabled with a
key directory from :func:`make_keys`; the server then encrypts and a ZAP
authenticator admits only the client public keys in ``<dir>/clients``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import zmq
import zmq.auth
import zmq.auth.thread

from hive.errors import ControlError

__all__ = [
    "ControlClient",
    "ControlKeys",
    "ControlServer",
    "Handler",
    "is_local",
    "make_keys",
]

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], object]
"""Takes the whole request object (``cmd`` included); its return value is the result."""

SERVER_NAME = "server"
CLIENT_NAME = "client"
CLIENTS_SUBDIR = "clients"

# Peer-supplied text echoed in an error reply or a log line is cut to this length.
_SHOWN = 60


class _BadRequest(Exception):
    """A request the server refuses before any handler runs; the message is the reply."""


# --------------------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True)
class ControlKeys:
    """Where :func:`make_keys` wrote each CURVE key file."""

    directory: Path
    server_public: Path
    server_secret: Path
    client_public: Path
    client_secret: Path
    clients_dir: Path


def _key_paths(directory: Path) -> ControlKeys:
    return ControlKeys(
        directory=directory,
        server_public=directory / f"{SERVER_NAME}.key",
        server_secret=directory / f"{SERVER_NAME}.key_secret",
        client_public=directory / f"{CLIENT_NAME}.key",
        client_secret=directory / f"{CLIENT_NAME}.key_secret",
        clients_dir=directory / CLIENTS_SUBDIR,
    )


def make_keys(directory: Path) -> ControlKeys:
    """Write a server and a client CURVE key pair into ``directory``.

    The directory (and ``clients/``, which holds the client public keys the
    server admits) is mode 0700 and every key file 0600. Existing keys are
    never overwritten (``FileExistsError``): replacing them would lock out
    every client that holds the old ones.
    """
    keys = _key_paths(directory)
    existing = [p for p in (keys.server_secret, keys.client_secret) if p.exists()]
    if existing:
        raise FileExistsError(f"CURVE keys already exist: {existing[0]}")
    for folder in (directory, keys.clients_dir):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
    # The directory is private before any file exists, so the umask never exposes a key.
    zmq.auth.create_certificates(directory, SERVER_NAME)
    zmq.auth.create_certificates(directory, CLIENT_NAME)
    admitted = keys.clients_dir / keys.client_public.name
    admitted.write_bytes(keys.client_public.read_bytes())
    for path in (keys.server_public, keys.server_secret, keys.client_public,
                 keys.client_secret, admitted):
        path.chmod(0o600)
    return keys


def _load_pair(path: Path) -> tuple[bytes, bytes]:
    public, secret = zmq.auth.load_certificate(path)
    if secret is None:
        raise ValueError(f"{path} holds no secret key")
    return public, secret


def is_local(endpoint: str) -> bool:
    """True for ipc://, inproc:// and tcp:// on a loopback address or ``localhost``."""
    transport, sep, address = endpoint.partition("://")
    if not sep:
        return False
    if transport in ("ipc", "inproc"):
        return True
    if transport != "tcp":
        return False
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _encode(reply: Mapping[str, object]) -> bytes:
    return json.dumps(reply, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _error(message: str) -> bytes:
    return _encode({"ok": False, "error": message})


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


# ------------------------------------------------------------------- server side


class ControlServer:
    """The supervisor's control socket: a ROUTER that answers every request.

    The owner polls :attr:`socket` with its other sockets and calls
    :meth:`handle_ready` when it is readable. ``endpoint`` may use a wildcard
    port (``tcp://127.0.0.1:*``); :attr:`endpoint` is then the bound address.
    """

    def __init__(
        self,
        ctx: zmq.Context[Any],
        endpoint: str,
        handlers: Mapping[str, Handler],
        max_bytes: int = 1 << 20,
        curve_dir: Path | None = None,
    ) -> None:
        if curve_dir is None and not is_local(endpoint):
            raise ValueError(
                f"control endpoint {endpoint} is not local; CURVE keys (curve_dir) are required"
            )
        self._handlers = dict(handlers)
        self._max_bytes = max_bytes
        self._requests = 0
        self._errors = 0
        self._failures = 0
        self._auth: zmq.auth.thread.ThreadAuthenticator | None = None
        self.socket: zmq.Socket[bytes] = ctx.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        try:
            if curve_dir is not None:
                self._enable_curve(ctx, curve_dir)
            self.socket.bind(endpoint)
        except BaseException:
            self.close()
            raise
        self.endpoint: str = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        log.info("control: listening on %s%s", self.endpoint, " (CURVE)" if curve_dir else "")

    def _enable_curve(self, ctx: zmq.Context[Any], curve_dir: Path) -> None:
        keys = _key_paths(curve_dir)
        public, secret = _load_pair(keys.server_secret)
        if not keys.clients_dir.is_dir():
            raise FileNotFoundError(f"no client public keys directory: {keys.clients_dir}")
        self._auth = zmq.auth.thread.ThreadAuthenticator(ctx)
        self._auth.start()
        self._auth.configure_curve(domain="*", location=str(keys.clients_dir))
        self.socket.curve_secretkey = secret
        self.socket.curve_publickey = public
        self.socket.curve_server = True

    def handle_ready(self) -> int:
        """Answer every request already queued, without blocking; return how many."""
        handled = 0
        while True:
            try:
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return handled
            handled += 1
            self._requests += 1
            envelope, payload, ok = self._answer(frames)
            if not ok:
                self._errors += 1
            self.socket.send_multipart([*envelope, payload])

    def _answer(self, frames: list[bytes]) -> tuple[list[bytes], bytes, bool]:
        """Split the envelope off ``frames``; return it, the encoded reply and its ``ok``."""
        # REQ peers put an empty delimiter after the identity; DEALER peers may not.
        cut = 2 if len(frames) >= 3 and frames[1] == b"" else 1
        envelope, body = frames[:cut], frames[cut:]
        try:
            request = self._parse(body)
        except _BadRequest as exc:
            log.warning("control: bad request: %s", exc)
            return envelope, _error(str(exc)), False
        payload, ok = self._dispatch(request)
        return envelope, payload, ok

    def _parse(self, body: list[bytes]) -> dict[str, Any]:
        if len(body) != 1:
            raise _BadRequest(f"request must be one frame, got {len(body)}")
        data = body[0]
        if len(data) > self._max_bytes:
            raise _BadRequest(f"request of {len(data)} bytes exceeds {self._max_bytes} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _BadRequest(f"request is not UTF-8: {exc.reason} at byte {exc.start}") from None
        try:
            request = json.loads(text)
        except RecursionError:
            raise _BadRequest("request is not JSON: nested too deeply") from None
        except ValueError as exc:
            raise _BadRequest(f"request is not JSON: {_shown(str(exc))}") from None
        if not isinstance(request, dict):
            raise _BadRequest(f"request must be a JSON object, got {type(request).__name__}")
        cmd = request.get("cmd")
        if not isinstance(cmd, str):
            raise _BadRequest("request needs a string 'cmd'")
        if cmd not in self._handlers:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise _BadRequest(f"unknown command {_shown(cmd)!r} (known: {known})")
        return request

    def _dispatch(self, request: dict[str, Any]) -> tuple[bytes, bool]:
        cmd: str = request["cmd"]
        try:
            result = self._handlers[cmd](request)
        except KeyError as exc:
            name = exc.args[0] if exc.args else "?"
            log.warning("control: %s: missing argument %r", cmd, name)
            return _error(f"{cmd}: missing argument {name!r}"), False
        except (ValueError, TypeError) as exc:
            log.warning("control: %s: bad arguments: %s", cmd, exc)
            return _error(f"{cmd}: {exc}"), False
        except Exception as exc:
            log.exception("control: %s failed", cmd)
            self._failures += 1
            return _error(f"{cmd} failed: {type(exc).__name__}: {exc}"), False
        try:
            return _encode({"ok": True, "result": result}), True
        except (TypeError, ValueError) as exc:
            log.error("control: %s returned a result that is not JSON: %s", cmd, exc)
            self._failures += 1
            return _error(f"{cmd} failed: result is not JSON: {exc}"), False

    def stats(self) -> dict[str, int]:
        """Counters: requests answered, error replies, and internal failures among them."""
        return {
            "control/requests": self._requests,
            "control/errors": self._errors,
            "control/failures": self._failures,
        }

    def close(self) -> None:
        """Close the socket and stop the authenticator; the context stays the owner's."""
        self.socket.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
            self._auth = None

    def __enter__(self) -> ControlServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# ------------------------------------------------------------------- client side


class ControlClient:
    """One request, one reply, a timeout: what ``hive status | stop | add | deny`` use.

    With ``curve_dir`` the client reads its key pair (``client.key_secret``) and
    the server's public key (``server.key``) there; a missing or unreadable key
    file raises ``OSError``/``ValueError`` at construction, not at the first call.
    """

    def __init__(self, endpoint: str, timeout: float = 5.0, curve_dir: Path | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._curve: tuple[bytes, bytes, bytes] | None = None
        if curve_dir is not None:
            keys = _key_paths(curve_dir)
            public, secret = _load_pair(keys.client_secret)
            server_public, _ = zmq.auth.load_certificate(keys.server_public)
            self._curve = (public, secret, server_public)
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()

    def call(self, cmd: str, **args: object) -> object:
        """Send ``{"cmd": cmd, **args}`` and return the result, or raise ControlError."""
        payload = json.dumps({**args, "cmd": cmd}, allow_nan=False).encode("utf-8")
        sock = self._ctx.socket(zmq.DEALER)
        try:
            sock.setsockopt(zmq.LINGER, 0)
            if self._curve is not None:
                sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = self._curve
            sock.connect(self.endpoint)
            # A connected DEALER queues the request even before the server is up.
            try:
                sock.send(payload, zmq.NOBLOCK)
            except zmq.Again:
                raise ControlError(f"cannot send to {self.endpoint}") from None
            if not sock.poll(int(self.timeout * 1000), zmq.POLLIN):
                raise ControlError(
                    f"no answer from {self.endpoint} within {self.timeout:g}s"
                    " (is the hive running?)"
                )
            frames = sock.recv_multipart()
        finally:
            sock.close(linger=0)
        return self._result(frames)

    def _result(self, frames: list[bytes]) -> object:
        try:
            if len(frames) != 1:
                raise ValueError(f"{len(frames)} frames")
            reply = json.loads(frames[0].decode("utf-8"))
            if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
                raise ValueError("not a reply envelope")
        except ValueError as exc:
            raise ControlError(f"bad answer from {self.endpoint}: {exc}") from None
        if not reply["ok"]:
            raise ControlError(str(reply.get("error", "unknown error")))
        return reply.get("result")

    def close(self) -> None:
        """Release the client's context (no socket outlives a call)."""
        self._ctx.term()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
