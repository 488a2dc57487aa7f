"""The control plane over real ZeroMQ sockets: round trips, bad input, timeouts, CURVE."""

from __future__ import annotations

import json
import logging
import random
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import zmq
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hive.errors import ControlError
from hive.procs.control import ControlClient, ControlServer
from hive.procs.curve import Curve, KeysError, make_keys

WAIT_MS = 2000


def _status(request: dict[str, Any]) -> object:
    return {"workers": 2, "frontier/admitted": 10, "idle": False}


def _echo(request: dict[str, Any]) -> object:
    return request["value"]


def _add(request: dict[str, Any]) -> object:
    urls = request.get("urls")
    if not isinstance(urls, list):
        raise TypeError("'urls' must be a list of strings")
    if not all(isinstance(u, str) for u in urls):
        raise ValueError("every url must be a string")
    return len(urls)


def _boom(request: dict[str, Any]) -> object:
    raise RuntimeError("the frontier is on fire")


def _unencodable(request: dict[str, Any]) -> object:
    return {"when": object()}


HANDLERS = {
    "status": _status,
    "echo": _echo,
    "add": _add,
    "boom": _boom,
    "unencodable": _unencodable,
}


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.term()


@pytest.fixture
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # ipc paths are limited to ~100 bytes, so keep the directory name short.
    directory = tmp_path_factory.mktemp("c")
    yield f"ipc://{directory}/control"
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def server(ctx: zmq.Context[Any], endpoint: str) -> Iterator[ControlServer]:
    with ControlServer(ctx, endpoint, HANDLERS) as srv:
        yield srv


@contextmanager
def raw_socket(ctx: zmq.Context[Any], endpoint: str, kind: int) -> Iterator[zmq.Socket[Any]]:
    sock = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    try:
        yield sock
    finally:
        sock.close(linger=0)


