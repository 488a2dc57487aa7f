"""The frontier keeps politeness by the politeness key (hive.core.keys), not by the host."""

from __future__ import annotations

from pathlib import Path

from hive.core.politeness import Politeness
from hive.core.urls import host_hash
from hive.frontier.frontier import Frontier
from hive.outcome import Kind, Outcome
from tests.frontier.conftest import rec, small_config


def test_the_frontier_keeps_politeness_by_its_politeness_key(tmp_path: Path) -> None:
    """Two hosts of one politeness key (a test-only key) share one back queue's timing:
    one lease at a time, and the second waits the delay after the first; with the host
    as the key (today's) they are leased at once."""

    def one_server(key: str) -> str:
        return "shared" if key in ("a.test", "b.test") else key

    cfg = small_config(robots={"enabled": False})
    urls = [rec("http://a.test/1"), rec("http://b.test/1")]
    apart = Frontier.from_config(tmp_path / "apart", cfg)
    apart.admit(urls, 0.0)
    first, second = apart.pop_ready(0.0).lease, apart.pop_ready(0.0).lease
    assert first is not None and second is not None, "two hosts: two leases at once"
    assert first.host_hash != second.host_hash
    apart.close(0.0)

    f = Frontier(
        tmp_path / "shared", cfg.frontier, Politeness.from_config(cfg.politeness),
        threads=cfg.fetch.threads, robots=False, politeness_key=one_server,
    )
    f.admit([rec("http://a.test/1"), rec("http://b.test/1")], 0.0)
    lease = f.pop_ready(0.0).lease
    assert lease is not None and lease.host_hash == host_hash("shared")
    assert f.pop_ready(0.0).lease is None, "one fetch in flight per politeness key"
    f.done(lease, Outcome(Kind.OK, 200), 0.0, 0.0)
    waiting = f.pop_ready(0.5)
    assert waiting.lease is None and waiting.wake_at is not None
    assert waiting.wake_at >= cfg.politeness.min_delay, "the other host waits the shared delay"
    later = f.pop_ready(cfg.politeness.min_delay)
    assert later.lease is not None and later.lease.host_hash == host_hash("shared")
    assert {lease.record.url, later.lease.record.url} == {"http://a.test/1", "http://b.test/1"}
    host = f.back.host(host_hash("shared"))
    assert host is not None and host.host_key == "shared"
    f.close(1.0)
