"""Frontier fixtures: a real LMDB directory, a small config, a reopen helper."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hive import config
from hive.core.record import UrlRecord
from hive.core.urls import canonicalize, host_key
from hive.frontier.frontier import Frontier

FAST: dict[str, dict[str, Any]] = {
    "politeness": {"min_delay": 1.0, "max_delay": 10.0, "backoff_base": 2.0, "backoff_max": 20.0},
    "fetch": {"threads": 4},
    "frontier": {"min_bound_hosts": 4, "sync_interval": 0.0},
}


def small_config(**sections: dict[str, Any]) -> config.Config:
    merged = {name: dict(values) for name, values in FAST.items()}
    for name, values in sections.items():
        merged.setdefault(name, {}).update(values)
    return config.load(environ={}).replace(**merged)


def rec(url: str, depth: int = 1, hint: int = 0) -> UrlRecord:
    canonical = canonicalize(url)
    return UrlRecord(canonical, host_key(canonical), depth=depth, hint=hint)


class Opener:
    """Opens a frontier on one directory; ``reopen`` closes (or abandons) and opens again."""

    def __init__(self, path: Path, cfg: config.Config) -> None:
        self.path, self.cfg = path, cfg
        self.frontier: Frontier | None = None

    def open(self, now: float = 0.0, seed: int = 1) -> Frontier:
        self.frontier = Frontier.from_config(self.path, self.cfg, rng=random.Random(seed), now=now)
        return self.frontier

    def reopen(self, now: float, crash: bool = False) -> Frontier:
        assert self.frontier is not None
        if crash:
            self.frontier.store.abandon()
        else:
            self.frontier.close(now)
        return self.open(now)

    def close(self) -> None:
        if self.frontier is not None and not self.frontier.store.closed:
            self.frontier.close(0.0)


@pytest.fixture
def opener(tmp_path: Path) -> Iterator[Callable[..., Opener]]:
    made: list[Opener] = []

    def make(**sections: dict[str, Any]) -> Opener:
        o = Opener(tmp_path / f"f{len(made)}", small_config(**sections))
        made.append(o)
        return o

    yield make
    for o in made:
        o.close()
