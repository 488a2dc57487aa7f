"""A hive's data directory: the one place that names what is in it, and ``hive.json``.

::

    DATA/hive.json           the running (or last) hive: pid, ring (with its ring-key scheme,
                             hive.core.keys; none recorded: "host"), endpoints, pids, config
    DATA/lock                flock: one hive per data directory
    DATA/supervisor/         the supervisor's store (its outbox of seeds and ``hive add`` URLs)
    DATA/worker-NN/          worker NN's store (``data.mdb``, LMDB's ``lock.mdb``), its ``lock``
    DATA/worker-NN.retired-<UTC time>[-n]   a store a resize drained
    DATA/logs/<role>.log     each process's log; <role>.failed: why a child could not start
    DATA/logs/crawl-NN.jsonl worker NN's crawl log; crawl-NN.<UTC time>[-n].jsonl rotated ones
    DATA/logs/hive.out       a detached hive's (``hive start --detach``) stdout and stderr
    DATA/warc/               WARC files (``.open`` while written), each closed one with its
                             ``.cdxj`` index beside it (hive/fetch/warc.py names them)
    DATA/keys/               the hive's CURVE keys (hive/procs/curve.py)
    DATA/transfer/           only during a cluster resize (hive/procs/cluster_resize.py):
                             to-<machine>/ the hosts leaving for that machine (to-<machine>.
                             <token>/ once sent), from-<machine>-<token>/ those received from
                             it (``.part`` while received); each a worker store
    DATA/index.cdxj          ``hive index``'s merged CDXJ index, unless ``--out`` names another
    DATA/report.html         ``hive report``'s page, unless ``--out`` names another
    DATA/recrawl.jsonl       a recrawl's plan (``hive start --recrawl-from``; ``.part`` while
                             written)
    DATA/changes.jsonl       ``hive changes``' feed, unless ``--out`` names another
    DATA/web-requests.jsonl  ``hive demo --data``: its synthetic web's request log

Only while they are written: ``hive.json.tmp``, and beside ``hive index``'s output its
``.part`` and a ``.hive-index-*`` scratch directory (hive/fetch/cdxj.py).

The sockets are not in it: a Unix socket path must be short, so they live in
``/tmp/hive-<uid>-<16 hex>``, the hex being mmh3 of the resolved data directory
(:meth:`DataDir.socket_dir`; hive/procs/endpoints.py has the policy).

Worker directories are ``worker-NN``, two digits at least; :meth:`worker`
formats and :meth:`worker_id` parses that name, and nothing else does. A
worker's crawl log is named likewise: :meth:`crawl_log_stem` is the name its
:class:`~hive.fetch.crawllog.CrawlLog` is given, which writes ``<stem>.jsonl``
and rotates it to ``<stem>.<UTC time>[-n].jsonl``; :meth:`crawl_log_name` parses
all of those, and :meth:`crawl_logs` lists them in the order they were written.
What is inside ``warc/`` and ``keys/`` is named by their writers (the WARC
writer, hive/procs/curve.py), which are given the directory.

``hive.json`` is written whole or not at all (:meth:`write_state`): a
temporary file beside it, fsynced, renamed over it, and the directory fsynced,
so a crash at any moment leaves the old file or the new one, never a part.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

import mmh3

from hive.errors import HiveError

WORKER_DIR = re.compile(r"worker-(\d+)")
# A crawl log: worker id, then for a rotated one its UTC time (%Y%m%d%H%M%S) and its number
# among the files rotated in that second (hive/fetch/crawllog.py rotates it so).
CRAWL_LOG = re.compile(r"crawl-(\d+)(?:\.(\d{14})(?:-(\d+))?)?\.jsonl")
RUN_BASE = Path("/tmp")
STATE = "hive.json"
STORE_DATA = "data.mdb"


class CrawlLogName(NamedTuple):
    """A crawl log's file name, read back: its worker and, for a rotated file, the UTC
    time it was rotated at and its number among the files rotated in that second."""

    worker_id: int
    rotated: str = ""  # "" for the live file
    n: int = 0

    @property
    def live(self) -> bool:
        return not self.rotated

    @property
    def order(self) -> tuple[int, bool, str, int]:
        """Sorts a worker's files in the order they were written: the rotated ones by time
        and number, the live one last."""
        return (self.worker_id, self.live, self.rotated, self.n)


class DataDir:
    """The paths of the hive in ``root`` and its ``hive.json``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"DataDir({str(self.root)!r})"

    @property
    def state_file(self) -> Path:
        return self.root / STATE

    @property
    def lock(self) -> Path:
        return self.root / "lock"

    @property
    def supervisor(self) -> Path:
        return self.root / "supervisor"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def warc(self) -> Path:
        return self.root / "warc"

    @property
    def keys(self) -> Path:
        """The absolute key directory (children and the CLI are given it)."""
        return self.root.resolve() / "keys"

    @property
    def merged_index(self) -> Path:
        """Where ``hive index`` writes the crawl's merged CDXJ index by default."""
        return self.root / "index.cdxj"

    @property
    def recrawl_plan(self) -> Path:
        """A recrawl's plan (``hive start --recrawl-from``, hive.export.recrawl): what the
        prior crawls knew of each URL they fetched, one JSON line each."""
        return self.root / "recrawl.jsonl"

    @property
    def changes(self) -> Path:
        """Where ``hive changes`` writes a recrawl's change feed by default."""
        return self.root / "changes.jsonl"

    @property
    def report_page(self) -> Path:
        """Where ``hive report`` writes its page by default."""
        return self.root / "report.html"

    @property
    def web_requests(self) -> Path:
        """``hive demo --data``: the request log of the synthetic web it crawls."""
        return self.root / "web-requests.jsonl"

    def socket_dir(self, base: Path = RUN_BASE) -> Path:
        """The run directory of the hive's ipc sockets: short, per user, the same for
        every spelling of the data directory."""
        digest: int = mmh3.hash64(os.fsencode(self.root.resolve()), signed=False)[0]
        return base / f"hive-{os.getuid()}-{digest:016x}"

    # -- stores ----------------------------------------------------------------------

    @staticmethod
    def worker_name(worker_id: int) -> str:
        return f"worker-{worker_id:02d}"

    @staticmethod
    def worker_id(name: str) -> int | None:
        """The worker id a directory name is the store of; None if it is none's."""
        m = WORKER_DIR.fullmatch(name)
        return int(m.group(1)) if m else None

    @property
    def transfers(self) -> Path:
        """A cluster resize's transfer stores (hive/procs/cluster_resize.py)."""
        return self.root / "transfer"

    def outgoing(self, machine: str) -> Path:
        """The store of the hosts a cluster resize sends to ``machine``."""
        return self.transfers / f"to-{machine}"

    def sealed(self, machine: str, token: str) -> Path:
        """The store for ``machine`` once its transfer ``token`` began: it takes no more."""
        return self.transfers / f"to-{machine}.{token}"

    def incoming(self, machine: str, token: str) -> Path:
        """The store of the hosts received from ``machine`` in its transfer ``token``."""
        return self.transfers / f"from-{machine}-{token}"

    def transfer_stores(self) -> list[Path]:
        """The transfer stores there are, whole (not ``.part``), by name."""
        if not self.transfers.is_dir():
            return []
        return sorted(d for d in self.transfers.iterdir()
                      if d.is_dir() and not d.name.endswith(".part"))

    def worker(self, worker_id: int) -> Path:
        """Worker ``worker_id``'s directory: its LMDB store and lock."""
        return self.root / self.worker_name(worker_id)

    @staticmethod
    def store_lock(store: Path) -> Path:
        """The lock file of a store's directory (one process at a time)."""
        return store / "lock"

    @staticmethod
    def store_data(store: Path) -> Path:
        """A store directory's LMDB data file: a directory without it holds no store yet."""
        return store / STORE_DATA

    def workers(self) -> list[tuple[int, Path]]:
        """The worker directories there are, as (worker id, path), by id."""
        if not self.root.is_dir():
            return []
        found = [(self.worker_id(d.name), d) for d in self.root.iterdir()]
        return sorted((i, d) for i, d in found if i is not None and d.is_dir())

    def retired(self, worker_id: int) -> Path:
        """A new name for worker ``worker_id``'s drained store, stamped with the UTC time."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        name = f"{self.worker_name(worker_id)}.retired-{stamp}"
        target, n = self.root / name, 1
        while target.exists():
            n += 1
            target = self.root / f"{name}-{n}"
        return target

    # -- logs ------------------------------------------------------------------------

    def log_file(self, role: str) -> Path:
        return self.logs / f"{role}.log"

    def failure_file(self, log_name: str) -> Path:
        """Where a child that cannot start leaves its message (next to its log)."""
        return self.logs / f"{log_name.removesuffix('.log')}.failed"

    @property
    def supervisor_out(self) -> Path:
        """A detached hive's stdout and stderr (``hive start --detach``)."""
        return self.logs / "hive.out"

    @staticmethod
    def crawl_log_stem(worker_id: int) -> str:
        """The name worker ``worker_id``'s CrawlLog is given (it adds ``.jsonl``)."""
        return f"crawl-{worker_id:02d}"

    def crawl_log(self, worker_id: int) -> Path:
        """Worker ``worker_id``'s live crawl log."""
        return self.logs / f"{self.crawl_log_stem(worker_id)}.jsonl"

    @staticmethod
    def crawl_log_name(name: str) -> CrawlLogName | None:
        """What a file name in ``logs/`` says of the crawl log it is; None if it is none."""
        m = CRAWL_LOG.fullmatch(name)
        if m is None:
            return None
        return CrawlLogName(int(m.group(1)), m.group(2) or "", int(m.group(3) or 0))

    def crawl_logs(self) -> list[Path]:
        """The crawl log files there are, by worker, each worker's in the order they were
        written (its live file last); none if there is no ``logs/``. OSError if it
        cannot be listed."""
        if not self.logs.is_dir():
            return []
        found: list[tuple[tuple[int, bool, str, int], Path]] = []
        for path in self.logs.iterdir():
            name = self.crawl_log_name(path.name)
            if name is not None and path.is_file():
                found.append((name.order, path))
        return [path for _, path in sorted(found)]

    # -- hive.json -------------------------------------------------------------------

    def read_state(self) -> dict[str, Any] | None:
        """The running (or last) hive's ``hive.json``; None if there is none.

        A file that cannot be read or is not a JSON object is a HiveError naming it."""
        path = self.state_file
        try:
            state = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise HiveError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise HiveError(f"{path} is damaged (not JSON: {exc}); move it away to start "
                            "afresh from the stores") from exc
        if not isinstance(state, dict):
            raise HiveError(f"{path} is damaged (not a JSON object)")
        return state

    def write_state(self, state: dict[str, Any]) -> None:
        """Replace ``hive.json`` with ``state``, atomically and durably."""
        write_durably(self.state_file, json.dumps(state, indent=2).encode(), 0o644)

    def cluster_machines(self) -> list[tuple[str, Path, bool]]:
        """A cluster driver's data directory (``hive start --cluster``): each machine's name,
        data directory (where ``cluster.node_data`` puts it: on a real cluster, copied there
        first, README "Cluster") and whether the operator dropped it; empty for a directory
        that is no cluster's, or whose ``hive.json`` does not read."""
        try:
            state = self.read_state()
        except HiveError:
            return []
        cluster = state.get("cluster") if state else None
        config = state.get("config") if state else None
        if not isinstance(cluster, dict) or not isinstance(config, dict):
            return []
        template = config.get("cluster", {}).get("node_data", "")
        dropped = cluster.get("dropped") or []
        names = [m.get("name") for m in cluster.get("plan", {}).get("machines", [])]
        names += cluster.get("left") or []  # machines a resize drained keep WARCs and logs
        return [(name, Path(template.format(data=self.root, node=name)), name in dropped)
                for name in names if isinstance(name, str)]

    def update_state(self, **changes: Any) -> dict[str, Any]:
        """Set fields of ``hive.json`` (made if there is none), keeping the others."""
        state = self.read_state() or {}
        state.update(changes)
        self.write_state(state)
        return state


def write_durably(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` with ``data`` atomically and durably: written whole to a temporary
    beside it, synced, renamed over it, and the rename synced in its directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make the names created, renamed or removed in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
