"""A hypothesis state machine drives the frontier against a simple model.

After every step: no host is leased twice at once; no host is leased before
the model's earliest allowed time (finish + min_delay, or Retry-After);
nothing admitted is lost or duplicated (the frontier's pending count and the
model's agree, every lease is a pending URL); the counters agree with the
model. Steps include close + reopen and crash (abandon the open transaction)
+ reopen, after which leased URLs are pending again and their hosts wait.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hive.core.lease import Lease, LeaseKind
from hive.frontier.frontier import Frontier
from hive.outcome import Outcome
from tests.frontier.conftest import rec, small_config

HOSTS = ["a.test", "b.test", "c.test", "d.test", "e.test"]
MIN_DELAY = 1.0
CFG = small_config(
    politeness={"min_delay": MIN_DELAY, "max_delay": 5.0, "backoff_base": 2.0},
    frontier={"min_bound_hosts": 2, "max_bound_hosts": 3, "park_horizon": 4.0, "max_retries": 1},
    fetch={"threads": 1},
)
OUTCOMES = ["ok", "ok", "ok", "http_404", "timeout", "http_429", "robots"]


class FrontierMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="hive-stateful-"))
        self.now = 0.0
        self.frontier = self._open()
        self.pending: set[str] = set()
        self.finished: set[str] = set()
        self.attempts: dict[str, int] = {}
        self.leases: dict[str, Lease] = {}
        self.sent: set[str] = set()
        self.allowed_at: dict[str, float] = {}
        self.committed: tuple[set[str], set[str]] = (set(), set())

    def _open(self) -> Frontier:
        return Frontier.from_config(self.dir, CFG, rng=random.Random(7), now=self.now)

    @rule(
        urls=st.lists(
            st.tuples(st.sampled_from(HOSTS), st.integers(0, 30), st.integers(0, 9)),
            min_size=1, max_size=12,
        )
    )
    def admit(self, urls: list[tuple[str, int, int]]) -> None:
        records = [rec(f"http://{h}/{p}", hint=1 + level % 8) for h, p, level in urls]
        new = {r.url for r in records} - self.pending - self.finished
        assert self.frontier.admit(records, self.now) == len(new)
        self.pending |= new

    @rule(dt=st.floats(0.0, 3.0))
    def tick(self, dt: float) -> None:
        self.now += dt

    @rule()
    def pop(self) -> None:
        ready = self.frontier.pop_ready(self.now)
        lease = ready.lease
        if lease is None:
            if ready.wake_at is not None:
                assert ready.wake_at >= self.now - 1e-9
            return
        host = lease.record.host_key
        assert host not in self.leases, f"{host} leased twice"
        assert self.now >= self.allowed_at.get(host, 0.0) - 1e-6, (host, self.now)
        if lease.kind != LeaseKind.ROBOTS:
            assert lease.record.url in self.pending, lease.record.url
        self.leases[host] = lease

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data(), download=st.floats(0.0, 0.3))
    def finish(self, data: st.DataObject, download: float) -> None:
        """Only a committed lease is fetched: the caller commits between pop and fetch."""
        host = data.draw(st.sampled_from(sorted(self.sent)))
        self.sent.discard(host)
        lease = self.leases.pop(host)
        started, finished = self.now, self.now + download
        if lease.kind == LeaseKind.ROBOTS:
            outcome = Outcome("robots_ok", 200, robots_until=1e9)
        else:
            kind = data.draw(st.sampled_from(OUTCOMES))
            retry_after = 3.0 if kind == "http_429" else None
            outcome = Outcome(kind, contacted=kind != "robots", retry_after=retry_after)
            url = lease.record.url
            retried = kind in CFG.frontier.retry_outcomes
            if retried and self.attempts.get(url, 0) < CFG.frontier.max_retries:
                self.attempts[url] = self.attempts.get(url, 0) + 1
            else:
                self.pending.discard(url)
                self.finished.add(url)
        self.frontier.done(lease, outcome, started, finished)
        if outcome.contacted:
            wait = max(MIN_DELAY, outcome.retry_after or 0.0)
            self.allowed_at[host] = max(self.allowed_at.get(host, 0.0), finished + wait)
        self.now = finished

    @rule()
    def commit(self) -> None:
        self.frontier.commit(self.now)
        self.committed = (set(self.pending), set(self.finished))
        self.sent = set(self.leases)

    @rule(crash=st.booleans())
    def reopen(self, crash: bool) -> None:
        if crash:
            self.frontier.store.abandon()
            self.pending, self.finished = (set(s) for s in self.committed)
            self.attempts = {u: n for u, n in self.attempts.items() if u in self.pending}
        else:
            self.frontier.close(self.now)
            self.sent = set(self.leases)
        for host in self.sent:
            self.allowed_at[host] = max(self.allowed_at.get(host, 0.0), self.now + MIN_DELAY)
        self.leases.clear()
        self.sent.clear()
        self.frontier = self._open()
        self.committed = (set(self.pending), set(self.finished))

    @invariant()
    def nothing_lost_or_duplicated(self) -> None:
        stats = self.frontier.stats()
        assert stats["frontier/pending"] == len(self.pending)
        assert stats["frontier/leased"] == len(self.leases)
        done = sum(v for k, v in stats.items() if k.startswith("frontier/done/"))
        assert done == len(self.finished)
        assert stats["frontier/admitted"] == len(self.pending) + len(self.finished)

    def teardown(self) -> None:
        if not self.frontier.store.closed:
            self.frontier.close(self.now)
        shutil.rmtree(self.dir, ignore_errors=True)


FrontierMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None
)
TestFrontierMachine = FrontierMachine.TestCase
