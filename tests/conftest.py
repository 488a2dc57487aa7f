"""Shared fixtures: the synthetic web on loopback, a polling wait, and the guarantee
that no hive a test started outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hive import config
from hive.testweb import Web, WebProcess

WEB_ADDRESS = "127.0.0.2"
# Every `hive start` a test launches, each in a process group of its own.
LAUNCHED: list[subprocess.Popen[str]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with a slow test first, each module's tests kept together (its module-scoped
    fixtures are made once) and in their order: with ``--dist worksteal`` the two xdist
    workers start on the long end-to-end tests and finish on short unit tests, which an
    idle worker takes from the other (longest first, the schedule's tail is short)."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(autouse=True)
def no_hive_outlives_its_test() -> Iterator[None]:
    """Kill what is left of each hive a test started, whether it passed or failed."""
    yield
    while LAUNCHED:
        process = LAUNCHED.pop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(interval)


def crawl_config(server: WebProcess, **sections: dict[str, Any]) -> config.Config:
    """A config for crawling the test web fast: ms delays, short timeouts and retries."""
    base: dict[str, dict[str, Any]] = {
        "dns": {"resolve": [server.resolve], "allow_nets": [f"{WEB_ADDRESS}/32"]},
        "politeness": {
            "min_delay": 0.05, "max_delay": 0.2, "crawl_delay_cap": 0.5,
            "backoff_base": 1.0, "backoff_max": 2.0, "retry_after_cap": 2.5,
            # every host of the test web shares one address: the address limits stay on
            # (every fetch goes through its grant) but do not bind (the threads do)
            "ip_concurrency": 8, "ip_min_delay": 0.0,
        },
        "robots": {"retry_delay": 0.2, "tries": 2},
        "fetch": {
            "threads": 8, "connect_timeout": 1.0, "read_timeout": 1.0, "total_timeout": 2.0,
            "max_body_bytes": 2 << 20, "max_decoded_bytes": 4 << 20,
        },
        "frontier": {"max_urls_per_host": 60, "max_depth": 12, "sync_interval": 0.5},
    }
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    return config.load(environ={}).replace(**base)


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebProcess]:
    """The synthetic web on 127.0.0.2 (tripwire on 127.0.0.1), in a process of its own."""
    log = tmp_path_factory.mktemp("web") / "requests.jsonl"
    with WebProcess(Web(seed=3, hosts=24, pages=12), log, host=WEB_ADDRESS) as server:
        yield server


@contextlib.contextmanager
def tmpfs(mount: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``mount`` (made) with ``options``, unmounted after; the test is
    skipped where mounting is not allowed, but fails under CI (``CI`` set, as CI services
    set it), which runs as root: a skip there would hide the tests that need it."""
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        why = f"cannot mount a tmpfs here: {result.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI runs as root, where mounting is allowed)")
        pytest.skip(why)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
