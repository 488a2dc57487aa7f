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

import contextlib
import json
import math
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest

from hive.core.ring import Ring
from hive.core.urls import canonicalize, fingerprint, host_hash, host_key
from hive.errors import URLError
from hive.frontier.refusals import Refusals
from hive.procs.cluster_plan import ClusterPlan
from hive.procs.lifecycle import ExitCode
from hive.storage.schema import META_REFUSALS, url_key
from hive.storage.store import Store
from hive.testweb import Web, WebProcess, as_received, duplicates, politeness_violations
from hive.testweb.graph import Response
from hive.testweb.requestlog import address_violations, received
from tests.conftest import WEB_ADDRESS, wait_for
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
# The one address of the test web, as one crawl holds it across machines.
IP_CONCURRENCY = 2
IP_MIN_DELAY = 0.05


class RayCluster:
    """A Ray cluster of this machine's processes, one node per hive machine."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={
            **NODE, "resources": {"hive-node-a": 1}})
        self.nodes = {"a": self.cluster.head_node}
        for name in MACHINES[1:]:
            self.add(name)

    @property
    def address(self) -> str:
        address: str = self.cluster.address
        return address

    def add(self, name: str) -> None:
        """Machine ``name`` joins (again), with its resource."""
        self.nodes[name] = self.cluster.add_node(**NODE, resources={f"hive-node-{name}": 1})

    def kill(self, name: str) -> None:
        """Machine ``name`` is lost: its Ray node and every process on it are killed."""
        self.cluster.remove_node(self.nodes.pop(name), allow_graceful=False)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    """The cluster, with RAY_ENV in this process's environment while it runs (restored
    after: an xdist worker runs other modules next, tests/test_cluster_netns.py among them)."""
    saved = {name: os.environ.get(name) for name in RAY_ENV}
    os.environ.update(RAY_ENV)
    ray_cluster = RayCluster()
    try:
        yield ray_cluster
    finally:
        ray_cluster.cluster.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=7, hosts=18, pages=8, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as server:
        yield server


def cluster_hive(tmp: Path, web: WebProcess, **sections: dict[str, Any]) -> Hive:
    # Ports of their own (three machines take 300 from the base): helpers and CI may run
    # other hives on this machine at the same time. Between Ray's worker ports (up to
    # 19999) and the kernel's ephemeral ones (32768 up), which Ray's processes bind.
    port = random.Random(str(tmp)).randrange(20000, 32400, 300)
    hive = Hive(tmp, web, cluster={"lease": LEASE, "renew": 0.5, "port": port},
                hive={"stats_interval": 0.5, "resend_after": 2.0}, **sections)
    hive.env.update(RAY_ENV)
    return hive


def node_dirs(hive: Hive) -> list[Path]:
    return [hive.data / "nodes" / name for name in MACHINES]


def check_cluster_crawl(web: WebProcess, hive: Hive, allowed_repeats: int = 0,
                        machines: tuple[str, ...] = MACHINES) -> None:
    """Polite at the server, every page fetched, nothing fetched twice (beyond
    ``allowed_repeats``), the stores of every machine of ``machines`` whole."""
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
        if directory.name not in machines:
            continue
        result = subprocess.run(hive.command("verify", "--data", str(directory)), env=hive.env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr


def machine_urls(hive: Hive) -> dict[str, set[str]]:
    """The URLs each machine's crawl logs say it fetched."""
    return {directory.name: set(received(directory / "logs")) for directory in node_dirs(hive)}


def fetched_by_two_machines(hive: Hive) -> set[str]:
    urls = list(machine_urls(hive).values())
    return {url for i, mine in enumerate(urls) for other in urls[i + 1:] for url in mine & other}


def machine_processes(hive: Hive, name: str) -> list[psutil.Process]:
    """Machine ``name``'s node actor, its supervisor and the supervisor's children."""
    state = json.loads((hive.data / "nodes" / name / "hive.json").read_text())
    supervisor = psutil.Process(state["pid"])
    return [supervisor.parent(), supervisor, *supervisor.children(recursive=True)]


def machines(hive: Hive) -> dict[str, dict[str, Any]]:
    status = hive.status()
    return {m["machine"]: m for m in status["machines"]} if status else {}


