"""hive's command line: a thin click group over the package (no crawl logic here).

Why one module: it is the one concept of the command line, one click command per
verb (start, status, stop, add, deny, verify, index, report, demo, …),
each parsing its flags and calling into the package; what it grows by is a command,
and splitting the commands over modules would only scatter the group's shared
options and its error handling (the package's errors turned into one-line messages
and exit codes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from hive import __version__
from hive import config as config_mod
from hive.config import Config
from hive.errors import ConfigError, ControlError, HiveError
from hive.netspec import resolve_entries
from hive.procs.lifecycle import ExitCode, describe
from hive.procs.statustext import drain_note, stopping_note, waiting_note
from hive.storage.datadir import DataDir

if TYPE_CHECKING:
    from hive.core.record import UrlRecord
    from hive.procs.control import ControlClient
    from hive.procs.seeds import Seeds
    from hive.procs.supervisor import Supervisor

# The crawl machinery is imported inside the commands that use it: the hive's
# spawned processes import this module again as their __main__, and each should
# pay only for the modules it runs.

pass_config = click.make_pass_decorator(Config)
DATA = click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path),
                    default=Path("hive-data"), show_default=True,
                    help="The crawl's data directory.")


FC = TypeVar("FC", bound=Callable[..., Any])
# Seeds refused before a start that are listed one by one; the rest are counted.
REFUSALS_SHOWN = 10
# `hive add` sends its URLs in requests of at most this many bytes, below the control socket's cap.
ADD_CHUNK_BYTES = 256 << 10
# Seconds between progress lines: on a terminal the line is redrawn, elsewhere one is added.
PROGRESS_TTY = 1.0
PROGRESS_LOG = 10.0


def _set_option(help_text: str) -> Callable[[FC], FC]:
    return click.option("-s", "--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
                        help=help_text)


def _load(config_file: Path | None, overrides: tuple[str, ...]) -> Config:
    try:
        return config_mod.load(config_file, overrides)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--config/--set") from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hive")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A TOML file whose keys override conf/default.toml.")
@_set_option("Override one config key (repeatable), e.g. -s fetch.threads=8.")
@click.pass_context
def main(ctx: click.Context, config_file: Path | None, overrides: tuple[str, ...]) -> None:
    """hive: a polite, prioritizing, persistent web crawler."""
    ctx.meta["hive.config"] = (config_file, overrides)
    ctx.obj = _load(config_file, overrides)


def _with_overrides(cfg: Config, overrides: tuple[str, ...]) -> Config:
    """``cfg`` with a command's own ``-s`` on top of the group's (they win, coming later)."""
    if not overrides:
        return cfg
    config_file, before = click.get_current_context().meta.get("hive.config", (None, ()))
    return _load(config_file, (*before, *overrides))


def _network(cfg: Config, resolve: tuple[str, ...], allow_private: bool,
             allow_net: tuple[str, ...]) -> Config:
    if allow_private and allow_net:
        raise click.BadParameter("give --allow-private or --allow-net, not both",
                                 param_hint="--allow-private")
    try:
        return cfg.replace(dns={
            "resolve": [*cfg.dns.resolve, *resolve_entries(resolve)],
            "allow_private": cfg.dns.allow_private or allow_private,
            "allow_nets": [*cfg.dns.allow_nets, *allow_net],
        })
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from exc


def _read_seeds(source: str) -> Seeds:
    """The seeds file's URLs (stdin for -); a file that cannot be read is an error naming it."""
    from hive.procs.seeds import read_lines

    if source == "-":
        return read_lines(sys.stdin.buffer.read(), "stdin")
    try:
        data = Path(source).read_bytes()
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise click.ClickException(f"cannot read seeds file {source}: {why}") from exc
    return read_lines(data, source)


def _screen_seeds(cfg: Config, source: str | None, data_dir: Path) -> list[UrlRecord]:
    """The start's seeds, screened (canonical records, trusted from here on); refusals
    shown; exit NOTHING when nothing is to crawl.

    Nothing is to crawl when the data directory holds no crawl to resume and
    there is no seed left: none given, an empty file, or every one refused.
    """
    from hive.procs.seeds import Seeds, screen

    seeds = Seeds()
    if source is not None:
        read = _read_seeds(source)
        seeds.refused += read.refused
        screen(read.urls, cfg, seeds)
    for refusal in seeds.refused[:REFUSALS_SHOWN]:
        click.echo(f"refused seed {refusal}", err=True)
    if len(seeds.refused) > REFUSALS_SHOWN:
        click.echo(f"... and {len(seeds.refused) - REFUSALS_SHOWN} more seeds refused", err=True)
    if seeds.records or _has_crawl(data_dir):
        return seeds.records
    if source is None:
        why = f"no --seeds, and {data_dir} holds no crawl to resume"
    elif not seeds.total:
        why = f"{'stdin' if source == '-' else source} holds no URLs"
    else:
        why = seeds.all_refused()
    click.echo(f"nothing to crawl: {why}", err=True)
    sys.exit(ExitCode.NOTHING)


