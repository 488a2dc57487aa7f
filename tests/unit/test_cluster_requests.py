"""``hive add`` and ``hive deny`` at a cluster's driver (hive/procs/cluster_requests.py): cut
by the ring, asked of the machines, answered as one machine answers."""

from __future__ import annotations

from typing import Any

import pytest

from hive import config
from hive.procs.cluster_plan import ClusterPlan
from hive.procs.cluster_requests import ClusterRequests


def plan() -> ClusterPlan:
    cfg = config.load(environ={})
    described = [{"name": n, "host": "127.0.0.1", "server_key": "k" * 40, "client_cert": ""}
                 for n in ("a", "b", "c")]
    return ClusterPlan.draw(described, 2, 64, 0, cfg.cluster)


class Machines:
    """The machines' supervisors as the driver sees them: what each was asked, and answers
    by the protocol of hive/procs/requests.py; ``down`` ones do not answer."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, dict[str, Any]]] = []
        self.down: set[str] = set()

    def __call__(self, calls: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for machine, (cmd, args) in calls.items():
            self.asked.append((machine, cmd, args))
            if machine in self.down:
                continue
            if cmd == "add":
                answers[machine] = {"accepted": len(args["urls"]), "batches": [7],
                                    "refused": {}, "examples": []}
            elif cmd == "add_answer":
                answers[machine] = {"new": 1, "seen": 1, "refused": 0}
            elif cmd == "deny":
                answers[machine] = {"denied": args["hosts"], "id": 3}
            else:
                answers[machine] = {"answered": 2, "workers": 2,
                                    "known": [0] if machine == "a" else []}
        return answers


def test_an_add_gives_each_machine_only_its_own_hosts_urls() -> None:
    machines, dropped = Machines(), set[str]()
    requests = ClusterRequests(plan(), dropped, machines, 2048)
    ring, the_plan = requests.ring, requests.plan
    urls = [f"http://h{i}.test/" for i in range(30)] + ["ftp://nope.test/"]
    queued = requests.add({"urls": urls})
    assert queued["accepted"] == 30 and queued["refused"] == {"scheme": 1}
    for machine, cmd, args in machines.asked:
        assert cmd == "add" and args["urls"]
        assert {the_plan.machine_of(ring.owner(u[7:-1])).name for u in args["urls"]} == {machine}
    assert sorted(queued["batches"]) == [["a", 7], ["b", 7], ["c", 7]]
    assert requests.add_answer({"batches": queued["batches"]}) == {
        "new": 3, "seen": 3, "refused": 0}
    # A dropped machine's URLs are refused as such; a machine down's are not added.
    dropped.add("b")
    machines.down.add("c")
    queued = requests.add({"urls": urls[:30]})
    owners = [the_plan.machine_of(ring.owner(u[7:-1])).name for u in urls[:30]]
    assert queued["refused"] == {"machine_dropped": owners.count("b"),
                                 "machine_down": owners.count("c")}
    assert queued["accepted"] == owners.count("a") and queued["batches"] == [["a", 7]]
    assert any("machine c did not answer" in e for e in queued["examples"])


def test_a_deny_goes_to_every_machine_not_dropped_and_counts_their_workers() -> None:
    machines, dropped = Machines(), {"c"}
    requests = ClusterRequests(plan(), dropped, machines, 2048)
    result = requests.deny({"hosts": ["x.test", "y.test:8080"]})
    assert result == {"denied": ["x.test", "y.test:8080"], "id": {"a": 3, "b": 3}}
    assert requests.deny_answer({"id": result["id"]}) == {
        "answered": 4, "workers": 4, "known": [0]}
    machines.down.add("b")  # b does not answer: its workers stay unconfirmed
    assert requests.deny_answer({"id": result["id"]})["answered"] == 2
    with pytest.raises(ValueError, match="is not a host"):
        requests.deny({"hosts": ["bad host"]})
    with pytest.raises(ValueError, match="map machines"):
        requests.deny_answer({"id": 3})
    with pytest.raises(ValueError, match="pairs"):
        requests.add_answer({"batches": [1, 2]})
