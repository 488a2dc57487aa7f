"""The map kept true: which room of hive may import which (hive/ARCHITECTURE.md).

Every ``import`` and ``from … import`` in hive/ and cli.py is read from the
source (function-level ones included, ``if TYPE_CHECKING:`` ones excluded: they
cost nothing at run time) and checked against the rules below. A rule broken by
a change fails here with the module and the line that broke it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The rooms, by module prefix; the first that matches names a module's room.
ROOMS: tuple[tuple[str, str], ...] = (
    ("hive.core", "core"),
    ("hive.storage", "storage"),
    ("hive.frontier", "frontier"),
    ("hive.fetch", "fetch"),
    ("hive.procs", "procs"),
    ("hive.testweb", "testweb"),
    ("hive.report", "report"),
    ("hive.export", "export"),
    ("cli", "cli"),
    ("hive", "base"),
)

#: Which rooms each room may import (besides itself): a ladder, base at the bottom
#: (checked acyclic below, so no two rooms import each other even through a third).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "base": frozenset(),
    "core": frozenset({"base"}),
    "storage": frozenset({"base", "core"}),
    "frontier": frozenset({"base", "core", "storage"}),
    "fetch": frozenset({"base", "core"}),
    "procs": frozenset({"base", "core", "storage", "frontier", "fetch"}),
    "testweb": frozenset(),
    "report": frozenset({"base", "core", "storage", "frontier"}),
    "export": frozenset({"base", "core", "storage", "fetch", "report"}),
    "cli": frozenset({"base", "core", "storage", "frontier", "fetch", "procs", "testweb",
                      "report", "export"}),
}

#: Outside modules (top-level names) only some rooms may import.
ONLY_IN: dict[str, frozenset[str]] = {
    "lmdb": frozenset({"storage"}),
    "zmq": frozenset({"procs"}),
}

#: Outside modules only some modules may import: Ray is the cluster mode's alone
#: (``pip install 'hive-crawler[cluster]'``), so a hive on one machine never loads it.
ONLY_MODULES: dict[str, frozenset[str]] = {
    "ray": frozenset({"hive.procs.cluster_head", "hive.procs.cluster_node",
                      "hive.procs.cluster"}),
}

#: The pure core opens no socket, thread, process or HTTP connection.
CORE_FORBIDDEN = frozenset({
    "socket", "ssl", "select", "selectors", "threading", "multiprocessing", "subprocess",
    "concurrent", "asyncio", "signal", "http", "urllib.request", "zmq", "lmdb",
})

#: The CLI reaches a running hive through its control client: never the inside of a
#: process, its store or its sockets.
CLI_FORBIDDEN = frozenset({
    "hive.frontier.frontier", "hive.storage.store", "hive.procs.worker", "hive.procs.workerproc",
    "hive.procs.splitter", "lmdb", "zmq",
})


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def room(module: str) -> str | None:
    for prefix, name in ROOMS:
        if module == prefix or module.startswith(prefix + "."):
            return name
    return None


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_in(tree: ast.AST) -> Iterator[tuple[ast.AST, int]]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, node.lineno
        stack.extend(ast.iter_child_nodes(node))


def imports_of(path: Path, module: str, root: Path = ROOT) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node, line in _imports_in(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, line)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{module}:{line}: relative import; hive imports absolutely")
            base = node.module or ""
            package = root.joinpath(*base.split(".")).is_dir()
            for alias in node.names:
                # ``from hive.procs import worker`` imports the module hive.procs.worker.
                target = f"{base}.{alias.name}" if package else base
                yield Import(module, target, line)


def source_modules(root: Path = ROOT) -> Iterator[tuple[Path, str]]:
    yield root / "cli.py", "cli"
    for path in sorted((root / "hive").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield path, ".".join(parts)


def violations(root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for path, module in source_modules(root):
        own = room(module)
        assert own is not None, module
        for imp in imports_of(path, module, root):
            target_room = room(imp.target) if imp.target.split(".")[0] in ("hive", "cli") else None
            top = imp.target.split(".")[0]
            if target_room is not None and target_room != own \
                    and target_room not in MAY_IMPORT[own]:
                found.append(f"{imp}: the {own} room may not import the {target_room} room")
            if top in ONLY_IN and own not in ONLY_IN[top]:
                found.append(f"{imp}: only {', '.join(sorted(ONLY_IN[top]))} may import {top}")
            if top in ONLY_MODULES and module not in ONLY_MODULES[top]:
                found.append(f"{imp}: only {', '.join(sorted(ONLY_MODULES[top]))} may "
                             f"import {top}")
            if own == "core" and any(imp.target == f or imp.target.startswith(f + ".")
                                     for f in CORE_FORBIDDEN):
                found.append(f"{imp}: the pure core opens no socket, thread or connection")
            if own == "cli" and any(imp.target == f or imp.target.startswith(f + ".")
                                    for f in CLI_FORBIDDEN):
                found.append(f"{imp}: the CLI reaches the hive through its control client")
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Which hive modules (and cli) each one imports, function-level imports included."""
    modules = {module: path for path, module in source_modules(root)}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        for imp in imports_of(path, module, root):
            target = imp.target
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]  # ``from hive.x.m import name``
            if target in modules and target != module:
                graph[module].add(target)
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_every_import_keeps_the_rules() -> None:
    assert violations() == []