@contextmanager
def serving(srv: ControlServer) -> Iterator[None]:
    """Answer requests in a thread; the main thread does not touch ``srv`` meanwhile."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            if srv.socket.poll(20):
                srv.handle_ready()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        assert not thread.is_alive()


def exchange(srv: ControlServer, sock: zmq.Socket[Any], frames: list[bytes]) -> list[bytes]:
    """Send raw frames, let the server answer, return the reply frames."""
    sock.send_multipart(frames)
    assert srv.socket.poll(WAIT_MS), "the request never reached the server"
    assert srv.handle_ready() == 1
    assert sock.poll(WAIT_MS), "the server did not answer"
    return sock.recv_multipart()


def reply_of(frames: list[bytes]) -> dict[str, Any]:
    reply = json.loads(frames[-1])
    assert isinstance(reply, dict)
    return reply


def request(cmd: str, **args: object) -> bytes:
    return json.dumps({"cmd": cmd, **args}).encode()


def assert_still_serving(srv: ControlServer, ctx: zmq.Context[Any]) -> None:
    with raw_socket(ctx, srv.endpoint, zmq.REQ) as sock:
        reply = reply_of(exchange(srv, sock, [request("status")]))
    assert reply == {"ok": True, "result": _status({})}


# ------------------------------------------------------------------ round trips


def test_req_client_round_trip(server: ControlServer, ctx: zmq.Context[Any]) -> None:
    with raw_socket(ctx, server.endpoint, zmq.REQ) as sock:
        frames = exchange(server, sock, [request("status")])
    assert len(frames) == 1
    assert reply_of(frames) == {"ok": True, "result": _status({})}


def test_dealer_client_round_trip(server: ControlServer, ctx: zmq.Context[Any]) -> None:
    with raw_socket(ctx, server.endpoint, zmq.DEALER) as sock:
        frames = exchange(server, sock, [request("echo", value={"a": [1, "x"]})])
        assert reply_of(frames) == {"ok": True, "result": {"a": [1, "x"]}}
        # A DEALER speaking the REQ envelope gets the envelope back.
        frames = exchange(server, sock, [b"", request("status")])
    assert frames[0] == b""
    assert reply_of(frames)["ok"] is True


def test_control_client_round_trip(server: ControlServer) -> None:
    with serving(server), ControlClient(server.endpoint, timeout=2.0) as client:
        assert client.call("status") == _status({})
        assert client.call("echo", value=[1, "two", None]) == [1, "two", None]
        assert client.call("add", urls=["http://a.test/", "http://b.test/"]) == 2
        with pytest.raises(ControlError, match=r"echo: missing argument 'value'"):
            client.call("echo")
        with pytest.raises(ControlError, match=r"unknown command 'nope'"):
            client.call("nope")
        assert client.call("status") == _status({})
    assert server.stats() == {
        "control/requests": 6, "control/errors": 2, "control/failures": 0,
    }


def test_handle_ready_drains_every_pending_request(
    server: ControlServer, ctx: zmq.Context[Any]
) -> None:
    assert server.handle_ready() == 0
    with (
        raw_socket(ctx, server.endpoint, zmq.DEALER) as a,
        raw_socket(ctx, server.endpoint, zmq.REQ) as b,
    ):
        a.send(request("echo", value="a"))
        b.send(request("echo", value="b"))
        handled = 0
        for _ in range(50):
            if handled == 2:
                break
            if server.socket.poll(WAIT_MS // 10):
                handled += server.handle_ready()
        assert handled == 2
        assert a.poll(WAIT_MS) and b.poll(WAIT_MS)
        assert reply_of(a.recv_multipart())["result"] == "a"
        assert reply_of(b.recv_multipart())["result"] == "b"


# ------------------------------------------------------------ malformed requests

NESTED = b"[" * 100_000
RANDOM = random.Random(7).randbytes(4096)
# Just over the cap: answered with an error (a larger one never reaches the server).
BIG = b'{"cmd": "status", "pad": "' + b"x" * (1 << 20) + b'"}'

MALFORMED: list[tuple[str, int, list[bytes], str]] = [
    ("dealer-two-frames", zmq.DEALER, [b"a", b"b"], "one frame, got 2"),
    ("req-two-frames", zmq.REQ, [request("status"), b"b"], "one frame, got 2"),
    ("dealer-req-envelope-extra", zmq.DEALER, [b"", b"x", b"y"], "one frame, got 2"),
    ("dealer-empty-body", zmq.DEALER, [b""], "not JSON"),
    ("req-empty-body", zmq.REQ, [b""], "not JSON"),
    ("dealer-over-cap", zmq.DEALER, [BIG], "exceeds 1048576 bytes"),
    ("req-over-cap", zmq.REQ, [BIG], "exceeds 1048576 bytes"),
    ("not-utf8", zmq.DEALER, [b'{"cmd": "\xff\xfe"}'], "not UTF-8"),
    ("random-bytes", zmq.DEALER, [RANDOM], "not UTF-8"),
    ("not-json", zmq.REQ, [b"{cmd: status"], "not JSON"),
    ("nested", zmq.DEALER, [NESTED], "not JSON"),
    ("huge-int", zmq.DEALER, [b"9" * 5000], "not JSON"),
    ("list", zmq.DEALER, [b"[1, 2]"], "JSON object, got list"),
    ("string", zmq.REQ, [b'"status"'], "JSON object, got str"),
    ("no-cmd", zmq.DEALER, [b'{"value": 1}'], "string 'cmd'"),
    ("cmd-not-string", zmq.DEALER, [b'{"cmd": 5}'], "string 'cmd'"),
    ("unknown-cmd", zmq.REQ, [request("nope")], "unknown command 'nope'"),
    ("missing-arg", zmq.DEALER, [request("echo")], "echo: missing argument 'value'"),
    ("wrong-type", zmq.DEALER, [request("add", urls="x")], "'urls' must be a list"),
    ("bad-value", zmq.REQ, [request("add", urls=[1])], "every url must be a string"),
    ("handler-raises", zmq.DEALER, [request("boom")], "boom failed: RuntimeError"),
    ("not-json-result", zmq.REQ, [request("unencodable")], "result is not JSON"),
]


@pytest.mark.parametrize(
    ("kind", "frames", "message"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_request_is_answered_and_server_survives(
    server: ControlServer, ctx: zmq.Context[Any], kind: int, frames: list[bytes], message: str
) -> None:
    with raw_socket(ctx, server.endpoint, kind) as sock:
        reply = reply_of(exchange(server, sock, frames))
    assert reply["ok"] is False
    assert message in reply["error"]
    assert_still_serving(server, ctx)
    counts = server.stats()
    assert counts["control/requests"] == 2
    assert counts["control/errors"] == 1


def test_handler_exception_is_logged_with_traceback(
    server: ControlServer, ctx: zmq.Context[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="hive.procs.control"):
        with raw_socket(ctx, server.endpoint, zmq.DEALER) as sock:
            reply = reply_of(exchange(server, sock, [request("boom")]))
        assert reply == {
            "ok": False, "error": "boom failed: RuntimeError: the frontier is on fire",
        }
    failures = [r for r in caplog.records if r.exc_info is not None]
    assert len(failures) == 1 and "boom" in failures[0].getMessage()
    assert server.stats()["control/failures"] == 1
    assert_still_serving(server, ctx)


@pytest.mark.parametrize("size", [2 << 20, 100 << 20])
def test_a_request_far_over_the_cap_is_never_buffered(
    server: ControlServer, ctx: zmq.Context[Any], size: int
) -> None:
    """ZMQ_MAXMSGSIZE drops the sender inside ZeroMQ: no reply, nothing held, still serving."""
    with raw_socket(ctx, server.endpoint, zmq.DEALER) as sock:
        sock.send(b"x" * size)
        assert not server.socket.poll(300)
        assert server.handle_ready() == 0
        assert not sock.poll(100)
    assert_still_serving(server, ctx)


def test_a_turn_answers_at_most_its_budget(server: ControlServer, ctx: zmq.Context[Any]) -> None:
    """A flood waits for later turns instead of starving the owner's own work in this one."""
    with raw_socket(ctx, server.endpoint, zmq.DEALER) as sock:
        for i in range(100):
            sock.send(request("echo", value=i))
        turns: list[int] = []
        while sum(turns) < 100 and len(turns) < 1000:
            server.socket.poll(WAIT_MS)
            turns.append(server.handle_ready(budget=10))
        assert sum(turns) == 100
        assert max(turns) == 10


