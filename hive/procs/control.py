"""The control plane: the supervisor's control socket and the CLI's client for it.

The supervisor owns a :class:`ControlServer`; ``hive status | stop | add | deny``
talk to it through a :class:`ControlClient` (stop, add and deny then poll it
for what they wait for). The protocol is JSON over ZeroMQ,
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
A frame larger than the size cap (plus room for the envelope) disconnects its
sender inside ZeroMQ (``ZMQ_MAXMSGSIZE``) before it is buffered, so no request
can make the supervisor hold more than that; a request just over the cap is
answered with an error, and the client refuses to send one. A turn answers at
most ``TURN_BUDGET`` requests, so a flood cannot starve the owner's own work.

Client policy: each call uses a fresh DEALER socket with ``linger=0``, closed
when the call ends, so a call that timed out cannot leave a stale reply for the
next one. Every failure — an error answer, a garbled answer or no answer within
the timeout — raises :class:`hive.errors.ControlError`.

Security: ``ipc://``, ``inproc://`` and loopback ``tcp://`` endpoints are
trusted as local (:func:`hive.procs.endpoints.is_local`); the hive itself puts CURVE
on every ``tcp://`` endpoint, loopback included, since any local user can
connect to a loopback port (hive/procs/supervisor.py). The server refuses any
other endpoint unless it is given the process's :class:`hive.curve.Curve`; it
is then a CURVE server behind that process's ZAP authenticator, which admits
only the hive's client keys, and the client must be given the hive's key
directory (``curve_dir``) to be let in. A peer without them is never answered:
its request never reaches a handler.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import zmq

from hive.errors import ControlError
from hive.procs.curve import ClientKeys, Curve
from hive.procs.endpoints import is_local, use_ipv6

__all__ = [
    "ControlClient",
    "ControlServer",
    "Handler",
]

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], object]
"""Takes the whole request object (``cmd`` included); its return value is the result."""

# Peer-supplied text echoed in an error reply or a log line is cut to this length.
_SHOWN = 60
# The largest request the server takes (and the client sends): `hive add -` sends its URLs
# in chunks below it.
MAX_REQUEST_BYTES = 1 << 20
# Room for the ROUTER's envelope frames beside a request at the limit.
ENVELOPE_BYTES = 1024
# Requests answered in one turn of the owner's loop.
TURN_BUDGET = 64


class _BadRequest(Exception):
    """A request the server refuses before any handler runs; the message is the reply."""


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
        max_bytes: int = MAX_REQUEST_BYTES,
        curve: Curve | None = None,
    ) -> None:
        if curve is None and not is_local(endpoint):
            raise ValueError(f"control endpoint {endpoint} is not local; it needs CURVE keys")
        self._handlers = dict(handlers)
        self._max_bytes = max_bytes
        self._requests = 0
        self._errors = 0
        self._failures = 0
        self.socket: zmq.Socket[bytes] = ctx.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        # A larger frame disconnects its sender before it is buffered: eight 100 MB requests
        # took the supervisor to 642 MB when the size was checked only once received.
        self.socket.setsockopt(zmq.MAXMSGSIZE, max_bytes + ENVELOPE_BYTES)
        try:
            use_ipv6(self.socket, endpoint)
            if curve is not None:
                curve.serve(self.socket)
            self.socket.bind(endpoint)
        except BaseException:
            self.close()
            raise
        self.endpoint: str = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        log.info("control: listening on %s%s", self.endpoint, " (CURVE)" if curve else "")

    def handle_ready(self, budget: int = TURN_BUDGET) -> int:
        """Answer up to ``budget`` requests already queued, without blocking; return how many.

        The budget keeps a flood of requests from starving the owner's other work
        in its turn: what is left waits for the next turn (the socket stays readable).
        """
        handled = 0
        while handled < budget:
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
        return handled

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
        """Close the socket; the context and its authenticator stay the owner's."""
        self.socket.close(linger=0)

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

    With ``curve_dir`` (the hive's key directory) the client is a CURVE client
    holding the hive's client key pair and the server's public key; a missing or
    unreadable key file raises :class:`hive.curve.KeysError` at construction,
    not at the first call. A CURVE server refuses a client without them, which
    then sees only the timeout.
    """

    def __init__(self, endpoint: str, timeout: float = 5.0, curve_dir: Path | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._curve = ClientKeys.load(curve_dir) if curve_dir is not None else None
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()

    def call(self, cmd: str, **args: object) -> object:
        """Send ``{"cmd": cmd, **args}`` and return the result, or raise ControlError."""
        payload = json.dumps({**args, "cmd": cmd}, allow_nan=False).encode("utf-8")
        if len(payload) > MAX_REQUEST_BYTES:
            raise ControlError(f"{cmd}: a request of {len(payload)} bytes exceeds the control "
                               f"socket's {MAX_REQUEST_BYTES} bytes")
        sock = self._ctx.socket(zmq.DEALER)
        try:
            sock.setsockopt(zmq.LINGER, 0)
            use_ipv6(sock, self.endpoint)
            if self._curve is not None:
                self._curve.apply(sock)
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
