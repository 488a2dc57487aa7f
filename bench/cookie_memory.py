"""A worker's memory under hostile cookies: 200 hosts each setting 49 cookies of 64,000 bytes.

    python bench/cookie_memory.py                    # the issue's case on this checkout
    python bench/cookie_memory.py --case under       # 49 cookies of 4,000 bytes a host
    python bench/cookie_memory.py --case many        # 400 hosts filling a 2 MiB jar
    python bench/cookie_memory.py --hive /tmp/old    # another checkout's crawler

The cookie hosts of hive.testweb.cookies (this checkout's, whatever ``--hive``
says) are served by ``python -m hive.testweb`` on 127.0.0.2: ``/`` sets a
session cookie, ``/set/<count>x<size>.html`` the big ones, then three pages
follow. ``hive start --procs 1`` (from ``--hive``'s checkout) crawls them with
``fetch.cookies`` on and 8 threads, to the end of the batch. Every 0.1 s the
bench reads the worker's RssAnon (/proc/<pid>/status) and, from ``/metrics``,
the bytes its cookie jars account for (``hive_cookie_bytes``; absent before the
byte bounds existed). It prints RssAnon at the worker's first sample, its peak
and its last; the jars' largest accounted bytes against ``fetch.cookie_jar_mb``;
the cookies refused and dropped; and, at the server, how many of the pages
asked for after the big cookies carried the host's session cookie (all of them,
but in ``many``, whose jar is too small for every host: there the least
recently used hosts lose theirs). Figures in bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hive.errors import HiveError  # noqa: E402
from hive.storage.datadir import DataDir  # noqa: E402
from hive.testweb import Web, WebProcess  # noqa: E402
from hive.testweb.cookies import CookieWeb  # noqa: E402

ADDRESS = "127.0.0.2"
DELAY = 0.05
# (hosts, cookies a host sets, bytes each, fetch.cookie_jar_mb or None for the default)
CASES: dict[str, tuple[int, int, int, float | None]] = {
    "big": (200, 49, 64_000, None),
    "under": (200, 49, 4000, None),
    "many": (400, 2, 4000, 2.0),
}
_METRIC = re.compile(r'^(hive_cookie\w*?)(?:_total)?\{([^}]*)\} ([0-9.e+]+)$', re.MULTILINE)


@dataclass
class Samples:
    """What the sampler saw of the worker."""

    rss_first: float = 0.0
    rss_peak: float = 0.0
    rss_last: float = 0.0
    jar_peak: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)


def rss_anon_mb(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^RssAnon:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) / 1024 if match else None


def scrape(port: int) -> dict[str, float]:
    """The cookie figures of /metrics: ``hive_cookie_bytes`` and the counters by label."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for name, labels, value in _METRIC.findall(text):
        label = ",".join(part for part in labels.split(",") if not part.startswith("worker="))
        out[f"{name}{{{label}}}" if label else name] = float(value)
    return out


def sample(data: Path, metrics_port: int, stop: threading.Event, samples: Samples) -> None:
    while not stop.wait(0.1):
        try:
            pids = (DataDir(data).read_state() or {}).get("pids", {})
        except HiveError:
            continue
        pid = next((p for role, p in pids.items() if role.startswith("worker")), None)
        rss = rss_anon_mb(pid) if isinstance(pid, int) else None
        if rss is None:
            continue
        samples.rss_first = samples.rss_first or rss
        samples.rss_peak = max(samples.rss_peak, rss)
        samples.rss_last = rss
        figures = scrape(metrics_port)
        samples.jar_peak = max(samples.jar_peak, figures.pop("hive_cookie_bytes", 0.0))
        if figures:
            samples.counters = figures


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def this_checkout() -> Iterator[None]:
    """PYTHONPATH set to this checkout while in the block (the cookie web's process is
    started there, and is this checkout's whatever crawler runs)."""
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous


def run(case: str, hive: Path, work: Path, timeout: float) -> tuple[Samples, int, int, int | None]:
    """Crawl one case; (samples, pages asked after the big cookies, of them carrying the
    session, the hive's exit code or None on timeout)."""
    hosts, count, size, jar_mb = CASES[case]
    web = Web(seed=1, hosts=1, pages=1, hostile=False)
    cookies = CookieWeb(web.domain, hosts=hosts, count=count, size=size)
    metrics_port = free_port()
    fetch: dict[str, object] = {"cookies": True, "threads": 8}
    if jar_mb is not None:
        fetch["cookie_jar_mb"] = jar_mb
    sections: dict[str, dict[str, object]] = {
        "dns": {"resolve": [f"*.{web.domain}={ADDRESS}"], "allow_nets": [f"{ADDRESS}/32"]},
        # every host shares one address: the address limits off (bench_addresses.py)
        "politeness": {"min_delay": DELAY, "max_delay": DELAY, "ip_concurrency": 0},
        "fetch": fetch,
        "hive": {"metrics_port": metrics_port, "stats_interval": 0.1},
    }
    (work / "hive.toml").write_text("".join(
        f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())
        for name, values in sections.items()))
    data, samples, stop = work / "data", Samples(), threading.Event()
    with this_checkout(), WebProcess(web, work / "requests.jsonl", host=ADDRESS,
                                      cookies=cookies) as server:
        (work / "seeds.txt").write_text("\n".join(cookies.seeds(server.port)) + "\n")
        sampler = threading.Thread(target=sample, args=(data, metrics_port, stop, samples),
                                   daemon=True)
        sampler.start()
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "--config", str(work / "hive.toml"), "start",
             "--procs", "1", "--seeds", str(work / "seeds.txt"), "--data", str(data), "--quiet"],
            cwd=hive, env={**os.environ, "PYTHONPATH": str(hive)}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            code: int | None = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait()
            code = None
        stop.set()
        sampler.join()
        after = [r for r in server.requests if r.path.startswith("/after/")]
    carried = sum(cookies.session(r.hostname) in r.cookie.split("; ") for r in after)
    return samples, len(after), carried, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(CASES), default="big")
    parser.add_argument("--hive", type=Path, default=ROOT,
                        help="the checkout whose crawler runs (default: this one)")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    hosts, count, size, jar_mb = CASES[args.case]
    with tempfile.TemporaryDirectory(prefix="cookie-memory-") as tmp:
        started = time.time()
        samples, after, carried, code = run(args.case, args.hive.resolve(), Path(tmp),
                                            args.timeout)
        seconds = time.time() - started
    limit = (jar_mb or 16.0) * (1 << 20)
    print(f"{args.case}: {hosts} hosts x {count} cookies of {size:,} bytes, crawler from "
          f"{args.hive}; {seconds:.0f}s, exit code {code}")
    print(f"worker RssAnon: {samples.rss_first:.0f} MB first, {samples.rss_peak:.0f} MB peak, "
          f"{samples.rss_last:.0f} MB last")
    print(f"cookie jars: at most {samples.jar_peak / (1 << 20):.2f} MiB accounted "
          f"(limit {limit / (1 << 20):.1f} MiB)")
    for name, value in sorted(samples.counters.items()):
        print(f"  {name} {value:,.0f}")
    print(f"at the server: {carried} of {after} pages asked for after the big cookies "
          f"carried the session cookie")
    # A jar too small for every host's cookies drops whole hosts: their later pages go bare.
    ok = code == 0 and samples.jar_peak <= limit and after == 3 * hosts and (
        jar_mb is not None or carried == after)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