def _has_crawl(data_dir: Path) -> bool:
    try:
        return DataDir(data_dir).state_file.is_file()
    except OSError:
        return False


def _prepare_data_dir(data_dir: Path) -> None:
    """Create ``--data`` (or check it): an error naming it if it cannot hold a crawl."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.ClickException(f"--data {data_dir}: {exc.strerror or exc}") from exc
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise click.ClickException(f"--data {data_dir}: not writable")


class Progress:
    """The live line of a foreground crawl, from the first worker report on.

    On a terminal one line is redrawn every second; elsewhere (a file, a pipe)
    a line is added every ten seconds, so a log keeps one line per interval.
    """

    def __init__(self, supervisor: Supervisor, quiet: bool, stream: TextIO | None = None,
                 interval: float | None = None) -> None:
        self.supervisor = supervisor
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.interval = interval or (PROGRESS_TTY if self.tty else PROGRESS_LOG)
        self.next = 0.0
        self.drawn = False

    def __call__(self, now: float) -> None:
        if self.quiet or now < self.next or not self.supervisor.reporting:
            return
        if self.supervisor.stopping and not self.drawn:
            return
        self.next = now + self.interval
        t = self.supervisor.totals()
        line = (f"pages {t['frontier/done/ok']:>8.0f}  {t['pages_per_s']:6.1f} pages/s  pending "
                f"{t['frontier/pending']:>8.0f}  hosts ready/bound {t['frontier/hosts/ready']:.0f}/"
                f"{t['frontier/hosts/bound']:.0f}  errors {t['errors']:.0f}")
        waiting = waiting_note(self.supervisor.waiting(), now)
        if waiting:
            line += f"  {waiting}"
        drain = drain_note(self.supervisor.hosts())
        if drain:
            line += f"  {drain}"
        if self.tty:
            click.echo(f"\r{line}   ", nl=False, file=self.stream)
        else:
            click.echo(line, file=self.stream)
        self.drawn = True

    def end(self) -> None:
        """End the redrawn line, if one was drawn, before the summary."""
        if self.drawn and self.tty:
            click.echo("", file=self.stream)


def run_foreground(cfg: Config, data_dir: Path, procs: int, seeds: list[UrlRecord],
                   max_pages: int, quiet: bool, recreate_missing: bool = False) -> Supervisor:
    from hive.procs.lifecycle import Runner, setup_logging
    from hive.procs.supervisor import Supervisor

    try:
        setup_logging(cfg.log.level, DataDir(data_dir).log_file("supervisor"), "supervisor")
    except OSError as exc:
        raise click.ClickException(f"--data {data_dir}: {describe(exc)}") from exc
    supervisor = Supervisor(cfg, data_dir, procs, seeds=seeds, max_pages=max_pages,
                            recreate_missing=recreate_missing)
    progress = Progress(supervisor, quiet)
    runner = Runner(supervisor, "supervisor", progress, stop=supervisor.signalled)
    try:
        if runner.run() != 0:
            supervisor.exit_code = ExitCode.ERROR
    except (HiveError, OSError) as exc:
        raise click.ClickException(describe(exc)) from exc
    finally:
        progress.end()
    return supervisor


START_HELP = f"""Start (or resume) a crawl in the foreground; Ctrl-C stops it warmly.

A first Ctrl-C (or SIGTERM, or `hive stop`) lets in-flight fetches finish and
commits everything; a second stops at once. Without --seeds, the crawl in
--data resumes.

\b
Exit codes:
  {ExitCode.ENDED:d}  the batch ended: nothing pending or in flight anywhere
  {ExitCode.ERROR:d}  an error: config, storage, a child that cannot start, a damaged store
  {ExitCode.USAGE:d}  a usage error
  {ExitCode.STOPPED:d}  stopped by `hive stop` or a signal (Ctrl-C, SIGTERM), warm or at once
  {ExitCode.MAX_PAGES:d}  --max-pages reached
  {ExitCode.NOTHING:d}  nothing to crawl: no --seeds on a fresh data directory, an empty
     seeds file, every seed refused

