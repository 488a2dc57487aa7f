"""The process shells built in this process and driven through ``loop_once``, over real
ZeroMQ sockets on ipc:// in a private run directory: the splitter's shedding, a poison
message in each shell's inbox, the supervisor's restarts and give-up, its batch end, and
its wait for a dying worker's store.

The supervisor's children are real processes started with ``spawn``, but stand-ins: one
that sleeps (a child that stays up) and one that exits at once (a child that keeps dying);
the workers' reports come from this test, through the supervisor's own inbox."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from hive import config
from hive.core import wire
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.errors import StoreError
from hive.procs.children import Child
from hive.procs.endpoints import (
    SEND_HWM,
    Endpoints,
    make_run_dir,
    pull,
    push,
    remove_run_dir,
)
from hive.procs.lifecycle import START_FAILED, ExitCode
from hive.procs.router import Router
from hive.procs.splitter import Splitter
from hive.procs.startcheck import store_released
from hive.procs.supervisor import Supervisor
from hive.procs.workerproc import WorkerProcess
from hive.storage.datadir import DataDir
from tests.conftest import wait_for

POISON = ([b"BATCH", b"\x00"], [b"NOT A KIND", b""], [b"STATS", b"\xff", b"{"])


@pytest.fixture
def endpoints(tmp_path: Path) -> Iterator[Endpoints]:
    """A private run directory short enough for every ipc:// address."""
    run_dir = make_run_dir(DataDir(tmp_path).socket_dir())
    yield Endpoints(run_dir)
    remove_run_dir(run_dir)


class Peers:
    """This test's own sockets, all closed when it ends."""

    def __init__(self) -> None:
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sockets: list[zmq.Socket[bytes]] = []

    def pull(self, endpoint: str) -> zmq.Socket[bytes]:
        self.sockets.append(pull(self.ctx, endpoint))
        return self.sockets[-1]

    def push(self, endpoint: str) -> zmq.Socket[bytes]:
        self.sockets.append(push(self.ctx, endpoint))
        return self.sockets[-1]

    def close(self) -> None:
        for sock in self.sockets:
            sock.close(linger=0)
        self.ctx.term()


@pytest.fixture
def peers() -> Iterator[Peers]:
    made = Peers()
    yield made
    made.close()


def batch(seq: int, *hosts: str) -> list[bytes]:
    return wire.encode_batch(1, seq, [UrlRecord(f"http://{h}/", h, 0) for h in hosts])


def received(sock: zmq.Socket[bytes], timeout: float = 0.5) -> list[list[bytes]]:
    """Every message ``sock`` takes until it has been quiet for ``timeout`` seconds."""
    out = []
    while sock.poll(int(timeout * 1000)):
        out.append(sock.recv_multipart())
    return out


