"""Chaos run: kill -9 any process of a crawling hive at random moments, then check the crawl.

    python bench/chaos.py [--kills 50] [--hosts 60] [--pages 20] [--procs 3] [--seed 1]

It serves the synthetic web (``hive.testweb``, hostile hosts left out) on
127.0.0.2 in a process of its own and crawls it with ``hive start --procs N``.
The politeness delay (2 s by default) is longer than a restart takes, so a
hive that forgot a host's delay, or its fetch in flight, across a kill is
caught fetching it too soon; and 60 hosts x 100 pages at that delay last long
enough (over 200 s) for 50 kills to land before the batch ends.
A seeded schedule names each victim — the supervisor (the ``hive start``
process itself), the splitter or a worker — and how long to wait, once the
hive is up (every child alive, every worker reporting), before sending it
SIGKILL. After a child's death the next kill waits for the supervisor to have
restarted it (its pid in ``hive.json`` changes); after the supervisor's, for
its children to be gone, and then ``hive start`` runs again on the same data
directory, as it does whenever the start process exits before the batch
ended. The batch then ends by itself, and the run is judged at the server and
on disk:

- every in-scope page was fetched (nothing lost) and no page robots.txt forbids;
- pages fetched twice are at most the leases held by the processes killed
  (``max_leases``: one per fetch thread and the queued backlog, any of them
  fetched but not yet committed) of each worker killed, all workers' for the
  supervisor (its children die with it), none for the splitter;
- politeness held across every restart (``politeness_violations`` with the
  configured delay, 10 ms tolerance): a host whose fetch was in flight when its
  worker died waits its full delay from the restart. The server stamps a
  response's end after writing it, and a machine that starves the server's
  process makes that stamp late (by seconds, under load); so each response
  ends at the earlier of that stamp and the moment the hive's crawl log says
  it had the response — never before the server wrote it, so still a bound the
  true gap respects. Violations by the server's stamps alone are shown too;
- ``hive verify`` passes: every URL in exactly one state in every store.

It prints one table and exits 1 if an invariant failed. ``tests/test_chaos.py``
runs a short version of it in the suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psutil

from hive.errors import ControlError, HiveError
from hive.procs.control import ControlClient
from hive.procs.endpoints import Endpoints
from hive.procs.worker import max_leases
from hive.storage.datadir import DataDir
from hive.testweb import (
    Web,
    WebProcess,
    as_received,
    duplicates,
    politeness_violations,
    received,
)

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = "127.0.0.2"
SUPERVISOR = "supervisor"
BATCH_ENDED = "the batch ended"
TOLERANCE = 0.01
POLL = 0.05

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Params:
    """What to crawl, how, and how to break it."""

    hosts: int = 60
    pages: int = 100
    procs: int = 3
    threads: int = 8
    delay: float = 2.0
    crawl_delay: float = 2.5
    kills: int = 50
    seed: int = 1
    max_wait: float = 1.0
    timeout: float = 1800.0


@dataclass(frozen=True, slots=True)
class Kill:
    """One entry of the schedule: SIGKILL ``role`` ``wait`` seconds after the hive is up."""

    role: str
    wait: float

    @property
    def kind(self) -> str:
        return self.role.split()[0]


def schedule(params: Params) -> list[Kill]:
    """The seeded kill schedule: the same params give the same victims and waits."""
    rng = random.Random(params.seed)
    roles = [SUPERVISOR, "splitter", *(f"worker {i}" for i in range(params.procs))]
    return [Kill(rng.choice(roles), rng.uniform(0.0, params.max_wait))
            for _ in range(params.kills)]


@dataclass(slots=True)
class Result:
    """What a chaos run did and what it left behind."""

    params: Params
    work: Path
    kills: Counter[str]
    restarts: int
    in_scope: int
    pages: int
    lost: list[str]
    twice: dict[str, int]
    violations: list[str]
    server_violations: list[str]
    forbidden: list[str]
    verify_ok: bool
    verify_output: str
    seconds: float

    @property
    def twice_bound(self) -> int:
        """Leases a killed process can hold (so URLs fetched again, at most)."""
        workers = self.kills["worker"] + self.params.procs * self.kills[SUPERVISOR]
        return max_leases(self.params.threads) * workers

    @property
    def fetched_twice(self) -> int:
        return sum(n - 1 for n in self.twice.values())

    @property
    def ok(self) -> bool:
        return (self.verify_ok and not self.lost and not self.violations and not self.forbidden
                and self.fetched_twice <= self.twice_bound)


def poll(predicate: Callable[[], T | None], deadline: float, what: str) -> T:
    """Poll ``predicate`` until it returns a truthy value; TimeoutError at ``deadline``."""
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(POLL)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Crawl:
    """``hive start`` on one data directory, restarted whenever it exits before the batch ended."""

    def __init__(self, work: Path, server: WebProcess, params: Params,
                 sections: Mapping[str, Mapping[str, Any]]) -> None:
        self.work = work
        self.data = work / "data"
        self.seeds = work / "seeds.txt"
        self.seeds.write_text("\n".join(server.seeds()) + "\n")
        self.params = params
        settings: dict[str, dict[str, Any]] = {
            "dns": {"resolve": [server.resolve], "allow_nets": [f"{ADDRESS}/32"]},
            # every host shares one address: the address limits off (bench_addresses.py)
            "politeness": {"min_delay": params.delay, "max_delay": params.delay,
                           "crawl_delay_cap": params.crawl_delay, "ip_concurrency": 0},
            "robots": {"retry_delay": 0.2, "tries": 2},
            "fetch": {"threads": params.threads},
        }
        for section, values in sections.items():
            settings.setdefault(section, {}).update(values)
        self.settings = [item for section, values in settings.items()
                         for key, value in values.items()
                         for item in ("-s", f"{section}.{key}={json.dumps(value)}")]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cli", *self.settings, *args, "--data", str(self.data)]

    def start(self) -> None:
        """``hive start`` in the background, its output in ``start-N.out`` (a pipe could fill)."""
        self.runs += 1
        with (self.work / f"start-{self.runs}.out").open("wb") as out:
            self.process = subprocess.Popen(
                self.command("start", "--procs", str(self.params.procs), "--seeds",
                             str(self.seeds), "--quiet"),
                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)

    @property
    def running(self) -> subprocess.Popen[bytes]:
        assert self.process is not None, "start() first"
        return self.process

    def state(self) -> dict[str, Any]:
        try:
            return DataDir(self.data).read_state() or {}
        except HiveError:
            return {}

    def pid(self, role: str) -> int | None:
        pid = self.state().get("pids", {}).get(role)
        return pid if isinstance(pid, int) else None

    def ended(self) -> bool:
        """The start process exited, and it did because the batch ended."""
        return (self.running.poll() is not None
                and str(self.state().get("ended", "")).startswith(BATCH_ENDED))

    def up(self) -> bool:
        """This start's supervisor answers, every child is alive and every worker has reported."""
        state = self.state()
        if self.running.poll() is not None or state.get("pid") != self.running.pid:
            return False
        try:
            with ControlClient(Endpoints.from_dict(state["endpoints"]).control, 2.0) as client:
                status = client.call("status")
        except ControlError:
            return False
        assert isinstance(status, dict)
        return not status["stopping"] and all(
            row["alive"] and (row["role"] == "splitter" or row["stats"])
            for row in status["processes"]
        )

    def settle(self, deadline: float) -> bool:
        """Wait until the hive is up (True) or the batch has ended (False), restarting it."""
        while True:
            poll(lambda: self.running.poll() is not None or self.up(), deadline,
                 "the hive to come up")
            if self.running.poll() is None:
                return True
            if self.ended():
                return False
            self.start()

    def kill(self, role: str, deadline: float) -> bool:
        """SIGKILL ``role`` and wait for its restart; False if it was not running."""
        if role == SUPERVISOR:
            pids = self.state().get("pids", {}).values()
            children = [pid for pid in pids if isinstance(pid, int)]
            if self.running.poll() is not None:
                return False
            self.running.kill()
            self.running.wait()
            poll(lambda: all(_gone(pid) for pid in children), deadline,
                 "the supervisor's children to die with it")
            self.start()
            return True
        pid = self.pid(role)
        if pid is None or self.running.poll() is not None:
            return False
        try:
            victim = psutil.Process(pid)
            if victim.ppid() != self.running.pid:
                return False
            victim.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            return False
        poll(lambda: self.pid(role) not in (None, pid) or self.running.poll() is not None,
             deadline, f"the supervisor to restart {role}")
        return True

    def stop(self) -> None:
        """Kill a start still running (after a failure): its children die with it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def verify(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command("verify"), env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)


def run(work: Path, params: Params,
        sections: Mapping[str, Mapping[str, Any]] | None = None) -> Result:
    """Crawl under the kill schedule until the batch ends; judge the outcome."""
    web = Web(seed=params.seed, hosts=params.hosts, pages=params.pages, hostile=False,
              robots_crawl_delay=params.crawl_delay)
    kills: Counter[str] = Counter()
    started = time.monotonic()
    deadline = started + params.timeout
    with WebProcess(web, work / "requests.jsonl", host=ADDRESS) as server:
        crawl = Crawl(work, server, params, sections or {})
        try:
            crawl.start()
            for kill in schedule(params):
                if not crawl.settle(deadline):
                    break
                time.sleep(kill.wait)  # the random moment, not a synchronisation
                if crawl.kill(kill.role, deadline):
                    kills[kill.kind] += 1
            while True:
                poll(lambda: crawl.running.poll() is not None, deadline, "the batch to end")
                if crawl.ended():
                    break
                crawl.start()
        finally:
            crawl.stop()
        seconds = time.monotonic() - started
        requests = server.requests
        in_scope = server.in_scope_urls()
        disallowed = server.web.disallowed_urls(server.port)
    verified = crawl.verify()
    gaps = dict.fromkeys(web.names, params.delay)
    gaps.update(web.crawl_delay)
    fetched = {r.url for r in requests if r.method == "GET"}
    return Result(
        params=params, work=work, kills=kills, restarts=crawl.runs - 1,
        in_scope=len(in_scope), pages=len(in_scope & fetched), lost=sorted(in_scope - fetched),
        twice=duplicates(requests),
        violations=politeness_violations(
            as_received(requests, received(DataDir(crawl.data).logs)), gaps, tolerance=TOLERANCE),
        server_violations=politeness_violations(requests, gaps, tolerance=TOLERANCE),
        forbidden=sorted(fetched & disallowed),
        verify_ok=verified.returncode == 0, verify_output=verified.stdout + verified.stderr,
        seconds=seconds,
    )


def table(result: Result) -> str:
    p, kills = result.params, result.kills
    by_role = ", ".join(f"{kind} {kills[kind]}" for kind in (SUPERVISOR, "splitter", "worker"))
    rows = [
        ("kills", f"{sum(kills.values())} of {p.kills} ({by_role})"),
        ("restarts of hive start", str(result.restarts)),
        ("pages", f"{result.pages} of {result.in_scope} in scope"),
        ("lost", str(len(result.lost))),
        ("fetched twice", f"{result.fetched_twice} (bound {result.twice_bound}: "
                          f"{max_leases(p.threads)} leases x ({kills['worker']} workers + "
                          f"{p.procs} x {kills[SUPERVISOR]} supervisors) killed)"),
        ("politeness violations", f"{len(result.violations)} ({len(result.server_violations)} "
                                  "by the server's end stamps alone)"),
        ("disallowed fetched", str(len(result.forbidden))),
        ("hive verify", "ok" if result.verify_ok else "FAILED"),
        ("wall time", f"{result.seconds:.1f} s"),
    ]
    head = (f"chaos run: {p.hosts} hosts x {p.pages} pages, {p.procs} workers x {p.threads} "
            f"fetch threads, {p.delay:g}s delay, seed {p.seed}; data in {result.work}")
    return "\n".join([head, *(f"  {name:<24}{value}" for name, value in rows)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Params):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default),
                            default=field.default)
    params = Params(**vars(parser.parse_args()))
    result = run(Path(tempfile.mkdtemp(prefix="hive-chaos-")), params)
    print(table(result))
    for problem in [*result.lost[:5], *result.violations[:5], *result.forbidden[:5]]:
        print(f"  ! {problem}")
    if not result.verify_ok:
        print(result.verify_output)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
