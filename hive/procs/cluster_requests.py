"""``hive add`` and ``hive deny`` on a cluster: the driver's answers, from the machines'.

The CLI asks a cluster's driver (hive/procs/cluster.py) as it asks one machine's
supervisor, with the same requests (``add``, ``add_answer``, ``deny``,
``deny_answer``: hive/procs/requests.py) and gets answers of the same shape, so
its replies and exit codes are one machine's. The driver answers each by asking
the machines' supervisors through their node actors, all at once (``ask``: a
request and its arguments by machine; the answers by machine, without the
machines that did not answer in time):

- **add** cuts the URLs by the ring: each machine is given only the URLs its own
  workers own (a seed never crosses machines: hive/procs/fence.py). A URL that
  does not parse is refused here with its reason, as a supervisor refuses it; one
  of a dropped machine's hosts is refused as ``machine_dropped``, and the URLs a
  machine did not take (it is down or lost) as ``machine_down``. The batches are
  ``[machine, seq]`` pairs, which ``add_answer`` asks each machine about.
- **deny** goes to every machine not dropped: any worker may hold a host's URLs
  in its outbox, and its owner's frontier ends them. Its ``id`` is each
  machine's deny id by name; ``deny_answer`` sums the machines' answers over the
  workers of every machine not dropped, so a machine that did not take the deny
  leaves it unconfirmed, as a worker that did not answer does on one machine.

A malformed request raises ValueError, which the control server answers as an
error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Set
from typing import Any

from hive.core.ring import Ring
from hive.errors import URLError
from hive.procs.cluster_plan import ClusterPlan
from hive.procs.requests import REFUSED_SHOWN, Queued, deny_keys
from hive.procs.seeds import seed_record

Ask = Callable[[dict[str, tuple[str, dict[str, Any]]]], dict[str, Any]]

DROPPED = "machine_dropped"
DOWN = "machine_down"


class ClusterRequests:
    """The driver's add and deny over the machines of ``plan`` (see the module docstring)."""

    def __init__(self, plan: ClusterPlan, dropped: Set[str], ask: Ask,
                 max_url_length: int) -> None:
        self.plan = plan
        self.ring: Ring = plan.ring()
        self.dropped = dropped  # the driver's own set: drops made later count at once
        self.ask = ask
        self.max_url_length = max_url_length

    def _live(self) -> list[str]:
        return [m.name for m in self.plan.machines if m.name not in self.dropped]

    def add(self, request: dict[str, Any]) -> dict[str, Any]:
        urls = request.get("urls")
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise ValueError("'urls' must be a list of strings")
        queued, cut = Queued(), dict[str, list[str]]()
        for line in urls:
            try:
                record = seed_record(line, self.max_url_length)
            except URLError as exc:
                queued.refuse(exc)
                continue
            machine = self.plan.machine_of(self.ring.owner(record.host_key)).name
            if machine in self.dropped:
                queued.refuse(URLError(DROPPED, record.url, f"machine {machine} was dropped"))
            else:
                cut.setdefault(machine, []).append(line)
        batches: list[list[Any]] = []
        parts = self.ask({machine: ("add", {"urls": lines}) for machine, lines in cut.items()})
        for machine, lines in cut.items():
            try:
                part = parts[machine]
                accepted, seqs = int(part["accepted"]), list(part["batches"])
                refused, examples = dict(part["refused"]), list(part["examples"])
            except (KeyError, TypeError, ValueError):
                queued.refused[DOWN] += len(lines)
                if len(queued.examples) < REFUSED_SHOWN:
                    queued.examples.append(f"{DOWN}: machine {machine} did not answer: its "
                                           f"{len(lines)} URLs are not added")
                continue
            queued.accepted += accepted
            batches += [[machine, seq] for seq in seqs]
            queued.refused.update(refused)
            queued.examples += examples[:max(REFUSED_SHOWN - len(queued.examples), 0)]
        return {**queued.to_dict(), "batches": batches}

    def add_answer(self, request: dict[str, Any]) -> dict[str, int]:
        batches = request.get("batches")
        if not isinstance(batches, list) or not all(
                isinstance(b, list) and len(b) == 2 and isinstance(b[0], str)
                and isinstance(b[1], int) for b in batches):
            raise ValueError("'batches' must be a list of [machine, batch] pairs")
        by_machine: dict[str, list[int]] = {}
        for machine, seq in batches:
            by_machine.setdefault(machine, []).append(seq)
        answer: Counter[str] = Counter(dict.fromkeys(("new", "seen", "refused"), 0))
        # A machine that did not answer is asked again on the CLI's next turn.
        parts = self.ask({machine: ("add_answer", {"batches": seqs})
                          for machine, seqs in by_machine.items()})
        for part in parts.values():
            answer.update({k: int(part.get(k, 0)) for k in ("new", "seen", "refused")})
        return dict(answer)

    def deny(self, request: dict[str, Any]) -> dict[str, Any]:
        keys = deny_keys(request)  # checked here: a bad host is refused before any machine
        parts = self.ask({machine: ("deny", {"hosts": keys}) for machine in self._live()})
        # A machine that did not answer is left out: its workers stay unconfirmed.
        ids = {machine: part["id"] for machine, part in parts.items()
               if isinstance(part, dict) and isinstance(part.get("id"), int)}
        return {"denied": keys, "id": ids}

    def deny_answer(self, request: dict[str, Any]) -> dict[str, Any]:
        ids = request.get("id")
        if not isinstance(ids, dict) or not all(
                isinstance(k, str) and isinstance(v, int) for k, v in ids.items()):
            raise ValueError("'id' must map machines to deny ids")
        live = self._live()
        answered, known = 0, set[int]()
        parts = self.ask({machine: ("deny_answer", {"id": ask}) for machine, ask in ids.items()
                          if machine in live})
        for part in parts.values():
            answered += int(part.get("answered", 0))
            known.update(int(i) for i in part.get("known", []))
        workers = sum(self.plan.machine(name).count for name in live)
        return {"answered": answered, "workers": workers, "known": sorted(known)}
