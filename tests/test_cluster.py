"""One hive across a Ray cluster (``hive start --cluster``), faults and all, on this machine.

A cluster of three machines from ``ray.cluster_utils.Cluster``, each a Ray node
on loopback with its own resource ``hive-node-<name>`` and its own data
directory (``cluster.node_data``: standing for its local disk), crawls the test
web through the real CLI. Everything is judged at the server and in the stores:
never two requests at once to a host, every page fetched (nothing lost:
``hive verify`` on every machine's data), and no URL fetched by two machines
but those in flight at a kill.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hive.testweb import Web, WebProcess, as_received, duplicates, politeness_violations
from hive.testweb.requestlog import received
from tests.conftest import WEB_ADDRESS
from tests.test_hive import DELAY, STAMP_SKEW, Hive, finish

pytestmark = pytest.mark.slow

# Ray on loopback only, without its dashboard or usage reports: what every process of the
# cluster (the test's, the nodes', hive start's) inherits.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
NODE = {"num_cpus": 1, "object_store_memory": 80 << 20, "node_ip_address": "127.0.0.1",
        "include_dashboard": False}
MACHINES = ("a", "b", "c")
LEASE = 3.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    os.environ.update(RAY_ENV)
    from ray.cluster_utils import Cluster

    ray_cluster = Cluster(initialize_head=True, head_node_args={
        **NODE, "resources": {"hive-node-a": 1}})
    try:
        for name in MACHINES[1:]:
            ray_cluster.add_node(**NODE, resources={f"hive-node-{name}": 1})
        yield ray_cluster
    finally:
        ray_cluster.shutdown()


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=7, hosts=18, pages=8, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as server:
        yield server


def cluster_hive(tmp: Path, web: WebProcess) -> Hive:
    hive = Hive(tmp, web, cluster={"lease": LEASE, "renew": 0.5},
                hive={"stats_interval": 0.5, "resend_after": 2.0})
    hive.env.update(RAY_ENV)
    return hive


def node_dirs(hive: Hive) -> list[Path]:
    return [hive.data / "nodes" / name for name in MACHINES]


def check_cluster_crawl(web: WebProcess, hive: Hive, allowed_repeats: int = 0) -> None:
    """Polite at the server, every page fetched, nothing fetched twice (beyond
    ``allowed_repeats``), every machine's stores whole."""
    requests = web.requests
    gaps = dict.fromkeys(web.web.names, DELAY)
    gaps.update(web.web.crawl_delay)
    times: dict[str, list[float]] = {}
    for directory in node_dirs(hive):
        for url, stamps in received(directory / "logs").items():
            times.setdefault(url, []).extend(stamps)
    timed = as_received(requests, {url: sorted(t) for url, t in times.items()})
    assert politeness_violations(timed, gaps, tolerance=STAMP_SKEW) == []
    fetched = {r.url for r in requests if r.method == "GET"}
    missing = web.in_scope_urls() - fetched
    assert not missing, sorted(missing)[:5]
    repeated = duplicates(requests)
    assert sum(n - 1 for n in repeated.values()) <= allowed_repeats, repeated
    for directory in node_dirs(hive):
        result = subprocess.run(hive.command("verify", "--data", str(directory)), env=hive.env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr


def test_cluster_crawls_to_the_end(cluster: Any, tmp_path: Path, web: WebProcess) -> None:
    hive = cluster_hive(tmp_path, web)
    process = hive.start(1, "--cluster", cluster.address)
    text = finish(process, timeout=120)
    assert "the batch ended" in text, text[-2000:]
    check_cluster_crawl(web, hive)