def test_cluster_machine_killed_mid_crawl_rejoins_and_resumes(
        cluster: RayCluster, tmp_path: Path, web: WebProcess) -> None:
    """Machine c's Ray node dies mid-crawl; it joins again under the same name, and its node
    actor resumes it from its stores with a new epoch; the batch ends complete. Every host
    of the test web is at one address, whose limits bind here: they hold at the server
    across the three machines and the kill (issue 28's limits across machines)."""
    hive = cluster_hive(tmp_path, web, politeness={
        "ip_concurrency": IP_CONCURRENCY, "ip_min_delay": IP_MIN_DELAY, "ip_grant_hold": 0.5})
    process = hive.start(1, "--cluster", cluster.address)
    wait_for(lambda: len(received(hive.data / "nodes" / "c" / "logs")) >= 5, timeout=60,
             interval=0.1)
    before = machines(hive)["c"]["epoch"]
    cluster.kill("c")
    wait_for(lambda: not machines(hive).get("c", {}).get("alive", True), timeout=30,
             interval=0.2)
    cluster.add("c")
    wait_for(lambda: (machines(hive).get("c", {}).get("epoch") or 0) > before, timeout=60,
             interval=0.2)
    shown = hive.run("status")
    assert "machines: a (epoch" in shown.stdout and "c: worker 2" in shown.stdout, shown.stdout
    text = finish(process, timeout=120)
    assert "the batch ended" in text, text[-2000:]
    # A fetch in flight at the kill may be fetched again, by the same machine only.
    check_cluster_crawl(web, hive, allowed_repeats=8)
    assert fetched_by_two_machines(hive) == set()
    # Starts within a second: a grant may start anywhere in its 0.5 s hold, and a start
    # stamped a little late by a loaded server may bunch with the next (one more).
    starts = math.floor((1 + 0.5) / IP_MIN_DELAY) + 2
    assert address_violations(web.requests, IP_CONCURRENCY, starts) == []


def test_cluster_machine_frozen_past_its_lease_is_fenced(
        cluster: RayCluster, tmp_path: Path, web: WebProcess) -> None:
    """Machine b's processes are stopped (SIGSTOP) past its lease: the head declares it lost
    and raises its epoch; thawed, its workers fetch nothing on the lapsed lease, its node
    finds its renewal refused and starts it again under a new epoch; the batch ends
    complete, and nothing was fetched by two machines."""
    hive = cluster_hive(tmp_path, web)
    process = hive.start(1, "--cluster", cluster.address)
    wait_for(lambda: len(received(hive.data / "nodes" / "b" / "logs")) >= 5, timeout=60,
             interval=0.1)
    frozen = machine_processes(hive, "b")
    for proc in frozen:
        proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: machines(hive).get("b", {}).get("lost"), timeout=4 * LEASE + 10,
                 interval=0.2)
    finally:
        for proc in frozen:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGCONT)
    thawed = time.time()
    wait_for(lambda: machines(hive).get("b", {}).get("rejoins"), timeout=60, interval=0.2)
    text = finish(process, timeout=120)
    assert "the batch ended" in text, text[-2000:]
    check_cluster_crawl(web, hive, allowed_repeats=8)
    assert fetched_by_two_machines(hive) == set()
    # Thawed, machine b's old worker found its lease over and sent no request; only the
    # worker its node started again, under the new epoch, fetched b's hosts again.
    hosts = {url.split("/")[2] for url in machine_urls(hive)["b"]}
    restarted = worker_opened(hive.data / "nodes" / "b" / "logs" / "worker-01.log")[-1]
    assert restarted > thawed
    sent = [r for r in web.requests if r.host in hosts and thawed < r.received < restarted]
    assert sent == [], sent[:3]


