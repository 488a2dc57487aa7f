"""The control requests the supervisor answers from what it holds, parsed and checked:
what became of an add (the owners' answers), which hosts a deny names and who has
applied it. A malformed request raises ValueError, which the control server answers as
an error (hive/procs/control.py); the supervisor wires these to its state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hive.core.urls import canonicalize, host_key
from hive.errors import URLError
from hive.procs.stats import WorkerReport

# hive add shows this many refused URLs (the rest are counted by reason); hive deny takes
# this many hosts at a time (a worker answers for each in its stats).
REFUSED_SHOWN = 20
MAX_DENY = 100


@dataclass(slots=True)
class Queued:
    """What ``queue`` did with URLs: how many went to the outbox, in which batches, and
    the refused ones by reason, with the first few (bounded) as examples."""

    accepted: int = 0
    batches: list[int] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def refuse(self, exc: URLError) -> None:
        self.refused[exc.reason] += 1
        if len(self.examples) < REFUSED_SHOWN:
            self.examples.append(str(exc))

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "batches": self.batches,
                "refused": dict(self.refused), "examples": self.examples}


def add_answer(request: dict[str, Any], reports: Iterable[WorkerReport]) -> dict[str, int]:
    """What the owners made of the batches of an add: new, seen, refused (see workerproc)."""
    batches = request.get("batches")
    if not isinstance(batches, list) or not all(isinstance(b, int) for b in batches):
        raise ValueError("'batches' must be a list of integers")
    answer = dict.fromkeys(("new", "seen", "refused"), 0)
    for report in reports:
        for seq in batches:
            for kind in answer:
                value = report.stats.get(f"add/{seq}/{kind}")
                answer[kind] += value if isinstance(value, int) else 0
    return answer


def deny_keys(request: dict[str, Any]) -> list[str]:
    """The host keys a deny names (at most MAX_DENY)."""
    hosts = request.get("hosts")
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise ValueError("'hosts' must be a list of strings")
    if len(hosts) > MAX_DENY:
        raise ValueError(f"at most {MAX_DENY} hosts at a time, got {len(hosts)}")
    keys = []
    for host in hosts:
        try:
            keys.append(host_key(canonicalize(host if "//" in host else f"http://{host}/")))
        except URLError as exc:
            raise ValueError(f"{host[:200]!r} is not a host: {exc}") from exc
    return keys


def deny_answer(request: dict[str, Any], reports: Iterable[WorkerReport],
                workers: int) -> dict[str, Any]:
    """Which workers have applied deny ``id``, and which of its hosts any of them knew."""
    ask = request.get("id")
    if not isinstance(ask, int):
        raise ValueError("'id' must be an integer")
    answered = [r for r in reports if r.stats.get(f"deny/{ask}")]
    prefix = f"deny/{ask}/"
    known = sorted({int(k[len(prefix):]) for r in answered for k in r.stats
                    if k.startswith(prefix) and k[len(prefix):].isdigit()})
    return {"answered": len(answered), "workers": workers, "known": known}