With --detach: 0 once the hive is up in the background, else the code it
exited with.
"""


@main.command(help=START_HELP)
@click.option("--procs", type=click.IntRange(1, config_mod.MAX_WORKERS),
              help="Crawler processes [hive.procs].")
@click.option("--seeds", type=click.Path(allow_dash=True),
              help="A file of URLs, one a line (- for stdin).")
@DATA
@click.option("--resolve", multiple=True, metavar="HOST=IP",
              help="Like curl's: *.example.test=127.0.0.1; @FILE reads one a line.")
@click.option("--allow-private", is_flag=True,
              help="Allow private, loopback and link-local addresses.")
@click.option("--allow-net", multiple=True, metavar="CIDR", help="Allow one non-global network.")
@click.option("--max-pages", type=click.IntRange(0), default=0,
              help="Stop after this many pages (fetched by this start).")
@click.option("--detach", is_flag=True,
              help="Return once the hive is up; it runs in the background.")
@click.option("--quiet", is_flag=True, help="No progress line.")
@click.option("--recreate-missing", is_flag=True,
              help="Start a worker whose store hive.json names but is missing, empty "
                   "(its hosts' fetched pages are fetched again).")
@click.option("--dedup-from", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A prior crawl's CDXJ index (hive index): payloads it holds are written "
                   "as revisit records [warc.dedup_from].")
@click.option("--recrawl-from", "recrawl_from", multiple=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="A prior crawl's data directory (repeat for several, oldest first): every "
                   "URL it fetched is fetched again, conditional on its validators, the most "
                   "likely changed first; `hive changes` says what changed [recrawl.plan].")
@click.option("--cluster", "cluster", metavar="ADDRESS",
              help="Run across the machines of a Ray cluster (auto, ray://head:10001 or a GCS "
                   "host:port): --procs workers on each machine that joined with a resource "
                   "hive-node-<name>; needs pip install 'hive-crawler[cluster]'.")
@click.option("--machines", metavar="NAMES", callback=lambda ctx, param, value: _machines(value),
              help="With --cluster: the machines to crawl on, comma-separated (default: every "
                   "one joined). Other machines or --procs than the last start's resize the "
                   "crawl first, moving hosts between machines.")
@_set_option("Override one config key, as `hive -s` does before the command.")
@pass_config
def start(cfg: Config, procs: int | None, seeds: str | None, data_dir: Path,
          resolve: tuple[str, ...], allow_private: bool, allow_net: tuple[str, ...],
          max_pages: int, detach: bool, quiet: bool, recreate_missing: bool,
          dedup_from: Path | None, recrawl_from: tuple[Path, ...], cluster: str | None,
          machines: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    if machines and cluster is None:
        raise click.BadParameter("--machines needs --cluster", param_hint="--machines")
    cfg = _network(_with_overrides(cfg, overrides), resolve, allow_private, allow_net)
    if dedup_from is not None:
        cfg = cfg.replace(warc={"dedup_from": str(dedup_from.resolve())})
    if detach and seeds == "-":
        raise click.BadParameter("--detach cannot read seeds from stdin", param_hint="--seeds")
    planned = _recrawl_plan(data_dir, recrawl_from)
    if planned is not None:
        cfg = cfg.replace(recrawl={"plan": str(planned.resolve())})
    records = [] if planned is not None and seeds is None else _screen_seeds(cfg, seeds, data_dir)
    _prepare_data_dir(data_dir)
    if cluster is not None:
        if detach or recrawl_from or dedup_from:
            raise click.BadParameter("--cluster runs in the foreground, without --detach, "
                                     "--recrawl-from or --dedup-from", param_hint="--cluster")
        _start_cluster(cfg, data_dir, cluster, procs or cfg.hive.procs, records, max_pages,
                       machines)
        return
    if detach:
        _detach(data_dir)
        return
    supervisor = run_foreground(cfg, data_dir, procs or cfg.hive.procs, records, max_pages, quiet,
                                recreate_missing)
    totals = supervisor.totals()
    click.echo(f"hive stopped: {supervisor.ended or 'stopped'}; "
               f"{totals['frontier/done/ok']:.0f} pages, "
               f"{totals['fetched']:.0f} outcomes; data in {data_dir}")
    sys.exit(supervisor.exit_code)


def _machines(value: str | None) -> tuple[str, ...]:
    """``--machines a,b``: the names, each one a machine may have."""
    from hive.procs.cluster_plan import check_name

    names = tuple(name.strip() for name in (value or "").split(",") if name.strip())
    try:
        for name in names:
            check_name(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--machines") from exc
    if value is not None and not names:
        raise click.BadParameter("expected machine names, comma-separated",
                                 param_hint="--machines")
    return names


def _start_cluster(cfg: Config, data_dir: Path, address: str, procs: int,
                   seeds: list[UrlRecord], max_pages: int, machines: tuple[str, ...]) -> None:
    """``hive start --cluster``: the driver (hive/procs/cluster.py) in this process."""
    from hive.procs.lifecycle import Runner, setup_logging

    try:
        from hive.procs.cluster import ClusterDriver
    except ImportError as exc:
        raise click.ClickException(f"--cluster needs Ray: pip install 'hive-crawler[cluster]' "
                                   f"({exc})") from exc
    try:
        setup_logging(cfg.log.level, DataDir(data_dir).log_file("supervisor"), "supervisor")
    except OSError as exc:
        raise click.ClickException(f"--data {data_dir}: {describe(exc)}") from exc
    driver = ClusterDriver(cfg, data_dir, address, procs, seeds, max_pages, machines)
    runner = Runner(driver, "cluster", stop=driver.signalled)
    try:
        if runner.run() != 0:
            driver.exit_code = ExitCode.ERROR
    except (HiveError, OSError) as exc:
        raise click.ClickException(describe(exc)) from exc
    totals = driver.totals()
    click.echo(f"hive stopped: {driver.ended or 'stopped'}; "
               f"{totals.get('frontier/done/ok', 0):.0f} pages, "
               f"{totals.get('fetched', 0):.0f} outcomes; data in {data_dir} and each "
               "machine's own")
    sys.exit(driver.exit_code)


def _recrawl_plan(data_dir: Path, sources: tuple[Path, ...]) -> Path | None:
    """The plan this start crawls again from: the one the data directory holds (a recrawl
    resumed, or a detached start's own), else written from ``sources`` on a fresh data
    directory (hive.export.recrawl); None for a crawl that is no recrawl."""
    dd = DataDir(data_dir)
    if dd.recrawl_plan.is_file():
        return dd.recrawl_plan
    if not sources:
        return None
    if _has_crawl(data_dir):
        raise click.BadParameter(f"{data_dir} holds a crawl that is no recrawl: start the "
                                 "recrawl in a new data directory", param_hint="--recrawl-from")
    from hive.export.recrawl import build_plan

    _prepare_data_dir(data_dir)
    try:
        tally = build_plan(list(sources), data_dir, dd.recrawl_plan)
    except (HiveError, OSError) as exc:
        raise click.ClickException(f"--recrawl-from: {describe(exc)}") from exc
    for name in tally.open_warcs:
        click.echo(f"recrawl: {name} is still open (a running or killed crawl): its captures "
                   "are left out", err=True)
    if tally.unreadable_heads:
        click.echo(f"recrawl: {tally.unreadable_heads} records did not read; their URLs are "
                   "left out", err=True)
    click.echo(f"recrawl plan: {tally.planned} URLs from {tally.crawls} prior crawls "
               f"({tally.captures} captures) in {dd.recrawl_plan}")
    return dd.recrawl_plan


def _detach(data_dir: Path) -> None:
    """Start this command again in the background; return once it is up, or say why not."""
    args = [a for a in sys.argv[1:] if a != "--detach"]
    out_path = DataDir(data_dir).supervisor_out
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("ab") as out:
        offset = out.tell()
        process = subprocess.Popen([sys.executable, "-m", "cli", *args, "--quiet"],
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                   start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = DataDir(data_dir).read_state()
        if state and state.get("pid") == process.pid:
            click.echo(f"hive running in the background, pid {process.pid}; data in {data_dir}")
            return
        if process.poll() is not None:
            said = _last_line(out_path, offset) or f"it exited with {process.returncode}"
            click.echo(f"hive did not start: {said} (output in {out_path})", err=True)
            sys.exit(process.returncode if process.returncode > 0 else ExitCode.ERROR)
        time.sleep(0.1)
    raise click.ClickException(f"hive did not come up within 30 s; see {out_path}")


def _last_line(path: Path, offset: int) -> str:
    """The last line a detached start wrote after ``offset`` (its error or summary)."""
    with path.open("rb") as f:
        f.seek(offset)
        lines = f.read(64 * 1024).decode(errors="replace").strip().splitlines()
    return lines[-1].removeprefix("Error: ") if lines else ""


def _client(data_dir: Path, timeout: float = 5.0) -> ControlClient:
    """A client for the hive running on ``data_dir``, with its CURVE keys if it uses them."""
    from hive.procs.control import ControlClient
    from hive.procs.endpoints import Endpoints

    try:
        state = DataDir(data_dir).read_state()
    except HiveError as exc:
        raise click.ClickException(str(exc)) from exc
    pid = state.get("pid") if state else None
    if not state or not isinstance(pid, int) or not _alive(pid):
        click.echo(f"no hive is running on {data_dir}", err=True)
        sys.exit(1)
    endpoints = Endpoints.from_dict(state["endpoints"])
    try:
        return ControlClient(endpoints.control, timeout, curve_dir=endpoints.keys)
    except HiveError as exc:
        raise click.ClickException(str(exc)) from exc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _call(data_dir: Path, cmd: str, **args: Any) -> Any:
    with _client(data_dir) as client:
        try:
            return client.call(cmd, **args)
        except ControlError as exc:
            raise click.ClickException(str(exc)) from exc


def format_status(status: dict[str, Any], width: int | None = None,
                  now: float | None = None) -> str:
    """The status table for the terminal's width (hive/procs/statustext.py)."""
    from hive.procs import statustext

    return statustext.format_status(status, width or shutil.get_terminal_size().columns,
                                    time.time() if now is None else now)


@main.command()
@DATA
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--watch", type=click.FloatRange(0, min_open=True), is_flag=False,
              flag_value=2.0, default=None, metavar="[SECONDS]",
              help="Refresh every SECONDS (default 2; more than 0).")