def test_cluster_resize_adds_a_machine_then_removes_one(
        cluster: RayCluster, tmp_path: Path, web: WebProcess) -> None:
    """Part of the test web crawled on machines a and b, stopped; started on a, b and c
    (every machine joined): the resize moves c's new worker's hosts to it, whole, through
    Ray; stopped again; started with ``--machines a,c``: b is drained into a and c and
    leaves. The crawl then ends complete and polite, nothing fetched twice, every store
    of the machines that stay verified."""
    # A second between a host's fetches: 18 hosts fetch at most 18 pages a second, so
    # --max-pages (counted each second) stops each start with most of the web to go.
    hive = cluster_hive(tmp_path, web, politeness={"min_delay": 1.0, "max_delay": 1.0})
    first = hive.start(1, "--cluster", cluster.address, "--machines", "a,b", "--max-pages", "20")
    finish(first, timeout=120, code=ExitCode.MAX_PAGES)
    assert not (hive.data / "nodes" / "c").exists()
    grown = hive.start(1, "--cluster", cluster.address, "--max-pages", "20")
    finish(grown, timeout=120, code=ExitCode.MAX_PAGES)
    log = (hive.data / "logs" / "supervisor.log").read_text()
    assert "cluster resized from a,b (2 workers) to a,b,c (3 workers)" in log, log[-3000:]
    # Machine c was added last: the hosts that moved all went to it.
    flows = re.search(r"\d+ hosts moved between machines \(([^)]*)\)", log)
    assert flows and flows[1] != "none", log[-3000:]
    assert all(flow.split()[0].endswith("->c") for flow in flows[1].split(", ")), flows[1]
    shrunk = hive.start(1, "--cluster", cluster.address, "--machines", "a,c")
    wait_for(lambda: hive.status() is not None, timeout=60, interval=0.2)
    status = hive.status()
    assert status is not None and status["resize"]["to"] == ["a", "c"], status
    # A resize is offline: a start while the crawl runs is refused, naming why.
    refused = subprocess.run(hive.command("start", "--cluster", cluster.address, "--machines",
                                          "a,b", "--data", str(hive.data), "--seeds",
                                          str(hive.seeds)),
                             env=hive.env, cwd=hive.env["PYTHONPATH"], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 1 and "is in use by pid" in refused.stderr, refused
    text = finish(shrunk, timeout=180)
    assert "the batch ended" in text, text[-2000:]
    log = (hive.data / "logs" / "supervisor.log").read_text()
    assert "cluster resized from a,b,c (3 workers) to a,c (2 workers)" in log, log[-3000:]
    b = json.loads((hive.data / "nodes" / "b" / "hive.json").read_text())
    assert b["left_cluster"] is True
    assert not list((hive.data / "nodes" / "b").glob("worker-??")), "b's stores retired"
    assert list((hive.data / "nodes" / "b").glob("worker-??.retired-*"))
    verified = subprocess.run(hive.command("verify", "--data", str(hive.data / "nodes" / "b")),
                              env=hive.env, capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and "left the cluster" in verified.stdout, verified
    check_cluster_crawl(web, hive, machines=("a", "c"))
    assert fetched_by_two_machines(hive) == set()
    # hive index still reaches b's WARCs: a machine that left keeps what it archived.
    indexed = hive.run("index", timeout=60)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    files = {json.loads(line.split(" ", 2)[2])["filename"]
             for line in (hive.data / "index.cdxj").read_text().splitlines()}
    archived = {path.name for path in (hive.data / "nodes" / "b" / "warc").glob("*.warc.gz")}
    assert archived and archived <= files, (archived, files)


def worker_opened(log: Path) -> list[float]:
    """When each process of a worker opened its store, by its log."""
    return [time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000
            for line in log.read_text().splitlines() if " open: " in line]


def test_cluster_stop_is_warm_on_every_machine(
        cluster: RayCluster, tmp_path: Path, web: WebProcess) -> None:
    """``hive stop`` mid-crawl stops every machine warmly: hive start exits as on one machine
    (stopped), each machine's supervisor says why, and every store verifies."""
    hive = cluster_hive(tmp_path, web)
    process = hive.start(1, "--cluster", cluster.address)
    wait_for(lambda: hive.status() is not None and all(
        len(received(d / "logs")) >= 3 for d in node_dirs(hive)), timeout=60, interval=0.2)
    stopped = hive.run("stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    text = finish(process, timeout=60, code=ExitCode.STOPPED)
    assert "stopped by hive stop" in text, text[-2000:]
    for directory in node_dirs(hive):
        state = json.loads((directory / "hive.json").read_text())
        assert state["ended"] == "stopped by hive stop" and state["pid"] is None, state
        result = subprocess.run(hive.command("verify", "--data", str(directory)), env=hive.env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
    assert fetched_by_two_machines(hive) == set()
    # hive index on the driver's directory merges every machine's WARCs into one index.
    indexed = hive.run("index", timeout=60)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    files = {json.loads(line.split(" ", 2)[2])["filename"][:len("hive-00")]
             for line in (hive.data / "index.cdxj").read_text().splitlines()}
    assert files == {"hive-00", "hive-01", "hive-02"}, files
    # hive report on the driver's directory: one report over every machine, a row each.
    reported = hive.run("report", timeout=120)
    assert reported.returncode == 0, reported.stdout + reported.stderr
    lines = {d.name: len(crawl_lines(d)) for d in node_dirs(hive)}
    assert f"{sum(lines.values()):,} lines from 3 crawl log file(s)" in reported.stdout, (
        reported.stdout, lines)
    page = (hive.data / "report.html").read_text()
    table = page[page.index('<section id="machines">'):].split("</section>")[0]
    for name, count in lines.items():
        assert re.search(rf'<tr><td>{name}</td><td></td><td class="n">1</td>'
                         rf'<td class="n">{count:,}</td>', table), (name, count, table)


@pytest.mark.parametrize(("address", "said"), [
    ("127.0.0.1:1", "cannot reach the Ray cluster: [Errno 111]"),
    ("nonsense", "cannot reach the Ray cluster: expected auto, ray://HOST:PORT or "
                 "HOST:PORT, got 'nonsense'"),
])
def test_cluster_address_nothing_answers_on_is_refused_at_once(
        tmp_path: Path, web: WebProcess, address: str, said: str) -> None:
    """A bad --cluster address is an error naming it, in seconds (Ray itself would retry
    it for minutes)."""
    hive = cluster_hive(tmp_path, web)
    result = subprocess.run(hive.command("start", "--cluster", address, "--data",
                                         str(hive.data), "--seeds", str(hive.seeds)),
                            env=hive.env, cwd=hive.env["PYTHONPATH"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and f"--cluster {address}: {said}" in result.stderr, result
    assert "Traceback" not in result.stderr


def crawl_lines(directory: Path) -> list[dict[str, Any]]:
    """Every whole line of a machine's crawl logs."""
    lines = []
    for path in sorted((directory / "logs").glob("crawl-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                lines.append(json.loads(line))
    return lines


def page_links(web: WebProcess, url: str) -> set[str]:
    """The in-scope URLs page ``url`` of the test web links to (rendered here, as served)."""
    parts = urlsplit(url)
    response = web.web.respond(parts.hostname or "", parts.path, port=web.port, tripwire=1)
    assert isinstance(response, Response)
    body = response.body.decode("utf-8", "replace")
    links = set()
    for href in re.findall(r'href="([^"]*)"', body):
        with contextlib.suppress(URLError):
            links.add(canonicalize(href.partition("#")[0], url))
    return links & web.in_scope_urls()


def url_state(store: Store, url: str) -> bytes | None:
    """The state a worker's store holds for canonical ``url`` (its first byte: p, d or r)."""
    return store.get("urls", url_key(host_hash(host_key(url)), fingerprint(url)))


def test_cluster_machine_gone_for_good_is_dropped_with_a_count(
        cluster: RayCluster, tmp_path: Path, web: WebProcess) -> None:
    """The machine that owns the test web's one address is killed for good mid-crawl: the
    others wait (their hosts' fetches need its grants, their outboxes keep its links) until
    ``hive drop`` names it. Then they refuse, and count, every URL of its hosts they held or
    find later, the address passes to a live owner, and the batch ends. Nothing is lost in
    silence: each URL the others found for the dropped machine's hosts was fetched, is in its
    frontier on its disk, or was refused with the reason machine_dropped."""
    # Every refusal gets a crawl-log line, to be checked one by one.
    hive = cluster_hive(tmp_path, web, frontier={"refusals_logged_per_host": 100_000})
    process = hive.start(1, "--cluster", cluster.address)
    wait_for(lambda: hive.status() is not None, timeout=60, interval=0.2)
    state = hive.state()
    ring = Ring.from_params(state["ring"])
    plan = ClusterPlan.from_dict(state["cluster"]["plan"])
    gone = plan.machine_of(ring.owner(WEB_ADDRESS)).name
    assert gone != "a", "machine a is the Ray head node: the test kills another"
    others = [name for name in MACHINES if name != gone]
    wait_for(lambda: len(received(hive.data / "nodes" / gone / "logs")) >= 5, timeout=60,
             interval=0.1)
    host_of = {plan.machine_of(ring.owner(host_key(web.web.url(name, "/", web.port)))).name:
               name for name in web.web.names}
    added = {name: web.web.url(host_of[name], "/added-by-hand", web.port) for name in MACHINES}
    cluster.kill(gone)
    try:
        wait_for(lambda: not machines(hive).get(gone, {}).get("alive", True), timeout=30,
                 interval=0.2)
        # hive add through the driver: each machine queues its own hosts' URLs; the lost
        # machine's are not added (and said so), a bad URL is refused, as on one machine.
        result = hive.run("add", *added.values(), "ftp://nope.test/")
        assert result.returncode == 0, result
        assert "added 2, already seen 0, refused 2" in result.stdout, result.stdout
        assert f"machine_down: machine {gone} did not answer" in result.stderr, result.stderr
        assert "add: refused scheme" in result.stderr, result.stderr
        result = hive.run("add", *(added[name] for name in others))
        assert result.returncode == 1 and "added 0, already seen 2, refused 0" in result.stdout
        unknown = hive.run("drop", "z")
        assert unknown.returncode == 1, unknown
        assert "no machine 'z' in this cluster (its machines: a, b, c)" in unknown.stderr
        up = hive.run("drop", "a")
        assert up.returncode == 1 and "machine a is not lost" in up.stderr, up
        assert "Traceback" not in unknown.stderr + up.stderr
        wait_for(lambda: machines(hive).get(gone, {}).get("lost"), timeout=4 * LEASE + 10,
                 interval=0.2)
        dropped = hive.run("drop", gone)
        assert dropped.returncode == 0 and f"dropped machine {gone}" in dropped.stdout, dropped
        again = hive.run("drop", gone)
        assert again.returncode == 0 and "already dropped" in again.stdout, again
        # hive deny reaches every machine left; a URL of the dropped machine's hosts is
        # refused with the reason.
        denied = hive.run("deny", host_of["a"] + f":{web.port}", "unknown.test")
        assert denied.returncode == 0, denied
        assert denied.stdout == f"denied: {host_of['a']}:{web.port}, unknown.test\n", denied
        assert denied.stderr.count("warning") == 1 and "unknown.test is not in" in denied.stderr
        result = hive.run("add", added[gone])
        assert result.returncode == 1, result
        assert "added 0, already seen 0, refused 1" in result.stdout, result.stdout
        assert f"add: refused machine_dropped: machine {gone} was dropped" in result.stderr
        bad = hive.run("deny", "bad host")
        assert bad.returncode == 1 and "is not a host" in bad.stderr, bad
        shown = hive.run("status")
        assert f"{gone} (epoch" in shown.stdout and "dropped)" in shown.stdout, shown.stdout
        # What the others held for it, refused at their next grant, shows in the status.
        wait_for(lambda: "machine_dropped" in hive.run("status").stdout, timeout=20,
                 interval=0.2)
        assert hive.state()["cluster"]["dropped"] == [gone]
        text = finish(process, timeout=120)
    finally:
        cluster.add(gone)
    assert "the batch ended" in text, text[-2000:]
    def of_gone(urls: set[str]) -> set[str]:
        return {url for url in urls if plan.machine_of(ring.owner(host_key(url))).name == gone}

    owned = of_gone(web.in_scope_urls())
    served = {r.url for r in web.requests if r.method == "GET"}
    # Nothing of the other machines' hosts is left undone (but the host denied).
    assert {url for url in web.in_scope_urls() - served if urlsplit(url).hostname != host_of[
        "a"]} <= owned
    refused: list[str] = []
    found: set[str] = set()
    for name in others:
        for line in crawl_lines(hive.data / "nodes" / name):
            if line.get("reason") == "machine_dropped":
                refused.append(line["url"])
            elif line.get("outcome") == "ok":
                found |= page_links(web, line["url"])
    assert refused and of_gone(set(refused)) == set(refused), refused[:5]
    # The count is every refusal (each logged here, the log bound raised), kept in the
    # workers' stores.
    tallied = 0
    for name in others:
        worker = plan.machine(name).first
        store = Store(hive.data / "nodes" / name / f"worker-{worker:02d}", sync_interval=0.0)
        try:
            tallied += Refusals.decode(store.get("meta", META_REFUSALS), 1).totals.get(
                "machine_dropped", 0)
        finally:
            store.close(time.time())
    assert tallied == len(refused)
    lost = plan.machine(gone).first
    store = Store(hive.data / "nodes" / gone / f"worker-{lost:02d}", sync_interval=0.0)
    try:
        held = {url for url in found & owned - served - set(refused)
                if (url_state(store, url) or b"")[:1] != b"p"}
    finally:
        store.close(time.time())
    assert held == set(), sorted(held)[:5]
    for directory in node_dirs(hive):
        result = subprocess.run(hive.command("verify", "--data", str(directory)), env=hive.env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
    # The machine has joined Ray again under its name: a start on the same directory keeps it
    # dropped (the same plan and ring, nothing started for it) and ends the batch at once.
    before = (hive.data / "nodes" / gone / "logs" / "supervisor.log").stat().st_size
    text = finish(hive.start(1, "--cluster", cluster.address), timeout=120)
    assert "the batch ended" in text, text[-2000:]
    assert (hive.data / "nodes" / gone / "logs" / "supervisor.log").stat().st_size == before
    assert hive.state()["cluster"]["dropped"] == [gone]
    assert Ring.from_params(hive.state()["ring"]) == ring