def test_no_module_imports_itself_through_others() -> None:
    """No import circle, function-level imports included: a module never needs itself."""
    circle = cycle_in(import_graph())
    assert circle is None, " -> ".join(circle or [])


def test_the_rooms_make_a_ladder() -> None:
    """No folder loop: the rooms' may-import rules have no cycle, so the map reads bottom up."""
    assert cycle_in({name: set(allowed) for name, allowed in MAY_IMPORT.items()}) is None


def test_a_circle_is_named(tmp_path: Path) -> None:
    """The circle check bites: config importing the DNS cache (which imports config) fails."""
    copy = _copy_tree(tmp_path)
    victim = copy / "hive/config.py"
    victim.write_text(victim.read_text(encoding="utf-8")
                      + "\ndef f():\n    from hive.fetch.dns import DnsCache\n", encoding="utf-8")
    circle = cycle_in(import_graph(copy))
    assert circle is not None and "hive.config" in circle and "hive.fetch.dns" in circle


#: A module longer than this must say in its docstring why it is still one concept.
MAX_LINES = 600


def oversized(root: Path = ROOT) -> list[str]:
    """Modules over MAX_LINES lines whose docstring does not argue "Why one module:"."""
    found = []
    for path, module in source_modules(root):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if lines > MAX_LINES and "Why one module:" not in doc:
            found.append(f"{module}: {lines} lines, and its docstring does not say why it is "
                         "one module")
    return found


def test_no_module_is_long_unless_it_says_why() -> None:
    """One concept per module: past MAX_LINES, the docstring argues why it is one."""
    assert oversized() == []


def test_a_long_module_without_its_reason_is_named(tmp_path: Path) -> None:
    copy = _copy_tree(tmp_path)
    victim = copy / "hive/core/ring.py"
    victim.write_text(victim.read_text(encoding="utf-8") + "\n" * MAX_LINES, encoding="utf-8")
    before = {f.split(":")[0] for f in oversized()}
    assert {f.split(":")[0] for f in oversized(copy)} - before == {"hive.core.ring"}


def test_every_module_is_in_a_room() -> None:
    for _, module in source_modules():
        assert room(module) is not None, module