@click.option("--hosts", type=click.IntRange(1, config_mod.MAX_STATUS_HOSTS), is_flag=False,
              flag_value=20, default=None, metavar="[N]",
              help="Also the top N hosts by pending URLs (default 20), with their owner, "
                   "next fetch, delay, back-off and robots.txt, and the drain forecast.")
def status(data_dir: Path, as_json: bool, watch: float | None, hosts: int | None) -> None:
    """Per-process figures of a running hive; the table fits the terminal's width."""
    while True:
        result = _call(data_dir, "status")
        if hosts is not None and isinstance(result.get("hosts"), dict):
            result["hosts"]["top"] = result["hosts"]["top"][:hosts]
        text = json.dumps(result, indent=2) if as_json else format_status(result)
        if hosts is not None and not as_json:
            from hive.procs.hoststatus import format_hosts

            text += "\n\n" + format_hosts(result.get("hosts") or {"top": []}, hosts, time.time())
        click.echo(text)
        if watch is None:
            return
        time.sleep(watch)
        if not as_json:
            click.clear()


@main.command()
@DATA
@click.option("--now", is_flag=True, help="Stop at once instead of letting fetches finish.")
def stop(data_dir: Path, now: bool) -> None:
    """Stop a running hive (warmly: in-flight fetches finish and everything commits).

    While it stops, says what it is waiting for (fetches in flight, processes closing).
    """
    from hive.procs.control import ControlClient
    from hive.procs.endpoints import Endpoints

    with _client(data_dir) as client:
        try:
            client.call("stop", now=now)
        except ControlError as exc:
            raise click.ClickException(str(exc)) from exc
        state = DataDir(data_dir).read_state() or {}
        endpoints = Endpoints.from_dict(state["endpoints"])
    said, look = "", 0.0
    deadline = time.monotonic() + 120
    with ControlClient(endpoints.control, 1.0, curve_dir=endpoints.keys) as client:
        while time.monotonic() < deadline:
            pid = (DataDir(data_dir).read_state() or {}).get("pid")
            if not isinstance(pid, int) or not _alive(pid):
                click.echo(f"hive on {data_dir} stopped")
                return
            if time.monotonic() >= look:
                look = time.monotonic() + 1.0
                try:
                    note = stopping_note(client.call("status"))  # type: ignore[arg-type]
                except ControlError:
                    note = ""  # closing: its control socket is gone
                if note and note != said:
                    click.echo(note, err=True)
                    said = note
            time.sleep(0.1)
    raise click.ClickException(f"the hive on {data_dir} did not stop within 120 s")


