"""User code a configuration names by a dotted path (``package.module:function``),
loaded in one place: the config checks that it loads before any process starts, and
the component that calls it (the frontier's prioritizer) loads it the same way."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from hive.errors import ConfigError


def load_object(key: str, path: str) -> Callable[..., Any]:
    """Import ``module:function``; a bad path is a ConfigError naming the key."""
    module_name, _, attr = path.partition(":")
    try:
        func = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{key}: cannot load {path!r}: {exc}") from exc
    if not callable(func):
        raise ConfigError(f"{key}: {path!r} is not callable")
    loaded: Callable[..., Any] = func
    return loaded