def test_the_client_refuses_a_request_over_the_cap(server: ControlServer) -> None:
    with (
        ControlClient(server.endpoint) as client,
        pytest.raises(ControlError, match="exceeds the control socket's 1048576 bytes"),
    ):
        client.call("add", urls=["http://a.test/" + "x" * 100] * 20_000)


def test_smaller_size_cap(ctx: zmq.Context[Any], endpoint: str) -> None:
    with (
        ControlServer(ctx, endpoint, HANDLERS, max_bytes=64) as srv,
        raw_socket(ctx, endpoint, zmq.DEALER) as sock,
    ):
        assert reply_of(exchange(srv, sock, [request("echo", value="x" * 10)]))["ok"]
        reply = reply_of(exchange(srv, sock, [request("echo", value="x" * 100)]))
    assert reply["ok"] is False and "exceeds 64 bytes" in reply["error"]


def test_arbitrary_bytes_always_get_an_error_reply(
    server: ControlServer, ctx: zmq.Context[Any]
) -> None:
    def is_good_request(body: bytes) -> bool:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return False
        return isinstance(value, dict) and value.get("cmd") in HANDLERS

    with (
        raw_socket(ctx, server.endpoint, zmq.DEALER) as dealer,
        raw_socket(ctx, server.endpoint, zmq.REQ) as req,
    ):

        @settings(
            max_examples=100, deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(body=st.binary(max_size=4096), use_req=st.booleans())
        def check(body: bytes, use_req: bool) -> None:
            assume(not is_good_request(body))
            sock = req if use_req else dealer
            frames = exchange(server, sock, [body])
            assert len(frames) == 1
            reply = reply_of(frames)
            assert reply["ok"] is False
            assert isinstance(reply["error"], str) and reply["error"]

        check()
    assert_still_serving(server, ctx)


# ---------------------------------------------------------------------- client


def test_timeout_when_no_server(endpoint: str) -> None:
    with ControlClient(endpoint, timeout=0.3) as client, pytest.raises(ControlError) as caught:
        client.call("status")
    assert str(caught.value) == (
        f"no answer from {endpoint} within 0.3s (is the hive running?)"
    )


def test_timed_out_call_does_not_poison_the_next(server: ControlServer) -> None:
    with ControlClient(server.endpoint, timeout=0.3) as client:
        with pytest.raises(ControlError, match="no answer"):
            client.call("echo", value="stale")
        # The stale request may still be queued at the server: its answer must go nowhere.
        client.timeout = 2.0
        with serving(server):
            assert client.call("echo", value="fresh") == "fresh"
            assert client.call("echo", value="again") == "again"


def test_garbled_answer_raises_control_error(ctx: zmq.Context[Any], endpoint: str) -> None:
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)
    outcome: list[BaseException] = []

    def call() -> None:
        with ControlClient(endpoint, timeout=2.0) as client:
            try:
                client.call("status")
            except ControlError as exc:
                outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    try:
        assert router.poll(WAIT_MS)
        identity, _ = router.recv_multipart()
        router.send_multipart([identity, b"\x00not json"])
        thread.join(5)
    finally:
        router.close(linger=0)
    assert not thread.is_alive()
    assert len(outcome) == 1 and "bad answer" in str(outcome[0])


# ------------------------------------------------------------------------ CURVE


def test_non_local_endpoint_needs_curve(ctx: zmq.Context[Any]) -> None:
    with pytest.raises(ValueError, match="CURVE"):
        ControlServer(ctx, "tcp://0.0.0.0:*", HANDLERS)


def test_missing_client_keys_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(KeysError, match="client.key_secret"):
        ControlClient("tcp://127.0.0.1:1", curve_dir=tmp_path)


def test_curve_admits_only_known_clients(ctx: zmq.Context[Any], tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "hive-keys")
    # A stranger knows the server's public key but holds a client key it never admitted.
    stranger = make_keys(tmp_path / "stranger-keys")
    stranger.server_public.write_bytes(keys.server_public.read_bytes())
    curve = Curve(ctx, keys.directory)
    try:
        with ControlServer(ctx, "tcp://127.0.0.1:*", HANDLERS, curve=curve) as srv:
            assert srv.endpoint.startswith("tcp://127.0.0.1:")
            with serving(srv):
                with ControlClient(srv.endpoint, timeout=2.0, curve_dir=keys.directory) as good:
                    assert good.call("status") == _status({})
                # A foreign key pair, then no CURVE at all.
                for curve_dir in (stranger.directory, None):
                    with (
                        ControlClient(srv.endpoint, timeout=0.5, curve_dir=curve_dir) as client,
                        pytest.raises(ControlError, match="no answer"),
                    ):
                        client.call("status")
                with ControlClient(srv.endpoint, timeout=2.0, curve_dir=keys.directory) as good:
                    assert good.call("status") == _status({})
            assert srv.stats()["control/requests"] == 2
    finally:
        curve.close()
