"""Crawl again: a recrawl against a full crawl of the same site, and change-rate order
against plain order when the recrawl is cut short.

    python bench/bench_recrawl.py [--pages 1000] [--cut 0.3] [--seed 7] [--repeat 3]

**The site.** Debian's nginx serves a generated site of ``--pages`` pages (about 20 KB of
text each, near the median HTML page's size) on 127.0.0.4: an index, sections of 20
pages, each page linking ten others.
nginx answers conditional requests as any static server does (``ETag`` of time and
size, ``Last-Modified``). Each page has a change rate drawn once (seed ``--seed``): half
never change, 30 % change at 0.1 an epoch, 20 % at 1.0 an epoch (a Poisson process: an
epoch changes a page with probability 1 - exp(-rate)), as studies of the web find most
pages stable and a few changing often (Cho and Garcia-Molina; Fetterly et al.).

**The run.** ``crawl0``, a full crawl; an epoch; ``crawl1 --recrawl-from crawl0``; an
epoch; ``crawl2 --recrawl-from crawl1`` (its plan carries crawl1's history, so crawl2's
own has three observations of each page); an epoch, the one measured. Then, on that one
state of the site, one after the other:

- ``full``: a plain crawl from the seed, as if there were no prior crawl;
- ``recrawl``: ``--recrawl-from crawl2``, to its end;
- ``cut, change rate`` and ``cut, plain``: the same, ``--max-pages`` at ``--cut`` of the
  pages, with ``recrawl.order`` ``change_rate`` (the default) and ``plain``. A stop
  lets the fetches in flight end and the supervisor hears of pages every
  ``hive.stats_interval``, so a crawl stops some pages past the cut: the share of changes
  found is counted over the first ``--cut`` of the pages it fetched (its crawl log's
  lines, in the order written), the same for both orders.

The full crawl and the whole recrawl run ``--repeat`` times, alternating, and their rows
give the median CPU, with the median of the pairs' ratios above the table. Each row:
requests and bytes nginx sent (its access log: ``$bytes_sent``, headers
included), hive's CPU seconds (every process of the crawl, ``getrusage`` of the
children, the plan's making included and shown apart: it is made in a process of its own,
as ``hive start --recrawl-from`` makes it before the hive starts), and of the pages the
last epoch changed, the share ``hive changes`` reports ``changed``. Every crawl runs
``--procs 1``, 4 fetch threads, a 5 ms delay. Prints a table; bench/README.md ("Crawl
again") has a run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pwd
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = "127.0.0.4"
HOST = "site.recrawl.test"
SECTION = 20
LINKS = 10
RATES = ((0.5, 0.0), (0.3, 0.1), (0.2, 1.0))  # (share of pages, changes an epoch)


@dataclass
class Row:
    name: str
    requests: int
    sent: int
    cpu: float
    found: float | None = None
    plan_cpu: float = 0.0


class Site:
    """The generated site and nginx serving it."""

    def __init__(self, folder: Path, pages: int, rng: random.Random) -> None:
        self.folder, self.pages, self.rng = folder, pages, rng
        self.root = folder / "root"
        self.log = folder / "access.jsonl"
        self.version = [0] * pages
        self.rates = [rate for share, rate in RATES for _ in range(round(share * pages))]
        self.rates += [0.0] * (pages - len(self.rates))
        rng.shuffle(self.rates)
        self.links = [rng.sample(range(pages), LINKS) for _ in range(pages)]
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    def write(self, page: int, epoch: int) -> None:
        section = page // SECTION
        links = "".join(f'<li><a href="/s{other // SECTION}/p{other}.html">page {other}</a>'
                        for other in self.links[page])
        words = " ".join(f"w{(page * 7919 + i * self.version[page]) % 9973}" for i in range(3000))
        path = self.root / f"s{section}" / f"p{page}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<!DOCTYPE html><html><head><title>Page {page}</title></head><body>"
                        f"<h1>Page {page}, version {self.version[page]}</h1><ul>{links}</ul>"
                        f"<p>{words}</p></body></html>\n")
        stamp = 1_700_000_000 + epoch * 3600
        os.utime(path, (stamp, stamp))

    def build(self) -> None:
        sections = math.ceil(self.pages / SECTION)
        self.root.mkdir(parents=True)
        (self.root / "index.html").write_text(
            "<!DOCTYPE html><html><head><title>Index</title></head><body><ul>"
            + "".join(f'<li><a href="/s{s}/index.html">section {s}</a>' for s in range(sections))
            + "</ul></body></html>\n")
        for s in range(sections):
            (self.root / f"s{s}").mkdir()
            (self.root / f"s{s}" / "index.html").write_text(
                "<!DOCTYPE html><html><body><ul>" + "".join(
                    f'<li><a href="p{p}.html">page {p}</a>'
                    for p in range(s * SECTION, min((s + 1) * SECTION, self.pages)))
                + "</ul></body></html>\n")
        for page in range(self.pages):
            self.write(page, 0)

    def epoch(self, number: int) -> set[str]:
        """Change each page with its probability for one epoch; the URLs changed."""
        changed = set()
        for page, rate in enumerate(self.rates):
            if self.rng.random() < 1 - math.exp(-rate):
                self.version[page] += 1
                self.write(page, number)
                changed.add(f"{self.origin}/s{page // SECTION}/p{page}.html")
        return changed

    def start(self) -> None:
        with socket.socket() as probe:
            probe.bind((ADDRESS, 0))
            self.port = probe.getsockname()[1]
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        temp = self.folder / "temp"
        temp.mkdir(exist_ok=True)
        conf = self.folder / "nginx.conf"
        conf.write_text(
            f"{user}worker_processes 1;\ndaemon off;\npid {self.folder / 'nginx.pid'};\n"
            f"error_log {self.folder / 'error.log'};\nevents {{ worker_connections 64; }}\n"
            "http {\n    types { text/html html; }\n"
            + "".join(f"    {kind}_temp_path {temp / kind};\n"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + "    log_format bench escape=json '{\"status\": $status, \"sent\": $bytes_sent}';\n"
            f"    access_log {self.log} bench;\n"
            f"    server {{ listen {ADDRESS}:{self.port}; server_name {HOST}; "
            f"root {self.root}; }}\n}}\n")
        nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
        if nginx is None:
            raise SystemExit("nginx is not installed (apt-get install nginx)")
        self.process = subprocess.Popen(
            [nginx, "-p", str(self.folder), "-c", str(conf), "-e", str(self.folder / "e.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex((ADDRESS, self.port)) == 0:
                    return
            time.sleep(0.05)
        raise SystemExit("nginx did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def traffic(self, since: int) -> tuple[int, int, int]:
        """Requests and bytes sent after line ``since`` of the log; the lines now."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        hits = [json.loads(line) for line in lines[since:]]
        return len(hits), sum(hit["sent"] for hit in hits), len(lines)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def hive(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", "--config", str(config), *args],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=900)


def crawl(site: Site, tmp: Path, config: Path, name: str, *extra: str) -> tuple[Path, Row]:
    data = tmp / name
    _, _, since = site.traffic(0)
    before = children_cpu()
    done = hive(config, "start", "--procs", "1", "--data", str(data), "--seeds",
                str(tmp / "seeds.txt"), "--quiet", *extra)
    cpu = children_cpu() - before
    if done.returncode not in (0, 4):  # 4: --max-pages reached
        raise SystemExit(f"{name}: hive exited {done.returncode}:\n{done.stdout}{done.stderr}")
    requests, sent, _ = site.traffic(since)
    return data, Row(name, requests, sent, cpu)


def median_row(name: str, rows: list[Row]) -> Row:
    """One row of runs alike but for their CPU: its median (and its plan's)."""
    found = [row.found for row in rows if row.found is not None]
    return Row(name, rows[0].requests, rows[0].sent, statistics.median(r.cpu for r in rows),
               found[0] if found else None, statistics.median(r.plan_cpu for r in rows))


def plan(tmp: Path, name: str, source: Path) -> float:
    """Make the plan of a recrawl from ``source`` in its data directory, as ``hive start
    --recrawl-from`` would (which then finds it made); the CPU seconds it took."""
    data = tmp / name
    before = children_cpu()
    subprocess.run([sys.executable, "-c",
                    "import sys; from pathlib import Path; "
                    "from hive.export.recrawl import build_plan; "
                    "build_plan([Path(sys.argv[1])], Path(sys.argv[2]), Path(sys.argv[3]))",
                    str(source), str(data), str(data / "recrawl.jsonl")],
                   cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return children_cpu() - before


def found(config: Path, data: Path, changed: set[str], first: int | None = None) -> float:
    """The share of ``changed`` that ``hive changes`` reports changed; with ``first``, of
    those among the first pages fetched (the crawl log's lines with a change, in the order
    they were written: one worker)."""
    if first is None:
        done = hive(config, "changes", "--data", str(data), "--out", "-")
        lines = [json.loads(line) for line in done.stdout.splitlines()]
    else:
        logged = (json.loads(line) for log in sorted((data / "logs").glob("crawl-*.jsonl"))
                  for line in log.read_text().splitlines())
        lines = [line for line in logged if "change" in line][:first]
    hits = {line["url"] for line in lines if line["change"] == "changed"}
    return len(hits & changed) / len(changed) if changed else 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--cut", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3,
                        help="alternating runs of the full crawl and the whole recrawl")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hive-recrawl-") as name:
        tmp = Path(name)
        site = Site(tmp / "site", args.pages, random.Random(args.seed))
        site.build()
        site.start()
        try:
            config = tmp / "hive.toml"
            config.write_text(
                f'[dns]\nresolve = ["{HOST}={ADDRESS}"]\nallow_nets = ["{ADDRESS}/32"]\n'
                "[politeness]\nmin_delay = 0.005\nmax_delay = 0.005\nip_concurrency = 0\n"
                "[fetch]\nthreads = 4\n[frontier]\nmax_urls_per_host = 100000\n")
            (tmp / "seeds.txt").write_text(f"{site.origin}/\n")
            crawl0, _ = crawl(site, tmp, config, "crawl0")
            site.epoch(1)
            crawl1, _ = crawl(site, tmp, config, "crawl1", "--recrawl-from", str(crawl0))
            site.epoch(2)
            crawl2, _ = crawl(site, tmp, config, "crawl2", "--recrawl-from", str(crawl1))
            changed = site.epoch(3)
            cut = str(int(args.cut * args.pages))
            # The full crawl and the whole recrawl alternate --repeat times: CPU seconds on
            # a shared machine move by 10-25 % between identical runs.
            fulls: list[Row] = []
            recrawls: list[Row] = []
            for k in range(args.repeat):
                fulls.append(crawl(site, tmp, config, f"full{k}")[1])
                planning = plan(tmp, f"recrawl{k}", crawl2)
                data, row = crawl(site, tmp, config, f"recrawl{k}", "--recrawl-from", str(crawl2))
                row.plan_cpu, row.cpu = planning, row.cpu + planning
                row.found = found(config, data, changed) if k == 0 else None
                recrawls.append(row)
            rows = [median_row("full", fulls), median_row("recrawl", recrawls)]
            for label, extra in (
                (f"cut at {args.cut:.0%}, change rate", ("--max-pages", cut)),
                (f"cut at {args.cut:.0%}, plain", ("--max-pages", cut, "-s",
                                                   'recrawl.order="plain"')),
            ):
                name = label.replace(" ", "_").replace(",", "").replace("%", "")
                planning = plan(tmp, name, crawl2)
                data, row = crawl(site, tmp, config, name, "--recrawl-from", str(crawl2), *extra)
                row.name, row.plan_cpu, row.cpu = label, planning, row.cpu + planning
                row.found = found(config, data, changed, int(cut) if extra else None)
                rows.append(row)
        finally:
            site.stop()
    print(f"{args.pages} pages, {len(changed)} changed in the last epoch (seed {args.seed})")
    ratios = sorted(r.cpu / f.cpu for f, r in zip(fulls, recrawls, strict=True))
    alone = sorted((r.cpu - r.plan_cpu) / f.cpu for f, r in zip(fulls, recrawls, strict=True))
    print(f"recrawl / full CPU, median of {args.repeat} alternating pairs: "
          f"{statistics.median(ratios):.2f} (its crawl alone, the plan aside: "
          f"{statistics.median(alone):.2f}; pairs {', '.join(f'{x:.2f}' for x in ratios)})")
    print(f"{'crawl':<28}{'requests':>10}{'MB sent':>10}{'CPU s':>8}{'(plan)':>8}"
          f"{'changes found':>15}")
    for row in rows:
        share = "" if row.found is None else f"{row.found:.0%}"
        print(f"{row.name:<28}{row.requests:>10}{row.sent / 1e6:>10.2f}{row.cpu:>8.2f}"
              f"{row.plan_cpu:>8.2f}{share:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