def turn_until(role: Any, predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Run ``role``'s turns (on the real clock) until ``predicate`` holds."""

    def turned() -> Any:
        role.loop_once(time.time())
        return predicate()

    return wait_for(turned, timeout, interval=0.01)


# -- the splitter ------------------------------------------------------------------------


@pytest.fixture
def splitter(endpoints: Endpoints) -> Iterator[Splitter]:
    role = Splitter(endpoints, Ring(1), overflow=3)
    role.open()
    yield role
    role.close()


def test_the_splitter_bounds_its_overflow_within_a_turn(
        splitter: Splitter, endpoints: Endpoints, peers: Peers) -> None:
    """Ten batches for one worker in one turn: the overflow keeps the newest three.

    They come over inproc, bound beside the splitter's ipc address on its own inbox: an
    inproc send puts the message in the receiving socket's pipe before it returns, so all
    ten wait there when the turn starts (over ipc they would cross ZeroMQ's I/O thread on
    its own schedule, and a turn could see some of them only)."""
    assert splitter.ctx is not None
    splitter.inbox.bind("inproc://splitter-inbox")
    sender = splitter.ctx.socket(zmq.PUSH)
    try:
        sender.connect("inproc://splitter-inbox")
        for seq in range(10):
            sender.send_multipart(batch(seq, f"h{seq}.test"))
        splitter.loop_once(time.time())
    finally:
        sender.close(linger=0)
    assert splitter.counts["splitter/batches"] == 10
    assert splitter.counts["splitter/shed"] == 7
    worker = peers.pull(endpoints.worker(0))
    seqs = [wire.decode(frames).seq for frames in received(worker)]  # type: ignore[union-attr]
    assert seqs == [7, 8, 9]



def test_a_router_bounds_the_bytes_its_overflow_holds(endpoints: Endpoints,
                                                       peers: Peers) -> None:
    """Thirty 100 kB messages for an absent worker, under a 1 MB bound over all peers: the
    oldest are shed as the bytes pass it, the newest ten kept, and what a flush hands on
    leaves the count of held bytes; the count limit alone (1,000) would have kept all."""
    router = Router(peers.ctx, endpoints, Ring(2), None, overflow=1000, prefix="route",
                    overflow_bytes=1 << 20)
    try:
        big = [b"ADMIT", bytes(100_000)]
        for _ in range(30):
            router.send(0, big)
        assert router.held <= (1 << 20) and len(router.overflow[0]) == 10
        assert router.counts["route/shed"] == 20
        router.send(1, [b"ACK", b"x"])  # a small message for another peer is not shed
        assert len(router.overflow[1]) == 1 and router.counts["route/shed"] == 20
        worker = peers.pull(endpoints.worker(0))
        wait_for(lambda: not router.flush() or not router.overflow[0], 10.0, interval=0.01)
        assert len(received(worker)) == 10 and router.held == sum(
            len(frame) for frames in router.overflow[1] for frame in frames)
    finally:
        router.close()

def test_the_splitter_sheds_past_a_full_socket_and_counts_what_it_shed(
        splitter: Splitter, endpoints: Endpoints, peers: Peers) -> None:
    """Worker 0 is not there: its socket takes SEND_HWM messages, then a send would block.
    The splitter never blocks: three wait in its overflow, older ones are shed, and every
    message not counted as shed arrives once the worker is there."""
    sender = peers.push(endpoints.splitter)
    sent = 3 * (SEND_HWM // 3 + 10)
    for first in range(0, sent, 3):  # three a turn: the overflow alone never sheds
        for seq in range(first, first + 3):
            sender.send_multipart(batch(seq, f"h{seq}.test"))
        turn_until(splitter, lambda n=first + 3: splitter.counts["splitter/batches"] == n)
    shed = splitter.counts["splitter/shed"]
    assert shed > 0 and len(splitter.overflow[0]) == 3
    worker = peers.pull(endpoints.worker(0))
    turn_until(splitter, lambda: not splitter.overflow[0])
    seqs = [wire.decode(frames).seq for frames in received(worker)]  # type: ignore[union-attr]
    assert len(seqs) == sent - shed and seqs[-3:] == [sent - 3, sent - 2, sent - 1]


def test_a_poison_message_is_counted_and_dropped_and_the_splitter_goes_on(
        splitter: Splitter, endpoints: Endpoints, peers: Peers) -> None:
    worker = peers.pull(endpoints.worker(0))
    sender = peers.push(endpoints.splitter)
    for frames in POISON:
        sender.send_multipart(frames)
    sender.send_multipart(batch(7, "a.test", "b.test"))
    turn_until(splitter, lambda: splitter.counts["splitter/batches"] == 1)
    assert splitter.counts["splitter/bad"] == len(POISON)
    [admit] = [wire.decode(frames) for frames in received(worker)]
    assert isinstance(admit, wire.Admit) and admit.seq == 7 and len(admit.records) == 2


def test_the_splitter_routes_batches_only(
        splitter: Splitter, endpoints: Endpoints, peers: Peers) -> None:
    """Acknowledgements go from owner to origin directly: one sent to the splitter is not
    its to forward, and is counted as bad, not passed on."""
    supervisor = peers.pull(endpoints.supervisor)
    sender = peers.push(endpoints.splitter)
    sender.send_multipart(wire.encode_ack(wire.SUPERVISOR_ORIGIN, 3, 0, 1))
    sender.send_multipart(batch(4, "a.test"))
    turn_until(splitter, lambda: splitter.counts["splitter/batches"] == 1)
    assert splitter.counts["splitter/bad"] == 1 and received(supervisor, 0.1) == []


# -- the worker process ------------------------------------------------------------------


def test_a_seed_already_pending_as_a_link_is_answered_as_seen(
        tmp_path: Path, endpoints: Endpoints, peers: Peers) -> None:
    """``hive add`` of a URL a link brought in first: the seed becomes its live entry (a
    stronger discovery) and the owner answers it as already seen, neither new nor refused."""
    cfg = config.load(environ={}).replace(fetch={"threads": 1})
    role = WorkerProcess(cfg, tmp_path / "data", 0, endpoints, Ring(1))
    role.open()
    try:
        url = "http://a.test/deep/page.html"
        role.worker.admit([UrlRecord(url, "a.test", 3)], time.time())
        role.worker.frontier.commit(time.time())
        peers.pull(endpoints.supervisor)
        sender = peers.push(endpoints.worker(0))
        sender.send_multipart(wire.encode_admit(
            wire.SUPERVISOR_ORIGIN, 5, 0, 1, [UrlRecord(url, "a.test", 0, hint=1)]))
        turn_until(role, lambda: "add/5/new" in role.answers)
        assert role.worker.frontier.counts.get("frontier/upgraded") == 1
        assert {k: v for k, (v, _) in role.answers.items()} == {
            "add/5/new": 0, "add/5/seen": 1, "add/5/refused": 0}
    finally:
        role.stopping = True
        role.close()


def test_a_worker_routes_its_links_to_their_owners_and_they_ack_it_directly(
        tmp_path: Path, endpoints: Endpoints, peers: Peers) -> None:
    """No splitter between workers: a batch of worker 0's outbox is cut by owner and each
    part goes to its owner's inbox, naming the parts; the batch leaves the outbox once
    every owner has acknowledged its part to worker 0 itself."""
    ring = Ring(3)
    hosts = [f"h{i}.test" for i in range(60)]
    owners = {ring.owner(h) for h in hosts}
    assert owners == {0, 1, 2}
    others = [h for h in hosts if ring.owner(h) != 0]
    inboxes = {w: peers.pull(endpoints.worker(w)) for w in (1, 2)}
    cfg = config.load(environ={}).replace(fetch={"threads": 1})
    role = WorkerProcess(cfg, tmp_path / "data", 0, endpoints, ring)
    role.open()
    try:
        role.outbox.put([UrlRecord(f"http://{h}/", h, 1) for h in others], time.time())
        role.worker.frontier.commit(time.time())
        parts: dict[int, wire.Admit] = {}
        for worker, inbox in inboxes.items():
            message = wire.decode(turn_until(role, lambda s=inbox: s.poll(0) and
                                             s.recv_multipart()))
            assert isinstance(message, wire.Admit) and message.origin == 0
            parts[worker] = message
        assert sorted(m.part for m in parts.values()) == [0, 1]
        assert {m.parts for m in parts.values()} == {2}
        for worker, message in parts.items():
            assert {r.host_key for r in message.records} == {
                h for h in others if ring.owner(h) == worker}
        sender = peers.push(endpoints.worker(0))
        first, second = parts.values()
        sender.send_multipart(wire.encode_ack(0, first.seq, first.part, first.parts))
        turn_until(role, lambda: role.outbox.pending[first.seq].acked == {first.part})
        assert len(role.outbox) == 1  # one owner has its part: the batch is kept
        sender.send_multipart(wire.encode_ack(0, second.seq, second.part, second.parts))
        turn_until(role, lambda: len(role.outbox) == 0)
        assert len(role.outbox) == 0 and role.router.counts["route/parts"] == 2
    finally:
        role.stopping = True
        role.close()



def test_a_poison_message_is_counted_and_dropped_and_the_worker_goes_on(
        tmp_path: Path, endpoints: Endpoints, peers: Peers) -> None:
    cfg = config.load(environ={}).replace(fetch={"threads": 1}, hive={"stats_interval": 0.05})
    # The admission's origin is worker 1: the ack goes to its inbox, not through a splitter.
    origin, supervisor = peers.pull(endpoints.worker(1)), peers.pull(endpoints.supervisor)
    role = WorkerProcess(cfg, tmp_path / "data", 0, endpoints, Ring(2))
    role.open()
    try:
        sender = peers.push(endpoints.worker(0))
        for frames in POISON:
            sender.send_multipart(frames)
        sender.send_multipart(wire.encode_admit(
            1, 9, 0, 1, [UrlRecord("http://a.test/", "a.test", 0)]))
        turn_until(role, lambda: origin.poll(0))
        assert wire.decode(origin.recv_multipart()) == wire.Ack(1, 9, 0, 1)
        assert role.worker.counts["wire/bad"] == len(POISON)
        # A turn may have reported before it read all of the poison (a busy machine splits
        # the messages across turns): turn on until a report counts every one (reports go
        # every stats_interval).
        reports: list[wire.Message] = []

        def reported() -> bool:
            reports.extend(wire.decode(f) for f in received(supervisor, 0.01))
            return any(isinstance(r, wire.Stats) and r.values.get("wire/bad") == len(POISON)
                       for r in reports)

        turn_until(role, reported)
        assert all(isinstance(r, wire.Stats) for r in reports)
        last = reports[-1]
        assert isinstance(last, wire.Stats) and last.values["wire/bad"] == len(POISON)
    finally:
        role.stopping = True
        role.close()


# -- the supervisor ----------------------------------------------------------------------


class StandIns(Supervisor):
    """A supervisor whose children are stand-ins: the splitter sleeps, and each worker
    sleeps too or, if it is in ``dying``, exits at once with code 3. Counts launches."""

    def __init__(self, *args: Any, dying: tuple[int, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dying = dying
        self.launches: dict[str, int] = {}

    def _make_children(self, endpoints: Endpoints) -> list[Child]:
        spawn = multiprocessing.get_context("spawn")

        def starter(name: str, dies: bool) -> Callable[[], Any]:
            def start() -> Any:
                self.launches[name] = self.launches.get(name, 0) + 1
                if dies:
                    return spawn.Process(target=sys.exit, args=(3,))
                return spawn.Process(target=time.sleep, args=(60,))
            return start

        return [Child("splitter", "splitter.log", starter("splitter", False))] + [
            Child(f"worker {i}", f"worker-{i:02d}.log", starter(f"worker {i}", i in self.dying),
                  worker=i) for i in range(self.procs)]


@pytest.fixture
def opened() -> Iterator[Callable[[Supervisor], Supervisor]]:
    """Open supervisors, and stop and close each at the end of the test."""
    roles: list[Supervisor] = []

    def open_(role: Supervisor) -> Supervisor:
        role.open()
        roles.append(role)
        return role

    yield open_
    for role in roles:
        role.request_stop("the test is over", now=True)
        turn_until(role, lambda r=role: r.finished)  # type: ignore[misc]
        role.close()


def test_a_child_that_keeps_dying_is_restarted_then_given_up_on(
        tmp_path: Path, opened: Callable[[Supervisor], Supervisor]) -> None:
    cfg = config.load(environ={}).replace(
        hive={"max_restarts": 2, "restart_window": 60.0, "restart_backoff": 0.5})
    supervisor = opened(StandIns(cfg, tmp_path, 1, dying=(0,)))
    worker = next(child for child in supervisor.children if child.worker == 0)
    clock = time.time()

    def turned() -> bool:
        """A turn at ``clock``, which moves only past a backoff: however long a stand-in
        takes to start and die on this machine, its deaths are 0.5 s and 1 s apart."""
        nonlocal clock
        supervisor.loop_once(clock)
        if worker.process is None and not supervisor.stopping:
            clock = max(clock, worker.restart_at)
        return supervisor.stopping

    wait_for(turned, timeout=60)
    assert supervisor.launches == {"splitter": 1, "worker 0": 3}, "restarted twice"
    assert supervisor.stopping and supervisor.exit_code == ExitCode.ERROR
    assert supervisor.ended.startswith("worker 0 died 3 times in 60s (last exit code 3)")


def test_the_batch_ends_after_two_quiet_rounds_and_a_poison_message_does_not_stop_it(
        tmp_path: Path, endpoints: Endpoints, opened: Callable[[Supervisor], Supervisor],
        peers: Peers) -> None:
    supervisor = opened(StandIns(config.load(environ={}), tmp_path, 2))
    assert supervisor.endpoints is not None
    inbox = peers.push(supervisor.endpoints.supervisor)

    def report(worker: int, number: int, **stats: wire.JsonScalar) -> None:
        inbox.send_multipart(wire.encode_stats(worker, {
            "hive/report": number, "hive/idle": True, "hive/time": time.time(),
            "frontier/admitted": 5, **stats}))

    def reports_in(number: int) -> bool:
        return all(r.number == number for r in supervisor.stats.reports.values()) and len(
            supervisor.stats.reports) == 2

    for frames in POISON:
        inbox.send_multipart(frames)
    report(0, 1)
    report(1, 1)
    turn_until(supervisor, lambda: reports_in(1))
    assert supervisor.bad_messages == len(POISON) and not supervisor.stopping
    report(0, 2)
    report(1, 2, **{"frontier/done/ok": 1})  # a page fetched between the rounds
    turn_until(supervisor, lambda: reports_in(2))
    assert not supervisor.stopping, "a counter moved: the quiet rounds start again"
    report(0, 3)
    report(1, 3, **{"frontier/done/ok": 1})
    turn_until(supervisor, lambda: supervisor.stopping)
    assert supervisor.exit_code == ExitCode.ENDED and reports_in(3)
    assert supervisor.ended.startswith("the batch ended")
    assert supervisor.status()["bad_messages"] == len(POISON)


# -- a start after a kill ----------------------------------------------------------------


HOLD = """
import sys, time
from pathlib import Path
from hive.procs.lifecycle import Lock
from hive.storage.datadir import DataDir
lock = Lock(DataDir.store_lock(Path(sys.argv[1])), "a dying worker")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_store_is_judged_only_once_its_dying_writer_let_it_go(tmp_path: Path) -> None:
    """A worker of a killed hive may still be finishing a commit when the next start checks
    its store (a half-seen commit looks like a truncated file): the check waits for the
    store's lock, and names the holder if it never comes free."""
    store = tmp_path / "worker-00"
    store.mkdir()
    command = [sys.executable, "-c", HOLD, str(store)]
    with subprocess.Popen([*command, "0.5"], stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        started = time.monotonic()
        with store_released(store, "the store of worker 0", wait=10.0):
            assert holder.wait(timeout=5) == 0
        assert time.monotonic() - started >= 0.3
    with subprocess.Popen([*command, "30"], stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            with pytest.raises(StoreError, match="in use by pid"), \
                    store_released(store, "the store of worker 0", wait=0.3):
                pass
        finally:
            holder.kill()


def test_a_worker_that_cannot_be_imported_says_so_and_exits_start_failed(tmp_path: Path) -> None:
    """The workers' entry point imports the worker in the child: an installation where
    that import fails leaves a message in the failure file (which the supervisor reports
    as 'worker N could not start') and exits START_FAILED, no traceback."""
    failed = tmp_path / "worker-00.failed"
    script = (
        "import sys\n"
        "sys.modules['hive.procs.workerproc'] = None  # an import that fails\n"
        "from hive.procs.children import worker_main\n"
        f"worker_main({{}}, 'data', 0, {{}}, {{}}, 1, {str(failed)!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == START_FAILED, done.stderr
    assert failed.read_text().startswith("cannot import the worker: ModuleNotFoundError")
    assert "Traceback" not in done.stderr
