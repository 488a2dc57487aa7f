"""hive as installed, not as checked out: the wheel carries the defaults, and the declared
dependencies are exactly what the code imports.

The full check — a fresh virtualenv, the wheel installed into it, ``hive demo`` run from
it — is in ``.ci/run``; these are its parts that fit a test.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FIRST_PARTY = {"hive", "cli", "tests", "bench"}
# What a wheel is built from; the rest of the checkout (tests, bench, data) is left out.
BUILD_INPUTS = ["pyproject.toml", "README.md", "cli.py", "hive", "conf"]


def _normalized(distribution: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, f"cannot read the name of requirement {requirement!r}"
    return _normalized(match.group())


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.AST) -> set[str]:
    """Top-level modules imported by absolute imports, except under ``if TYPE_CHECKING``."""
    if isinstance(node, ast.If) and _is_type_checking(node):
        return set().union(*(_imported(child) for child in node.orelse))
    if isinstance(node, ast.Import):
        return {alias.name.partition(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        return {node.module.partition(".")[0]} if node.level == 0 and node.module else set()
    return set().union(*(_imported(child) for child in ast.iter_child_nodes(node)))


def third_party_imports(paths: list[Path]) -> dict[str, list[str]]:
    """Each third-party top-level module imported by ``paths`` -> the files importing it."""
    found: dict[str, list[str]] = {}
    for path in paths:
        for module in _imported(ast.parse(path.read_text(), str(path))):
            if module not in sys.stdlib_module_names and module not in FIRST_PARTY:
                found.setdefault(module, []).append(str(path.relative_to(ROOT)))
    return found


def import_names() -> dict[str, set[str]]:
    """Installed distribution (normalized name) -> the top-level modules it provides."""
    names: dict[str, set[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            names.setdefault(_normalized(distribution), set()).add(module)
    return names


def runtime_sources() -> list[Path]:
    return sorted((ROOT / "hive").rglob("*.py")) + [ROOT / "cli.py"]


#: Extras that only develop hive (its tests, its benchmarks); every other extra is a feature
#: of the runtime (``text``, ``export``) that a plain install goes without.
DEVELOPMENT_EXTRAS = {"test", "bench"}


def feature_extras() -> dict[str, set[str]]:
    """Each runtime feature extra -> the distributions (normalized) it brings."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    return {name: {_requirement_name(r) for r in requirements}
            for name, requirements in extras.items() if name not in DEVELOPMENT_EXTRAS}


def module_level_imports(path: Path) -> set[str]:
    """Top-level modules a file imports when it is imported (not inside a function)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found |= _imported(node)
    return found


def test_runtime_dependencies_are_exactly_what_the_runtime_imports() -> None:
    """Every third-party module hive/ and cli.py import is a dependency or comes with a
    feature extra; every dependency is imported."""
    declared = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    optional = set().union(*feature_extras().values())
    provides = import_names()
    missing = sorted(d for d in declared | optional if d not in provides)
    assert not missing, f"declared but not installed, so their modules are unknown: {missing}"
    imported = third_party_imports(runtime_sources())
    undeclared = {m: files for m, files in imported.items()
                  if not any(m in provides[d] for d in declared | optional)}
    unused = sorted(d for d in declared if not provides[d] & set(imported))
    assert not undeclared, f"imported by the runtime but in no dependency or extra: {undeclared}"
    assert not unused, f"in dependencies but never imported by hive/ or cli.py: {unused}"


def test_a_feature_extra_is_imported_only_when_its_feature_runs() -> None:
    """A plain install imports every module of hive: the libraries of a feature extra are
    imported inside the functions that use them, never when a module is loaded."""
    provides = import_names()
    extra_modules = {module for distributions in feature_extras().values()
                     for d in distributions for module in provides.get(d, ())}
    eager = {str(path.relative_to(ROOT)): sorted(module_level_imports(path) & extra_modules)
             for path in runtime_sources()}
    assert {path: found for path, found in eager.items() if found} == {}


def test_the_tests_import_only_runtime_and_test_dependencies() -> None:
    project = PYPROJECT["project"]
    declared = {_requirement_name(r)
                for r in project["dependencies"] + project["optional-dependencies"]["test"]}
    assert set().union(*feature_extras().values()) <= declared, "the test extra lacks a feature's"
    provides = import_names()
    available = set().union(*(provides.get(d, set()) for d in declared))
    imported = third_party_imports(sorted((ROOT / "tests").rglob("*.py")))
    undeclared = {m: files for m, files in imported.items() if m not in available}
    assert not undeclared, f"imported by tests/, in no dependency nor the test extra: {undeclared}"


def test_the_import_walk_sees_function_level_imports_and_skips_type_checking() -> None:
    source = (
        "import os, zmq.auth\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import lmdb\nelse:\n    import mmh3\n"
        "def f():\n    from selectolax.lexbor import LexborHTMLParser\n    from . import x\n"
    )
    assert _imported(ast.parse(source)) == {"os", "zmq", "typing", "mmh3", "selectolax"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built by pip from a copy of the build inputs (no stale build/ of the checkout)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    out = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
        check=True, timeout=300,
    )
    (built,) = out.glob("hive_crawler-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_the_defaults_and_every_module(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert "hive/conf/default.toml" in names, sorted(names)
        assert archive.read("hive/conf/default.toml") == (ROOT / "conf/default.toml").read_bytes()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    modules = {p.relative_to(ROOT).as_posix() for p in runtime_sources()}
    assert modules - names == set(), "modules the wheel leaves out"
    requires = {_requirement_name(line.split(":", 1)[1].strip())
                for line in metadata.decode().splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line}
    assert requires == {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}


@pytest.mark.slow
def test_an_unpacked_wheel_loads_the_defaults_it_carries(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    probe = ("from hive import config; config.load(environ={}); "
             "print(config.DEFAULT_FILE); print(config.__file__)")
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(site)},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    default_file, module = result.stdout.splitlines()
    assert Path(module).is_relative_to(site)
    assert Path(default_file) == site / "hive" / "conf" / "default.toml"