@main.command()
@DATA
@click.argument("urls", nargs=-1, required=True)
def add(data_dir: Path, urls: tuple[str, ...]) -> None:
    """Add URLs to a running hive (- reads them from stdin).

    The supervisor refuses malformed URLs at once (each with its reason) and
    queues the rest for their owners; the owners then say which were new and
    which they had already seen (or refused: a denied host, over its budget).
    That answer is waited for up to 10 s. A URL whose owner restarts meanwhile
    may be counted as seen. Exits 1 when no URL was added.
    """
    from hive.procs.seeds import url_chunks

    lines: Iterable[bytes] = (
        sys.stdin.buffer if urls == ("-",) else (os.fsencode(url) for url in urls)
    )
    queued: dict[str, Any] = {"accepted": 0, "batches": [], "refused": Counter(), "examples": []}
    with _client(data_dir) as client:
        try:
            for chunk in url_chunks(lines, "stdin" if urls == ("-",) else "argument",
                                    ADD_CHUNK_BYTES):
                for refusal in chunk.refused:
                    queued["refused"]["unreadable"] += 1
                    if len(queued["examples"]) < REFUSALS_SHOWN:
                        queued["examples"].append(str(refusal))
                if chunk.urls:
                    _merge_queued(queued, _ask(client, "add", urls=chunk.urls))
            answer = _owners_answer(client, queued) if queued["accepted"] else {}
        except ControlError as exc:
            raise click.ClickException(str(exc)) from exc
    refused = sum(queued["refused"].values())
    for example in queued["examples"]:
        click.echo(f"add: refused {example}", err=True)
    if refused > len(queued["examples"]):
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(queued["refused"].items()))
        click.echo(f"add: refused {refused} in all ({reasons})", err=True)
    if answer is None:
        click.echo(f"queued {queued['accepted']} URLs for their owners, {refused} refused; "
                   "no answer from the owners within 10 s: `hive status` shows their "
                   "admitted and duplicate counts")
        return
    new, seen, owner_refused = (answer.get(k, 0) for k in ("new", "seen", "refused"))
    click.echo(f"added {new}, already seen {seen}, refused {refused + owner_refused}"
               + (f" ({owner_refused} by their owner)" if owner_refused else ""))
    if not new:
        sys.exit(1)


def _merge_queued(total: dict[str, Any], part: dict[str, Any]) -> None:
    """Add one chunk's answer from the supervisor to the add's running total."""
    total["accepted"] += part["accepted"]
    total["batches"] += part["batches"]
    total["refused"].update(part["refused"])
    room = REFUSALS_SHOWN - len(total["examples"])
    total["examples"] += part["examples"][:max(room, 0)]


def _ask(client: ControlClient, cmd: str, **args: Any) -> dict[str, Any]:
    """A control call whose result is an object."""
    result = client.call(cmd, **args)
    if not isinstance(result, dict):
        raise ControlError(f"{cmd}: the hive answered {type(result).__name__}, not an object")
    return result


