"""The hive's CURVE keys on disk, and CURVE sockets over real TCP.

Sockets are tested on loopback and, when the machine has one, on its own
address beyond loopback (the path ``hive.curve = "auto"`` takes).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import zmq

from hive.errors import HiveError
from hive.procs.curve import (
    ClientKeys,
    Curve,
    KeyFiles,
    KeysError,
    admit_machines,
    ensure_keys,
    make_keys,
)
from hive.procs.endpoints import pull, push
from hive.storage.datadir import DataDir
from tests.curve_support import handshake, own_address

OWN_ADDRESS = own_address()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def contents(keys: KeyFiles) -> dict[str, bytes]:
    """Every file of a key set, by path relative to its directory."""
    return {
        str(path.relative_to(keys.directory)): path.read_bytes()
        for path in sorted(keys.directory.rglob("*")) if path.is_file()
    }


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


# --------------------------------------------------------------------------- keys


def test_make_keys_writes_private_files(tmp_path: Path, umask: None) -> None:
    keys = make_keys(tmp_path / "keys")
    assert mode(keys.directory) == 0o700
    assert mode(keys.clients_dir) == 0o700
    files = [
        keys.server_public, keys.server_secret, keys.client_public, keys.client_secret,
        keys.clients_dir / keys.client_public.name,
    ]
    for path in files:
        assert mode(path) == 0o600, path
    assert [p.name for p in keys.clients_dir.iterdir()] == ["client.key"]
    assert (keys.clients_dir / "client.key").read_bytes() == keys.client_public.read_bytes()
    # Nothing but the key directory is left beside it: the staging directory was renamed.
    assert [p.name for p in tmp_path.iterdir()] == ["keys"]
    with pytest.raises(FileExistsError):
        make_keys(keys.directory)


def test_a_failed_make_keys_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(directory: Any, name: str) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zmq.auth, "create_certificates", broken)
    with pytest.raises(OSError, match="No space"):
        make_keys(tmp_path / "keys")
    assert list(tmp_path.iterdir()) == []


def test_ensure_keys_makes_them_once_then_reuses_them(tmp_path: Path, umask: None) -> None:
    first = ensure_keys(tmp_path / "data" / "keys")
    before = contents(first)
    assert set(before) == {"server.key", "server.key_secret", "client.key", "client.key_secret",
                           "clients/client.key"}
    again = ensure_keys(tmp_path / "data" / "keys")
    assert again == first
    assert contents(again) == before
    assert mode(first.directory) == 0o700 and mode(first.server_secret) == 0o600


def test_key_dir_is_absolute_and_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert DataDir(Path("data")).keys == tmp_path / "data" / "keys"


LOOSENED: list[tuple[str, Callable[[KeyFiles], Path], int]] = [
    ("directory", lambda k: k.directory, 0o755),
    ("clients", lambda k: k.clients_dir, 0o750),
    ("server-secret", lambda k: k.server_secret, 0o644),
    ("client-secret", lambda k: k.client_secret, 0o640),
]


@pytest.mark.parametrize(("which", "loosened"), [c[1:] for c in LOOSENED],
                         ids=[c[0] for c in LOOSENED])
def test_keys_open_to_others_are_refused_not_repaired(
    tmp_path: Path, which: Callable[[KeyFiles], Path], loosened: int
) -> None:
    keys = make_keys(tmp_path / "keys")
    before = contents(keys)
    which(keys).chmod(loosened)
    with pytest.raises(KeysError, match=r"open to other users \(mode 0"):
        ensure_keys(keys.directory)
    assert mode(which(keys)) == loosened
    assert contents(keys) == before


MISSING: list[tuple[str, Callable[[KeyFiles], Path]]] = [
    ("server-secret", lambda k: k.server_secret),
    ("client-secret", lambda k: k.client_secret),
    ("server-public", lambda k: k.server_public),
    ("admitted-client", lambda k: k.clients_dir / "client.key"),
]


@pytest.mark.parametrize("which", [c[1] for c in MISSING], ids=[c[0] for c in MISSING])
def test_an_incomplete_key_set_is_refused_not_replaced(
    tmp_path: Path, which: Callable[[KeyFiles], Path]
) -> None:
    keys = make_keys(tmp_path / "keys")
    which(keys).unlink()
    before = contents(keys)
    with pytest.raises(KeysError, match="missing|no client public key"):
        ensure_keys(keys.directory)
    assert contents(keys) == before
    assert issubclass(KeysError, HiveError)


def test_keys_of_another_user_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = make_keys(tmp_path / "keys")
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)
    with pytest.raises(KeysError, match="belongs to uid"):
        ensure_keys(keys.directory)


def test_unreadable_keys_raise_keys_error(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys")
    keys.client_secret.write_text("not a certificate\n")
    with pytest.raises(KeysError, match="client.key_secret"):
        ClientKeys.load(keys.directory)
    keys.client_secret.write_bytes(keys.client_public.read_bytes())
    with pytest.raises(KeysError, match="no secret key"):
        ClientKeys.load(keys.directory)


def test_client_keys_never_show_the_secret(tmp_path: Path) -> None:
    client = ClientKeys.load(make_keys(tmp_path / "keys").directory)
    assert client.secret.decode() not in repr(client)
    assert client.public.decode() in repr(client)


# ------------------------------------------------------------------------ sockets


@pytest.fixture(
    params=[
        "127.0.0.1",
        pytest.param(OWN_ADDRESS or "", marks=pytest.mark.skipif(
            OWN_ADDRESS is None, reason="this machine has no address beyond loopback")),
    ],
    ids=["loopback", "own-address"],
)
def host(request: pytest.FixtureRequest) -> str:
    address: str = request.param
    return address


@pytest.fixture
def ctx() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield context
    context.term()


@contextmanager
def curve_pull(ctx: zmq.Context[zmq.Socket[bytes]], keys: Path,
               host: str) -> Iterator[tuple[zmq.Socket[bytes], str, Curve]]:
    """A PULL bound as a CURVE server on a free port of ``host``; (socket, endpoint, curve)."""
    curve = Curve(ctx, keys)
    sock = pull(ctx, f"tcp://{host}:*", curve)
    try:
        yield sock, sock.getsockopt_string(zmq.LAST_ENDPOINT), curve
    finally:
        sock.close(linger=0)
        curve.close()


@contextmanager
def sender(ctx: zmq.Context[zmq.Socket[bytes]],
           keys: ClientKeys | None) -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[Any]]]:
    """A PUSH (a CURVE client with ``keys``, else plain) and its monitor, not yet connected."""
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    if keys is not None:
        keys.apply(sock)
    monitor = sock.get_monitor_socket()
    try:
        yield sock, monitor
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)


def test_a_curve_pull_takes_messages_only_from_the_hive(
    ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path, host: str
) -> None:
    keys = make_keys(tmp_path / "keys")
    foreign = ClientKeys.load(make_keys(tmp_path / "foreign").directory)
    hive_client = ClientKeys.load(keys.directory)
    # The foreign client knows the server's public key: CURVE alone would let it in.
    strangers = {
        "plain": None,
        "foreign": ClientKeys(foreign.public, foreign.secret, hive_client.server),
    }
    with curve_pull(ctx, keys.directory, host) as (inbox, endpoint, _):
        assert endpoint.startswith(f"tcp://{host}:")
        for name, stranger_keys in strangers.items():
            with sender(ctx, stranger_keys) as (sock, monitor):
                sock.connect(endpoint)
                # A refused handshake drops the socket's pipe: on a slow machine it may be
                # gone before this send, which then cannot even queue (zmq.Again).
                with suppress(zmq.Again):
                    sock.send_multipart([b"ADMIT", name.encode()], flags=zmq.NOBLOCK)
                assert handshake(monitor) == "failed", name
                assert not inbox.poll(100), f"a {name} stranger's message was delivered"
        with sender(ctx, hive_client) as (sock, monitor):
            sock.connect(endpoint)
            sock.send_multipart([b"ADMIT", b"hive"])
            assert handshake(monitor) == "succeeded"
            assert inbox.poll(5000)
            assert inbox.recv_multipart() == [b"ADMIT", b"hive"]
        assert not inbox.poll(100)


def test_push_with_curve_reaches_a_curve_pull(
    ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path, host: str
) -> None:
    keys = make_keys(tmp_path / "keys")
    with curve_pull(ctx, keys.directory, host) as (inbox, endpoint, curve):
        out = push(ctx, endpoint, curve)
        try:
            out.send_multipart([b"BATCH", b"1"])
            assert inbox.poll(5000)
            assert inbox.recv_multipart() == [b"BATCH", b"1"]
        finally:
            out.close(linger=0)


def test_without_its_authenticator_a_curve_server_refuses_everyone(
    ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path
) -> None:
    """CURVE without ZAP would admit anyone who knows the server's key; hive's fails closed.

    Once the authenticator has stopped, libzmq fails the handshake if its ZAP endpoint is
    gone, and leaves it unanswered while the endpoint's socket is still being closed (CI
    met that once): either way the client is not admitted and nothing is delivered."""
    keys = make_keys(tmp_path / "keys")
    with curve_pull(ctx, keys.directory, "127.0.0.1") as (inbox, endpoint, curve):
        curve.close()
        with sender(ctx, ClientKeys.load(keys.directory)) as (sock, monitor):
            sock.connect(endpoint)
            sock.send_multipart([b"ADMIT", b"x"], flags=zmq.NOBLOCK)
            assert handshake(monitor, 10.0, unanswered="unanswered") in ("failed", "unanswered")
            assert not inbox.poll(100)


def test_one_authenticator_serves_every_socket_of_a_process(
    ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path
) -> None:
    keys = make_keys(tmp_path / "keys")
    curve = Curve(ctx, keys.directory)
    inboxes = [pull(ctx, "tcp://127.0.0.1:*", curve) for _ in range(3)]
    outs = [push(ctx, i.getsockopt_string(zmq.LAST_ENDPOINT), curve) for i in inboxes]
    try:
        for n, out in enumerate(outs):
            out.send_multipart([b"ACK", bytes([n])])
        for n, inbox in enumerate(inboxes):
            assert inbox.poll(5000)
            assert inbox.recv_multipart() == [b"ACK", bytes([n])]
    finally:
        for sock in (*inboxes, *outs):
            sock.close(linger=0)
        curve.close()


def test_a_cluster_admits_exactly_its_machines(
    ctx: zmq.Context[zmq.Socket[bytes]], tmp_path: Path
) -> None:
    """A machine's clients directory admits the machines of the cluster's plan: one that
    made new keys is admitted by its new certificate, and one that left (a resize) is
    refused at the handshake; the hive's own client stays admitted."""
    keys = make_keys(tmp_path / "a")
    hive_client = ClientKeys.load(keys.directory)
    b, c = make_keys(tmp_path / "b"), make_keys(tmp_path / "c")
    admit_machines(keys.clients_dir, {"b": b.client_public.read_text(),
                                      "c": c.client_public.read_text()})
    remade = make_keys(tmp_path / "c-again")
    admit_machines(keys.clients_dir, {"c": remade.client_public.read_text()})
    assert sorted(p.name for p in keys.clients_dir.iterdir()) == ["client.key", "machine-c.key"]

    def as_client(files: KeyFiles) -> ClientKeys:
        mine = ClientKeys.load(files.directory)
        return ClientKeys(mine.public, mine.secret, hive_client.server)

    with curve_pull(ctx, keys.directory, "127.0.0.1") as (inbox, endpoint, _):
        for name, files, outcome in [("b, which left", b, "failed"),
                                     ("c's old keys", c, "failed"),
                                     ("c's new keys", remade, "succeeded")]:
            with sender(ctx, as_client(files)) as (sock, monitor):
                sock.connect(endpoint)
                assert handshake(monitor) == outcome, name
        with sender(ctx, hive_client) as (sock, monitor):
            sock.connect(endpoint)
            assert handshake(monitor) == "succeeded"
