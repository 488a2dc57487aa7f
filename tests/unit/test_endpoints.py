"""Endpoints: short private run directories, one address per role, a recordable recipe.

Also the rule that decides CURVE: which endpoints are local, and that nothing
binds beyond loopback without keys.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from hive.core.ring import MAX_PROCS
from hive.errors import HiveError
from hive.procs.endpoints import (
    SUN_PATH_MAX,
    Endpoints,
    RunDirError,
    incoming,
    is_local,
    make_run_dir,
    pull,
    push,
    remove_run_dir,
)
from hive.storage.datadir import DataDir


@pytest.fixture
def deep_data_dir(tmp_path: Path) -> Path:
    """A data directory whose path is over 300 characters long."""
    path = tmp_path
    while len(str(path)) <= 300:
        path = path / ("d" * 40)
    path.mkdir(parents=True)
    return path


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def ipc_path(address: str) -> str:
    assert address.startswith("ipc://")
    return address[len("ipc://") :]


def all_addresses(endpoints: Endpoints, last_worker: int = MAX_PROCS - 1) -> list[str]:
    roles = [endpoints.splitter, endpoints.supervisor, endpoints.control]
    return roles + [endpoints.worker(i) for i in (0, 1, 9, 99, last_worker)]


# --- run directories ---------------------------------------------------------------------------


def test_socket_paths_fit_even_for_a_300_character_data_dir(deep_data_dir: Path) -> None:
    endpoints = Endpoints(DataDir(deep_data_dir).socket_dir())
    for address in all_addresses(endpoints):
        assert len(os.fsencode(ipc_path(address))) <= SUN_PATH_MAX < 108


def test_run_dir_is_per_user_and_short(tmp_path: Path) -> None:
    run_dir = DataDir(tmp_path).socket_dir()
    assert run_dir.parent == Path("/tmp")
    assert run_dir.name.startswith(f"hive-{os.getuid()}-")
    assert len(run_dir.name.rsplit("-", 1)[1]) == 16
    assert DataDir(tmp_path).socket_dir(base=Path("/run/x")) == Path("/run/x") / run_dir.name


def test_same_data_dir_gives_the_same_run_dir_however_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    monkeypatch.chdir(tmp_path)
    spellings = [data, Path("data"), Path("./data/"), tmp_path / "x" / ".." / "data"]
    spellings.append(tmp_path / "link")
    assert {DataDir(p).socket_dir() for p in spellings} == {DataDir(data).socket_dir()}
    assert DataDir(tmp_path / "other").socket_dir() != DataDir(data).socket_dir()


def test_run_dir_of_an_undecodable_path_is_derived(tmp_path: Path) -> None:
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/\xff\xfe"))
    assert DataDir(odd).socket_dir() == DataDir(odd).socket_dir()
    assert DataDir(odd).socket_dir() != DataDir(tmp_path).socket_dir()


def test_make_run_dir_creates_it_private(tmp_path: Path, umask: None) -> None:
    run_dir = tmp_path / "run"
    assert make_run_dir(run_dir) == run_dir
    assert run_dir.is_dir() and mode(run_dir) == 0o700
    assert make_run_dir(run_dir) == run_dir


def test_make_run_dir_narrows_an_existing_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_dir.chmod(0o777)
    make_run_dir(run_dir)
    assert mode(run_dir) == 0o700


def test_make_run_dir_refuses_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir(mode=0o755)
    link = tmp_path / "run"
    link.symlink_to(target)
    with pytest.raises(RunDirError, match="symlink"):
        make_run_dir(link)
    assert mode(target) == 0o755


def test_make_run_dir_refuses_a_file(tmp_path: Path) -> None:
    path = tmp_path / "run"
    path.write_bytes(b"")
    with pytest.raises(RunDirError, match="not a directory"):
        make_run_dir(path)


def test_make_run_dir_refuses_another_users_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o755)
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)
    with pytest.raises(RunDirError, match="belongs to uid"):
        make_run_dir(run_dir)
    assert mode(run_dir) == 0o755
    assert issubclass(RunDirError, HiveError)


def test_ipc_sockets_bind_in_a_deep_data_dirs_run_dir(deep_data_dir: Path) -> None:
    run_dir = make_run_dir(DataDir(deep_data_dir).socket_dir())
    endpoints = Endpoints(run_dir)
    context = zmq.Context()
    try:
        receiver = context.socket(zmq.PULL)
        sender = context.socket(zmq.PUSH)
        receiver.bind(endpoints.worker(0))
        sender.connect(endpoints.worker(0))
        sender.send_multipart([b"ACK", b"x"])
        assert receiver.poll(5000)
        assert receiver.recv_multipart() == [b"ACK", b"x"]
        for sock in (receiver, sender):
            sock.close(linger=0)
    finally:
        context.term()
        shutil.rmtree(run_dir)


# --- addresses ---------------------------------------------------------------------------------


def test_ipc_addresses_are_distinct_and_under_the_run_dir() -> None:
    endpoints = Endpoints(Path("/tmp/hive-0-abc"))
    assert endpoints.splitter == "ipc:///tmp/hive-0-abc/splitter.in"
    assert endpoints.supervisor == "ipc:///tmp/hive-0-abc/supervisor.in"
    assert endpoints.control == "ipc:///tmp/hive-0-abc/control"
    assert endpoints.worker(3) == "ipc:///tmp/hive-0-abc/worker-3.in"
    addresses = all_addresses(endpoints)
    assert len(set(addresses)) == len(addresses)


def test_tcp_addresses_default_to_loopback() -> None:
    endpoints = Endpoints.tcp(5500)
    assert endpoints.splitter == "tcp://127.0.0.1:5500"
    assert endpoints.supervisor == "tcp://127.0.0.1:5501"
    assert endpoints.control == "tcp://127.0.0.1:5502"
    assert endpoints.worker(0) == "tcp://127.0.0.1:5503"
    assert endpoints.worker(7) == "tcp://127.0.0.1:5510"
    assert Endpoints.tcp(5500, "::1").worker(0) == "tcp://[::1]:5503"
    assert Endpoints.tcp(5500, "crawl-1.lan").control == "tcp://crawl-1.lan:5502"


@pytest.mark.parametrize(
    "build",
    [
        lambda: Endpoints(Path("relative/run")),
        lambda: Endpoints(Path("/tmp") / ("x" * 100)),
        lambda: Endpoints.tcp(0),
        lambda: Endpoints.tcp(65533),
        lambda: Endpoints.tcp(True),
        lambda: Endpoints.tcp(5500, ""),
        lambda: Endpoints.tcp(5500, "a/b"),
        lambda: Endpoints.tcp(5500, "[::1]"),
        lambda: Endpoints.tcp(5500, "*"),
        lambda: Endpoints.tcp(5500, keys=Path("relative/keys")),
        lambda: Endpoints(Path("/tmp/r"), keys=Path("keys")),
        lambda: Endpoints(Path("/tmp/r")).worker(-1),
        lambda: Endpoints(Path("/tmp/r")).worker(MAX_PROCS),
        lambda: Endpoints(Path("/tmp/r")).worker(True),
        lambda: Endpoints.tcp(65000).worker(600),
    ],
)
def test_bad_recipes_and_worker_ids_raise_value_error(build: object) -> None:
    with pytest.raises(ValueError, match="endpoints"):
        build()  # type: ignore[operator]


# --- recording in hive.json --------------------------------------------------------------------


@pytest.mark.parametrize(
    "endpoints",
    [
        Endpoints(Path("/tmp/hive-0-abc")), Endpoints.tcp(5500), Endpoints.tcp(7000, "::1"),
        Endpoints.tcp(7000, "192.0.2.7", Path("/data/keys")),
        Endpoints(Path("/tmp/r"), Path("/data/keys")),
    ],
)
def test_to_dict_round_trips_through_json(endpoints: Endpoints) -> None:
    again = Endpoints.from_dict(json.loads(json.dumps(endpoints.to_dict())))
    assert again == endpoints and hash(again) == hash(endpoints)
    assert all_addresses(again, 999) == all_addresses(endpoints, 999)


def test_to_dict_is_the_recipe() -> None:
    assert Endpoints(Path("/tmp/r")).to_dict() == {"transport": "ipc", "run_dir": "/tmp/r"}
    assert Endpoints.tcp(5500).to_dict() == {
        "transport": "tcp",
        "host": "127.0.0.1",
        "base_port": 5500,
    }
    assert Endpoints(Path("/tmp/r")) != Endpoints.tcp(5500)
    assert Endpoints(Path("/tmp/r")) != "/tmp/r"
    assert repr(Endpoints(Path("/tmp/r"))) == "Endpoints(Path('/tmp/r'))"
    assert repr(Endpoints.tcp(5500)) == "Endpoints.tcp(5500, '127.0.0.1')"


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"transport": "udp"},
        {"transport": "ipc"},
        {"transport": "ipc", "run_dir": ""},
        {"transport": "ipc", "run_dir": 5},
        {"transport": "ipc", "run_dir": "/tmp/r", "extra": 1},
        {"transport": "ipc", "run_dir": "relative"},
        {"transport": "tcp", "host": "127.0.0.1"},
        {"transport": "tcp", "host": "127.0.0.1", "base_port": "5500"},
        {"transport": "tcp", "host": None, "base_port": 5500},
        {"transport": "tcp", "host": "127.0.0.1", "base_port": 70000},
        {"transport": "tcp", "host": "127.0.0.1", "base_port": 5500, "keys": ""},
        {"transport": "tcp", "host": "127.0.0.1", "base_port": 5500, "keys": 5},
        {"transport": "tcp", "host": "127.0.0.1", "base_port": 5500, "keys": "rel/keys"},
        {"transport": "ipc", "run_dir": "/tmp/r", "keys": None},
        {"keys": "/data/keys"},
    ],
)
def test_from_dict_refuses_anything_else(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="endpoints"):
        Endpoints.from_dict(data)


# --- local or not: when CURVE is needed -------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("ipc:///run/hive/control", True),
        ("inproc://control", True),
        ("tcp://127.0.0.1:5555", True),
        ("tcp://127.8.0.1:*", True),
        ("tcp://localhost:5555", True),
        ("tcp://[::1]:5555", True),
        ("tcp://*:5555", False),
        ("tcp://0.0.0.0:5555", False),
        ("tcp://10.1.2.3:5555", False),
        ("tcp://[fd00::2]:5555", False),
        ("tcp://eth0:5555", False),
        ("tcp://crawl-1.lan:5555", False),
        ("ws://127.0.0.1:5555", False),
        ("control", False),
    ],
)
def test_is_local(endpoint: str, local: bool) -> None:
    assert is_local(endpoint) is local


@pytest.mark.parametrize(
    ("endpoints", "local"),
    [
        (Endpoints(Path("/tmp/r")), True),
        (Endpoints.tcp(5500), True),
        (Endpoints.tcp(5500, "127.0.0.2"), True),
        (Endpoints.tcp(5500, "::1"), True),
        (Endpoints.tcp(5500, "localhost"), True),
        (Endpoints.tcp(5500, "0.0.0.0"), False),
        (Endpoints.tcp(5500, "192.0.2.7"), False),
        (Endpoints.tcp(5500, "fd00::2"), False),
        (Endpoints.tcp(5500, "crawl-1.lan"), False),
    ],
)
def test_local_is_true_only_when_every_address_is(endpoints: Endpoints, local: bool) -> None:
    assert endpoints.local is local
    assert all(is_local(a) is local for a in all_addresses(endpoints, 9))


def test_with_keys_keeps_the_addresses_and_records_the_key_directory() -> None:
    for plain in (Endpoints(Path("/tmp/r")), Endpoints.tcp(5500, "192.0.2.7")):
        keyed = plain.with_keys(Path("/data/keys"))
        assert plain.keys is None and keyed.keys == Path("/data/keys")
        assert all_addresses(keyed, 9) == all_addresses(plain, 9)
        assert keyed != plain
        assert keyed.to_dict() == {**plain.to_dict(), "keys": "/data/keys"}
    assert repr(Endpoints.tcp(5500).with_keys(Path("/k"))) == (
        "Endpoints.tcp(5500, '127.0.0.1', keys=Path('/k'))"
    )


def test_no_keys_no_curve() -> None:
    context = zmq.Context()
    try:
        assert Endpoints.tcp(5500).curve(context) is None
    finally:
        context.term()


@pytest.mark.parametrize("endpoint", ["tcp://0.0.0.0:*", "tcp://192.0.2.7:5500", "tcp://*:5500"])
def test_nothing_binds_or_connects_beyond_loopback_without_curve(endpoint: str) -> None:
    context = zmq.Context()
    try:
        with pytest.raises(ValueError, match="needs CURVE"):
            pull(context, endpoint)
        with pytest.raises(ValueError, match="needs CURVE"):
            push(context, endpoint)
    finally:
        context.term()


def test_ipv6_addresses_bind_and_connect() -> None:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        receiver = pull(context, "tcp://[::1]:*")
        sender = push(context, receiver.getsockopt_string(zmq.LAST_ENDPOINT))
        sender.send_multipart([b"ACK", b"6"])
        assert receiver.poll(5000)
        assert receiver.recv_multipart() == [b"ACK", b"6"]
        for sock in (receiver, sender):
            sock.close(linger=0)
    finally:
        context.term()


def test_incoming_takes_what_waits_up_to_its_limit_and_never_blocks() -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    inbox, sender = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    try:
        inbox.bind("inproc://incoming")
        sender.connect("inproc://incoming")
        assert list(incoming(inbox, 10)) == []
        for i in range(5):
            sender.send_multipart([b"m", bytes([i])])
        assert inbox.poll(2000)
        first = list(incoming(inbox, 3))
        assert first == [[b"m", bytes([i])] for i in range(3)]
        assert list(incoming(inbox, 10)) == [[b"m", b"\x03"], [b"m", b"\x04"]]
    finally:
        inbox.close(linger=0)
        sender.close(linger=0)
        ctx.term()


def test_a_pull_socket_disconnects_a_sender_of_an_oversized_frame(tmp_path: Path) -> None:
    """ZMQ_MAXMSGSIZE: an oversized frame is never delivered (nor buffered); the socket goes on."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    endpoint = f"ipc://{tmp_path}/in"
    try:
        inbox = pull(ctx, endpoint, max_bytes=1000)
        sender = push(ctx, endpoint)
        sender.send_multipart([b"BATCH", b"x" * 5000])
        assert not inbox.poll(300)
        fresh = push(ctx, endpoint)
        fresh.send_multipart([b"BATCH", b"x" * 500])
        assert inbox.poll(5000)
        assert inbox.recv_multipart() == [b"BATCH", b"x" * 500]
        for sock in (inbox, sender, fresh):
            sock.close(linger=0)
    finally:
        ctx.term()


def _socket_file(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


def test_remove_run_dir_takes_only_sockets_and_then_the_directory(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path / "run")
    _socket_file(run / "control")
    _socket_file(run / "worker-0.in")
    remove_run_dir(run)
    assert not run.exists()
    run = make_run_dir(tmp_path / "run")
    _socket_file(run / "control")
    (run / "notes").write_text("not ours to remove\n")
    remove_run_dir(run)
    assert sorted(p.name for p in run.iterdir()) == ["notes"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _socket_file(elsewhere / "control")
    (tmp_path / "link").symlink_to(elsewhere)
    remove_run_dir(tmp_path / "link")
    assert (elsewhere / "control").exists()
    remove_run_dir(tmp_path / "missing")  # nothing there: nothing to do