def _owners_answer(client: ControlClient, queued: dict[str, Any]) -> dict[str, int] | None:
    """The owners' counts for an add's batches once they cover every URL, or None (10 s)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        answer = _ask(client, "add_answer", batches=queued["batches"])
        if sum(answer.values()) >= queued["accepted"]:
            return answer
        time.sleep(0.1)
    return None


@main.command()
@DATA
@click.argument("hosts", nargs=-1, required=True)
def deny(data_dir: Path, hosts: tuple[str, ...]) -> None:
    """Take hosts (HOST[:PORT]) out of a running crawl: pending URLs end as denied.

    A host is HOST:PORT when its port is not its scheme's default. Warns about
    a host no worker has seen (it is denied all the same: URLs of it found later
    end as denied).
    """
    with _client(data_dir) as client:
        try:
            result = _ask(client, "deny", hosts=list(hosts))
            deadline = time.monotonic() + 10
            while True:
                answer = _ask(client, "deny_answer", id=result["id"])
                if answer["answered"] >= answer["workers"] or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        except ControlError as exc:
            raise click.ClickException(str(exc)) from exc
    denied: list[str] = result["denied"]
    click.echo("denied: " + ", ".join(denied))
    if answer["answered"] < answer["workers"]:
        click.echo("deny: not every worker confirmed within 10 s; `hive status` shows them",
                   err=True)
        return
    for i, host in enumerate(denied):
        if i not in answer["known"]:
            click.echo(f"deny: warning: {host} is not in the crawl: no worker has seen it "
                       "(a port left out? a host is HOST:PORT unless the port is the "
                       "scheme's default)", err=True)


@main.command()
@DATA
@click.argument("machine")
def drop(data_dir: Path, machine: str) -> None:
    """Drop a cluster's machine gone for good (hive start --cluster), by its name.

    Only a lost machine (its lease lapsed: `hive status` says lost) can be dropped. The
    other machines then refuse every URL of its hosts they hold or find later, counted
    as refused (machine_dropped) in `hive status` and the crawl logs, and the batch ends
    without it; the machine never joins again in this run. To keep its hosts instead,
    `hive stop` and restore its data directory on a machine that joins under its name.
    """
    try:
        state = DataDir(data_dir).read_state()
    except HiveError as exc:
        raise click.ClickException(str(exc)) from exc
    if state is not None and not isinstance(state.get("cluster"), dict):
        raise click.ClickException(f"{data_dir} is not a cluster's (hive start --cluster): "
                                   "only a cluster's machine can be dropped")
    result = _call(data_dir, "drop", machine=machine)
    if not result.get("dropped"):
        click.echo(f"machine {machine} was already dropped")
        return
    click.echo(f"dropped machine {machine}: the other machines refuse the URLs of its hosts, "
               "counted as refused (machine_dropped) in `hive status`")


@main.command()
@DATA
@click.option("--limit", type=click.IntRange(1), default=100, show_default=True,
              help="Problems listed per worker.")
@click.option("--replay-quarantine", is_flag=True,
              help="First put quarantined link batches that decode back in their outboxes "
                   "(sent on the next start).")
def verify(data_dir: Path, limit: int, replay_quarantine: bool) -> None:
    """Check a stopped hive's storage; exit 1 with the list of problems."""
    from hive.core.ring import Ring
    from hive.frontier.verify import verify_data_dir
    from hive.procs.outbox import replay_data_dir

    try:
        state = DataDir(data_dir).read_state()
        ring = Ring.from_params(state["ring"]) if state is not None else None
    except HiveError as exc:
        raise click.ClickException(str(exc)) from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise click.ClickException(f"{DataDir(data_dir).state_file} is damaged: {exc}") from exc
    if state is None or ring is None:
        raise click.ClickException(f"{data_dir} holds no hive (no hive.json)")
    pid = state.get("pid")
    if isinstance(pid, int) and _alive(pid):
        raise click.ClickException(f"the hive on {data_dir} is running (pid {pid}): stop it first")
    if replay_quarantine:
        try:
            for line in replay_data_dir(data_dir):
                click.echo(line)
        except (HiveError, OSError) as exc:
            raise click.ClickException(describe(exc)) from exc
    config = state.get("config")
    scope = config.get("scope") if isinstance(config, dict) else None
    session_ids = scope.get("session_ids", []) if isinstance(scope, dict) else []
    if state.get("left_cluster"):
        click.echo(f"{data_dir}: machine {state.get('machine')} left the cluster in a resize; "
                   "it holds no store of the crawl (its drained ones are worker-NN.retired-*)")
        return
    # One machine of a cluster holds its slice of the ring's workers (hive.json: workers).
    slice_ = state.get("workers")
    workers = range(slice_[0], slice_[0] + slice_[1]) if isinstance(slice_, list) else None
    reports = verify_data_dir(data_dir, ring.owner, limit=limit, procs=ring.procs,
                              session_ids=session_ids, workers=workers)
    # The ring in hive.json names the workers whose stores the crawl must have: a missing
    # one is reported by verify_data_dir.
    for report in reports.values():
        click.echo(report.summary())
    if not reports or not all(r.ok for r in reports.values()):
        sys.exit(1)


