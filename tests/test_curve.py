"""A hive with CURVE end to end: the real CLI in subprocesses, strangers at its sockets.

The hive listens with ``transport = "tcp"`` and the default ``hive.curve =
"auto"``, on this machine's own address beyond loopback when it has one, else
on loopback: CURVE either way (a loopback port is open to every local user,
who must not be able to stop the crawl or forge its stats). A message is proved delivered, or
not, at the web server: each test URL is on a host of its own, which the hive
fetches at once if the URL reaches it.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from hive.core import wire
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.core.urls import canonicalize, host_key
from hive.procs.curve import ClientKeys, make_keys
from hive.procs.endpoints import Endpoints
from hive.procs.lifecycle import ExitCode
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, crawl_config, wait_for
from tests.curve_support import free_base_port, handshake, own_address
from tests.test_hive import DELAY, Hive, check_crawl, finish, write_config

pytestmark = pytest.mark.slow
PROCS = 2
# The first run's delay keeps its crawl (10 pages a host) going until the test stops it.
SLOW_DELAY = 2.0


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=7, hosts=3, pages=10, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as server:
        yield server


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def record(web: WebProcess, name: str) -> UrlRecord:
    """A seed-like record for ``/`` on host ``<name>.<domain>`` of the web (served a 404)."""
    url = canonicalize(web.url(f"{name}.{web.web.domain}", "/"))
    return UrlRecord(url, host_key(url), 0, hint=1)


def send(endpoint: str, frames: list[bytes], keys: ClientKeys | None,
         timeout: float = 5.0) -> str:
    """Push ``frames`` (if any) to ``endpoint`` as a client with ``keys`` (else plain);
    how its handshake went."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    monitor = sock.get_monitor_socket()
    try:
        if keys is not None:
            keys.apply(sock)
        sock.connect(endpoint)
        if frames:
            sock.send_multipart(frames, flags=zmq.NOBLOCK)
        return handshake(monitor, timeout)
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        ctx.term()


def requested(web: WebProcess) -> set[str]:
    return {r.url for r in web.requests}


def test_a_curve_hive_crawls_serves_its_cli_and_ignores_strangers(
    tmp_path: Path, web: WebProcess
) -> None:
    # tcp has CURVE by default, on loopback too: any local user can connect to a port.
    host = own_address() or "127.0.0.1"
    settings: dict[str, Any] = {"transport": "tcp", "tcp_host": host, "curve": "auto",
                                "tcp_port": free_base_port(host, 3 + PROCS)}
    hive = Hive(tmp_path, web, hive=settings,
                politeness={"min_delay": SLOW_DELAY, "max_delay": SLOW_DELAY})
    process = hive.start(PROCS)

    # The CLI finds the keys through hive.json and is answered.
    status = wait_for(hive.status, timeout=30)
    pids = {row["role"]: row["pid"] for row in status["processes"]}
    assert len(pids) == 1 + PROCS and all(row["alive"] for row in status["processes"])
    state = hive.state()
    endpoints = Endpoints.from_dict(state["endpoints"])
    assert endpoints.keys == (hive.data / "keys").resolve()
    assert endpoints.local is (host == "127.0.0.1")
    keys = ClientKeys.load(endpoints.keys)
    key_files = sorted(p for p in endpoints.keys.rglob("*") if p.is_file())
    assert mode(endpoints.keys) == mode(endpoints.keys / "clients") == 0o700
    assert all(mode(p) == 0o600 for p in key_files)
    made = {p: p.read_bytes() for p in key_files}
    ring = Ring.from_params(state["ring"])

    def deliver(name: str, keys: ClientKeys | None) -> tuple[str, str, str]:
        """Send a BATCH to the splitter and an ADMIT to the owner; (outcomes..., their URLs)."""
        batch, admit = record(web, f"{name}-splitter"), record(web, f"{name}-worker")
        to_splitter = send(endpoints.splitter,
                           wire.encode_batch(wire.SUPERVISOR_ORIGIN, 2**62, [batch]), keys)
        to_worker = send(endpoints.worker(ring.owner(admit.host_key)),
                         wire.encode_admit(wire.SUPERVISOR_ORIGIN, 2**62, 0, 1, [admit]), keys)
        return to_splitter, to_worker, f"{batch.url} {admit.url}"

    # A process is alive before it has opened its store and bound its inbox: wait until
    # each inbox completes a handshake with the hive's key, so that a stranger's failed
    # handshake below is a refusal, not a server still starting.
    for endpoint in [endpoints.splitter, *(endpoints.worker(w) for w in range(PROCS))]:
        assert send(endpoint, [], keys, timeout=60) == "succeeded", endpoint

    # Strangers: a plain socket, and a CURVE client that knows the server's key but not
    # the hive's client key. Their handshakes fail; then the hive's own key gets through.
    foreign = ClientKeys.load(make_keys(tmp_path / "foreign").directory)
    refused: set[str] = set()
    for name, stranger in {
        "plain": None, "foreign": ClientKeys(foreign.public, foreign.secret, keys.server),
    }.items():
        *outcomes, urls = deliver(f"stranger-{name}", stranger)
        assert outcomes == ["failed", "failed"], name
        refused.update(urls.split())
    *outcomes, urls = deliver("welcome", keys)
    assert outcomes == ["succeeded", "succeeded"]
    wait_for(lambda: set(urls.split()) <= requested(web), timeout=30)
    assert not refused & requested(web)

    # Nothing a stranger sent took a process down; `hive stop` stops the hive.
    status = hive.status()
    assert status is not None
    assert {row["role"]: row["pid"] for row in status["processes"]} == pids
    assert all(row["alive"] for row in status["processes"])
    result = hive.run("stop")
    assert result.returncode == 0, result.stderr
    finish(process, code=ExitCode.STOPPED)
    assert "CURVE keys created" in (hive.data / "logs" / "supervisor.log").read_text()

    # A restart (faster now) reuses the keys, and the crawl ends.
    cfg = crawl_config(web, hive=settings, politeness={"min_delay": DELAY})
    hive.config = write_config(cfg, tmp_path / "fast.toml")
    finish(hive.start(PROCS))
    assert {p: p.read_bytes() for p in key_files} == made
    assert sorted(p for p in endpoints.keys.rglob("*") if p.is_file()) == key_files
    assert "CURVE keys reused" in (hive.data / "logs" / "supervisor.log").read_text()
    check_crawl(web, data=hive.data)
    assert not refused & requested(web)
