"""The consistent-hash ring: which worker owns a host (pure).

A host key is owned by exactly one worker, so politeness stays local to that
worker. Policy:

- Each worker ``w`` places ``vnodes`` points on a 64-bit circle, at
  ``mmh3.hash64(b"w#v", seed)`` for ``v`` in ``0..vnodes-1``. A host key hashes
  to ``mmh3.hash64(utf8(host_key), seed)`` and belongs to the worker of the
  first point at or clockwise after that hash.
- A worker's points depend only on its own index, never on ``procs``, so going
  from N to N+1 workers moves only the hosts that the new worker claims (about
  1/(N+1) of them) and going from N to N-1 moves only the removed worker's hosts.
  A ``idx = hash % procs`` partition would move almost every host instead.
- The default of 2048 points per worker keeps every worker of 16 within ±10 %
  of its share (the spread of a worker's share shrinks as 1/sqrt(vnodes); 256
  points leave a worker ~19 % off). A ring costs ``procs * vnodes`` 64-bit
  points, built once.
- Hashes are mmh3, never Python's ``hash()``, so every process, on every run,
  agrees. Changing the point or key formula moves every host of every existing
  data directory; tests pin known owners to catch that.
- A ring places a host key by its **ring key** under the ring's ``key`` scheme
  (hive.core.keys: ``"host"``, the host key, or ``"domain"``, its registered
  domain), part of its params and so of ``hive.json``: params recorded without
  one are a ring of before the scheme, ``"host"``. ``owner`` takes the host key;
  its memo of owners is by host key, so the registered domain is computed once
  per host while the memo holds it.
- Keys are hashed as bytes (UTF-8, lone surrogates passed through): mmh3 5.x
  crashes the interpreter on a ``str`` holding a lone surrogate.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping

import mmh3

from hive.core.keys import HOST, SCHEMES, ring_key

DEFAULT_VNODES = 2048
# Host keys whose owner a ring remembers (a look-up is a hash and a bisection, a remembered
# one a dict read); the memo is cleared when full, so it holds at most this many.
OWNER_MEMO = 100_000
MAX_PROCS = 65535
MAX_VNODES = 65536
MAX_SEED = 0xFFFFFFFF


def _check(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"ring {name}: expected an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"ring {name}: must be in {low}..{high}, got {value}")
    return value


class Ring:
    """Maps host keys (by their ring keys) to worker indexes ``0..procs-1``; immutable once
    built (a memo of owners aside, which only saves look-ups)."""

    __slots__ = ("procs", "vnodes", "seed", "key", "_points", "_owners", "_memo")

    def __init__(self, procs: int, vnodes: int = DEFAULT_VNODES, seed: int = 0,
                 key: str = HOST) -> None:
        self.procs = _check("procs", procs, 1, MAX_PROCS)
        self.vnodes = _check("vnodes", vnodes, 1, MAX_VNODES)
        self.seed = _check("seed", seed, 0, MAX_SEED)
        if key not in SCHEMES:
            raise ValueError(f"ring key: expected one of {', '.join(SCHEMES)}, got {key!r}")
        self.key = key
        # Each point carries its worker in the low 16 bits, so one sort orders the
        # circle and breaks ties (two equal points) by worker index, the same in
        # every process.
        placed = sorted(
            mmh3.hash64(b"%d#%d" % (worker, v), seed, signed=False)[0] << 16 | worker
            for worker in range(procs)
            for v in range(vnodes)
        )
        self._points: list[int] = [p >> 16 for p in placed]
        self._owners: list[int] = [p & 0xFFFF for p in placed]
        self._memo: dict[str, int] = {}

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> Ring:
        """Rebuild a ring from ``params`` (as recorded in a data directory; without a
        ``key``, as before the scheme was recorded: ``"host"``)."""
        if not {"procs", "vnodes", "seed"} <= set(params) <= {"procs", "vnodes", "seed", "key"}:
            raise ValueError(
                f"ring params: expected procs, vnodes, seed (and key), got {sorted(params)}")
        procs = _check("procs", params["procs"], 1, MAX_PROCS)
        vnodes = _check("vnodes", params["vnodes"], 1, MAX_VNODES)
        seed = _check("seed", params["seed"], 0, MAX_SEED)
        key = params.get("key", HOST)
        if not isinstance(key, str):
            raise ValueError(f"ring key: expected a string, got {key!r}")
        return cls(procs, vnodes, seed, key)

    @property
    def params(self) -> dict[str, int | str]:
        """What identifies this ring: record it, compare it, rebuild from it."""
        return {"procs": self.procs, "vnodes": self.vnodes, "seed": self.seed, "key": self.key}

    def owner(self, host_key: str) -> int:
        """The index of the worker that owns ``host_key``: the owner of its ring key."""
        owner = self._memo.get(host_key)
        if owner is None:
            if len(self._memo) >= OWNER_MEMO:
                self._memo.clear()
            owner = self._memo[host_key] = self._place(ring_key(host_key, self.key))
        return owner

    def _place(self, host_key: str) -> int:
        key = mmh3.hash64(host_key.encode("utf-8", "surrogatepass"), self.seed, signed=False)[0]
        i = bisect_left(self._points, key)
        return self._owners[i if i < len(self._points) else 0]

    def moved(self, other: Ring, host_keys: Iterable[str]) -> list[str]:
        """The host keys, in input order, whose owner differs between this ring and ``other``."""
        return [key for key in host_keys if self.owner(key) != other.owner(key)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ring):
            return NotImplemented
        return self.params == other.params

    def __hash__(self) -> int:
        return hash((self.procs, self.vnodes, self.seed, self.key))

    def __repr__(self) -> str:
        return (f"Ring(procs={self.procs}, vnodes={self.vnodes}, seed={self.seed}, "
                f"key={self.key!r})")