@main.command()
@DATA
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Where to write the index (default: DATA/index.cdxj).")
def index(data_dir: Path, out_path: Path | None) -> None:
    """Build one sorted CDXJ index of a crawl's WARC files, for replay (pywb).

    Reads the WARCs alone, so it works after a crash: a file whose last record is
    torn is indexed up to its last whole record, and the bytes skipped are named.
    """
    from hive.fetch import cdxj

    dd = DataDir(data_dir)
    # A cluster's machine that fetched nothing has no WARC directory; one machine's must.
    warc_dirs = [DataDir(directory).warc for _, directory, _ in dd.cluster_machines()]
    warc_dirs = [d for d in warc_dirs if d.is_dir()] or [dd.warc]
    if not warc_dirs[0].is_dir():
        raise click.ClickException(f"{warc_dirs[0]}: no such directory (is --data a crawl?)")
    out_path = out_path if out_path is not None else dd.merged_index
    warcs = sorted((w for d in warc_dirs for w in cdxj.crawl_warcs(d)), key=lambda w: w.name)
    try:
        results, lines = cdxj.build_index(warcs, out_path)
    except OSError as exc:
        raise click.ClickException(f"index: {describe(exc)}") from exc
    for result in results:
        if result.skipped_bytes:
            click.echo(f"index: {result.filename}: skipped {result.skipped_bytes} bytes after "
                       f"offset {result.whole_bytes} (a torn or corrupt record)", err=True)
        if result.filename.endswith(".open"):
            click.echo(f"index: {result.filename}: still open (a crash?); the next start "
                       "renames it, and its lines name it as it is now", err=True)
    click.echo(f"indexed {lines} records from {len(warcs)} WARC files into {out_path}")


@main.command()
@DATA
@click.option("--out", "out_path", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              default=None, help="Where to write the feed (default: DATA/changes.jsonl; - for "
                                 "stdout).")
def changes(data_dir: Path, out_path: Path | None) -> None:
    """A recrawl's change feed: one JSON line per URL it fetched, what changed since the
    prior crawls (new, changed, unchanged, gone, moved), how that was known, the
    validators sent, both capture dates."""
    from hive.export.changes import write_changes

    dd = DataDir(data_dir)
    if not dd.recrawl_plan.is_file():
        raise click.ClickException(f"{dd.recrawl_plan}: no such file (was --data started with "
                                   "--recrawl-from?)")
    out_path = out_path if out_path is not None else dd.changes
    try:
        if str(out_path) == "-":
            counts = write_changes(dd, sys.stdout)
        else:
            part = out_path.with_name(out_path.name + ".part")
            with part.open("w", encoding="utf-8") as out:
                counts = write_changes(dd, out)
            part.replace(out_path)
    except OSError as exc:
        raise click.ClickException(f"changes: {describe(exc)}") from exc
    said = ", ".join(f"{n} {change}" for change, n in counts.items())
    click.echo(f"changes: {said}" + ("" if str(out_path) == "-" else f"; in {out_path}"),
               err=str(out_path) == "-")


@main.command()
@DATA
@click.option("--format", "form", type=click.Choice(["parquet", "wacz"]), required=True,
              help="parquet: a columnar index, one row per capture (DuckDB, Spark); "
                   "wacz: a package for replay tools (ReplayWeb.page, pywb).")
@click.option("--out", "out_path", type=click.Path(path_type=Path), required=True,
              help="The file to write; for parquet, a directory (or a name ending in /) "
                   "gets numbered part files.")
def export(data_dir: Path, form: str, out_path: Path) -> None:
    """Export a running or stopped crawl: its closed WARCs and its crawl logs.

    Needs the `export` extra (pip install 'hive-crawler[export]').
    """
    from hive.export.captures import Tally

    if not DataDir(data_dir).warc.is_dir() and not DataDir(data_dir).logs.is_dir():
        raise click.ClickException(f"{data_dir}: no warc/ nor logs/ (is --data a crawl?)")
    tally = Tally()
    try:
        if form == "parquet":
            from hive.export import parquet

            written = parquet.export(data_dir, out_path, tally)
            what = (f"and {tally.log_rows:,} crawl-log outcomes without a record into "
                    f"{len(written)} Parquet file(s) at {out_path}")
        else:
            from hive.export import wacz

            pages = wacz.export(data_dir, out_path, tally)
            what = f"into {out_path} ({pages:,} pages listed)"
    except HiveError as exc:
        raise click.ClickException(f"export: {exc}") from exc
    except OSError as exc:
        raise click.ClickException(f"export: {describe(exc)}") from exc
    for name in tally.open_warcs:
        click.echo(f"export: {name}: still open (being written, or left by a crash): "
                   "left out; its fetches are rows without a record", err=True)
    for name in tally.open_wet_files:
        click.echo(f"export: {name}: still open (being written, or left by a crash): left "
                   "out; its pages have no content_languages", err=True)
    if tally.unreadable_conversions:
        click.echo(f"export: {tally.unreadable_conversions:,} records of the WET files did not "
                   "read as conversion records: their pages have no content_languages", err=True)
    if tally.skips.total:
        causes = ", ".join(f"{n} {cause}" for cause, n in tally.skips.by_cause.most_common())
        click.echo(f"export: crawl log lines skipped: {causes}", err=True)
    if tally.unlogged:
        click.echo(f"export: {tally.unlogged:,} captures have no crawl-log line (a log not "
                   "flushed yet?): their crawl-log columns are empty", err=True)
    if tally.unreadable_heads:
        click.echo(f"export: {tally.unreadable_heads:,} records did not read at their offset "
                   "(a damaged WARC?): their redirect, truncation or title is left out", err=True)
    click.echo(f"exported {tally.captures:,} captures from {tally.warcs} WARC file(s) {what}")


