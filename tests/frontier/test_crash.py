"""SIGKILL a process that admits and leases in a loop; reopen; nothing committed is lost."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hive.core.urls import fingerprint, host_hash, host_key
from hive.frontier.frontier import Frontier
from hive.storage.schema import url_key
from tests.frontier.conftest import small_config

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import json, random, sys
    from pathlib import Path
    from hive.outcome import Outcome
    from hive.frontier.frontier import Frontier
    from tests.frontier.conftest import rec, small_config

    path, log = Path(sys.argv[1]), open(sys.argv[2], "a", buffering=1)
    cfg = small_config(robots={"enabled": False}, politeness={"min_delay": 0.0})
    f = Frontier.from_config(path, cfg, rng=random.Random(3))
    now, n = 0.0, 0
    while True:
        batch = [rec(f"http://h{(n + i) % 37}.test/{n + i}") for i in range(50)]
        n += 50
        f.admit(batch, now)
        leases = []
        while len(leases) < 8 and (lease := f.pop_ready(now).lease) is not None:
            leases.append(lease)
        f.commit(now)
        log.write(json.dumps({"admitted": [r.url for r in batch],
                              "leased": [l.record.url for l in leases]}) + "\\n")
        for lease in leases[:4]:
            f.done(lease, Outcome("ok", 200), now, now + 0.001)
        f.commit(now)
        log.write(json.dumps({"done": [l.record.url for l in leases[:4]]}) + "\\n")
        now += 0.01
    """
)


def test_sigkill_loses_nothing_committed(tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "log.jsonl"
    rng = random.Random(11)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for round_ in range(3):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(store), str(log)], env=env)
        deadline = time.monotonic() + 20
        target = (round_ + 1) * 40 + rng.randint(0, 40)
        while time.monotonic() < deadline:
            if log.exists() and log.read_text().count("\n") >= target:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.05))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)

    admitted: set[str] = set()
    done: set[str] = set()
    for line in log.read_text().splitlines():
        if not line.endswith("}"):
            continue
        entry = json.loads(line)
        admitted.update(entry.get("admitted", []))
        done.update(entry.get("done", []))
    assert len(admitted) > 100

    f = Frontier.from_config(store, small_config(robots={"enabled": False}))
    try:
        stats = f.stats()
        assert stats["frontier/leased"] == 0
        assert stats["frontier/admitted"] >= len(admitted)
        finished = sum(v for k, v in stats.items() if k.startswith("frontier/done/"))
        assert finished >= len(done)
        assert stats["frontier/admitted"] == stats["frontier/pending"] + finished
        assert stats["frontier/recovered_leases"] >= 1
        with f.store.env.begin() as txn:
            states = dict(txn.cursor(db=f.store.db["urls"]))
        assert len(states) == stats["frontier/admitted"]
        assert sum(v[:1] == b"p" for v in states.values()) == stats["frontier/pending"]
        for url in admitted:
            state = states[url_key(host_hash(host_key(url)), fingerprint(url))]
            assert state == b"dok" if url in done else state[:1] == b"p" or state == b"dok", url
    finally:
        f.close(0.0)