def _copy_tree(tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    (copy / "hive").mkdir(parents=True)
    for path, _ in source_modules():
        target = copy / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    return copy


@pytest.mark.parametrize(("where", "line", "rule"), [
    ("hive/core/ring.py", "import socket\n", "opens no socket"),
    ("hive/core/ring.py", "from hive.procs import worker\n", "core room may not import the procs"),
    ("hive/core/ring.py", "from hive.storage import store\n",
     "core room may not import the storage"),
    ("hive/core/ring.py", "import lmdb\n", "only storage may import lmdb"),
    ("hive/fetch/pipeline.py", "from hive.frontier import frontier\n",
     "fetch room may not import the frontier"),
    ("hive/storage/schema.py", "from hive.frontier import hosts\n",
     "storage room may not import the frontier"),
    ("hive/config.py", "def f():\n    from hive.fetch import dns\n", "base room may not import"),
    ("cli.py", "from hive.frontier.frontier import Frontier\n", "through its control client"),
    ("hive/fetch/parse.py", "import lmdb\n", "only storage may import lmdb"),
    ("hive/fetch/parse.py", "from hive.storage import store\n", "fetch room may not import"),
    ("hive/config.py", "from hive.fetch import client\n", "base room may not import"),
    ("hive/logs.py", "from hive.fetch import dns\n", "base room may not import"),
    ("cli.py", "from hive.storage.store import Store\n", "through its control client"),
    ("cli.py", "def f():\n    from hive.procs import worker\n", "through its control client"),
    ("hive/procs/supervisor.py", "def f():\n    import ray\n", "may import ray"),
])
def test_a_broken_rule_is_named(tmp_path: Path, where: str, line: str, rule: str) -> None:
    """The rules bite: a copy of the tree with one violation added fails, naming it."""
    copy = _copy_tree(tmp_path)
    victim = copy / where
    victim.write_text(victim.read_text(encoding="utf-8") + "\n" + line, encoding="utf-8")
    found = violations(copy)
    assert found and all(where.removesuffix('.py').replace('/', '.') in f for f in found) \
        and any(rule in f for f in found), found


def test_imports_under_type_checking_are_not_counted(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import zmq\n"
                      "else:\n    import json\n")
    assert sorted(i.target for i in imports_of(source, "hive.core.m")) == ["json", "typing"]


def test_the_map_names_every_module_and_every_database() -> None:
    """hive/ARCHITECTURE.md stays true: every module of hive is in a room of it, and every
    database the schema defines is in its on-disk table."""
    from hive.storage.schema import DB_NAMES

    text = (ROOT / "hive" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for path, module in source_modules():
        name = module.rsplit(".", 1)[-1]
        if module in ("cli", "hive") or path.name == "__init__.py" and module.count(".") == 1:
            continue
        assert f"`{name}`" in text or f"`{name}.py`" in text or f"{name}/" in text, module
    for db in DB_NAMES:
        assert f"| `{db}` |" in text, db


def test_the_map_names_every_meta_key_and_every_file_of_a_data_directory(tmp_path: Path) -> None:
    """Every key of the ``meta`` database the schema defines is in the map's ``meta`` row,
    and every path ``DataDir`` names is in its on-disk table."""
    from hive.storage import schema
    from hive.storage.datadir import DataDir

    text = (ROOT / "hive" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    meta_row = next(line for line in text.splitlines() if line.startswith("| `meta` |"))
    keys = [value.decode() for name, value in vars(schema).items() if name.startswith("META_")]
    assert "state" in keys and "dedup_from" in keys
    for key in [*keys, schema.resize_marker("<store>").decode()]:
        assert f"`{key}" in meta_row, key
    on_disk = text.split("## On disk", 1)[1].split("\n## ", 1)[0]
    dd = DataDir(tmp_path.resolve())
    paths = [getattr(dd, name) for name, value in vars(DataDir).items()
             if isinstance(value, property)]
    assert dd.merged_index in paths and dd.supervisor_out in paths
    paths += [dd.worker(7), DataDir.store_data(dd.worker(7)), DataDir.store_lock(dd.worker(7)),
              dd.crawl_log(7), dd.log_file("splitter"), dd.failure_file("splitter.log")]
    for path in paths:
        shown = path.name.replace("07", "NN").replace("splitter", "<role>")
        assert f"`{shown}`" in on_disk or f"`{shown}/`" in on_disk, path


def test_the_fetch_path_loads_no_store() -> None:
    """A fetch knows its lease from the core: loading the pipeline loads neither the
    frontier nor the storage nor lmdb (checked in a fresh interpreter)."""
    script = (
        "import sys, hive.fetch.pipeline\n"
        "print(','.join(m for m in sys.modules if m == 'lmdb'\n"
        "               or m.startswith(('hive.frontier', 'hive.storage'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == ""


def test_the_supervisor_loads_no_fetch_path_and_no_metrics_library() -> None:
    """What only workers run (the HTML parser, the public suffix list, the WARC writer)
    and what only a hive serving /metrics needs stay out of the supervisor: ~0.2 s of CPU
    at every start. Checked in a fresh interpreter, which names its children's targets
    as the supervisor does."""
    script = (
        "import sys, cli\n"
        "from hive.procs import supervisor, splitter\n"
        "from hive.procs.children import worker_main\n"
        "loaded = [m for m in ('hive.fetch.parse', 'hive.procs.workerproc', 'selectolax',\n"
        "          'publicsuffixlist', 'prometheus_client') if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == ""
    # Nor when it starts its children: it names the workers' target without importing it.
    tree = ast.parse((ROOT / "hive/procs/supervisor.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "hive.procs.workerproc" not in imported


def test_a_hive_on_one_machine_loads_no_ray() -> None:
    """Ray is the cluster mode's (the ``cluster`` extra): the CLI, the supervisor and the
    worker of a hive on one machine load none of it (checked in a fresh interpreter)."""
    script = (
        "import sys, cli\n"
        "from hive.procs import supervisor, splitter, workerproc\n"
        "print(','.join(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == ""