@main.command()
@DATA
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write (default: DATA/report.html).")
def report(data_dir: Path, out_file: Path | None) -> None:
    """Write a self-contained HTML report of a running or stopped crawl, from its logs."""
    from hive.report.crawl import collect
    from hive.report.render import render

    out_file = out_file or DataDir(data_dir).report_page
    try:
        made = collect(data_dir)
    except HiveError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        out_file.write_text(render(made), encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {out_file}: {exc.strerror}") from exc
    skipped = f", {made.skips.total:,} skipped (listed in the report)" if made.skips.total else ""
    click.echo(f"{out_file}: {made.tally.lines:,} lines from {len(made.files)} crawl log "
               f"file(s){skipped}")


@main.command()
@click.option("--procs", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--hosts", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--pages", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="Pages per host.")
@click.option("--delay", type=click.FloatRange(0), default=0.25, show_default=True,
              help="Politeness delay per host, seconds.")
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Where to keep the crawl (default: a new temporary directory).")
@click.option("--keep", is_flag=True, help="Keep the temporary directory (without --data).")
@_set_option("Override one config key, as `hive -s` does before the command.")
@pass_config
def demo(cfg: Config, procs: int, hosts: int, pages: int, delay: float,
         data_dir: Path | None, keep: bool, overrides: tuple[str, ...]) -> None:
    """Serve a synthetic web on loopback and crawl it with the real hive."""
    cfg = _with_overrides(cfg, overrides)
    if data_dir is not None:
        _prepare_data_dir(data_dir)
        code = _demo(cfg, procs, hosts, pages, delay, data_dir, kept=True)
    else:
        temporary = Path(tempfile.mkdtemp(prefix="hive-demo-"))
        try:
            code = _demo(cfg, procs, hosts, pages, delay, temporary, kept=keep)
        finally:
            if keep:
                click.echo(f"kept {temporary}")
            else:
                shutil.rmtree(temporary, ignore_errors=True)
                click.echo(f"removed {temporary} (--keep keeps it)")
    sys.exit(code)


def _demo(cfg: Config, procs: int, hosts: int, pages: int, delay: float,
          data_dir: Path, kept: bool) -> ExitCode:
    from hive.procs.seeds import screen
    from hive.testweb import Web, WebProcess, as_received, politeness_violations, received
    from hive.testweb.requestlog import busiest_second

    web = Web(seed=1, hosts=hosts, pages=pages, hostile=False)
    with WebProcess(web, DataDir(data_dir).web_requests, host="127.0.0.2") as server:
        run_cfg = cfg.replace(
            dns={"resolve": [server.resolve], "allow_nets": ["127.0.0.2/32"]},
            politeness={"min_delay": delay, "max_delay": max(delay, 1.0),
                        "crawl_delay_cap": max(delay, 1.0)},
            fetch={"threads": 8}, robots={"retry_delay": 1.0},
        )
        click.echo(f"serving {hosts} hosts x {pages} pages on 127.0.0.2:{server.port}; "
                   f"crawling with {procs} workers, {delay:g}s between requests to a host")
        started = time.time()
        seeds = screen(server.seeds(), run_cfg).records
        supervisor = run_foreground(run_cfg, data_dir, procs, seeds, 0, False)
        elapsed = time.time() - started
        requests = server.requests
    gaps = dict.fromkeys(web.names, delay)
    gaps.update(web.crawl_delay)
    timed = as_received(requests, received(DataDir(data_dir).logs))
    violations = politeness_violations(timed, gaps, tolerance=0.01)
    fetched = supervisor.totals()["frontier/done/ok"]
    click.echo(f"fetched {fetched:.0f} pages in {elapsed:.1f}s ({fetched / elapsed:.1f} pages/s); "
               f"{len(requests)} requests at the server, {len(violations)} politeness violations")
    if requests:  # every host of the demo's web is at one address: a shared server
        click.echo(f"at most {max(busiest_second(requests).values())} requests started within "
                   f"one second at 127.0.0.2, the address all {hosts} hosts share "
                   f"(politeness.ip_concurrency {run_cfg.politeness.ip_concurrency}, "
                   f"ip_min_delay {run_cfg.politeness.ip_min_delay:g}s)")
    if kept:
        dd = DataDir(data_dir)
        click.echo(f"WARC files: {dd.warc}; crawl log: {dd.logs}")
    return supervisor.exit_code


if __name__ == "__main__":
    main()
