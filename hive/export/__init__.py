"""``hive export``: a crawl in the formats its users reach for (hive/ARCHITECTURE.md).

Read in steps, one module each: :mod:`hive.export.records` reads one WARC record back
by its position, :mod:`hive.export.logtable` keeps the crawl logs' lines on disk by URL,
:mod:`hive.export.urlparts` splits a URL into Common Crawl's ``url_*`` columns,
:mod:`hive.export.languages` keeps the text sink's languages by the capture they belong
to, and :mod:`hive.export.captures` joins the closed WARCs' captures to their crawl-log
lines and languages, one :class:`~hive.export.captures.Row` at a time.
:mod:`hive.export.parquet` writes those rows as a columnar index (Common Crawl's
cc-index-table names and types), and :mod:`hive.export.wacz` packs the WARCs, their
index and a pages list into a WACZ.

The libraries these formats need (pyarrow) are the ``export`` extra: :func:`require`
imports one, or says how to install it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from hive.errors import HiveError

EXTRA = "export"


def require(module: str) -> ModuleType:
    """Import ``module``, a library of the ``export`` extra; a HiveError saying how to
    install it if it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise HiveError(
            f"hive export needs {module.split('.')[0]}, which is not installed: install "
            f"hive's {EXTRA!r} extra (pip install 'hive-crawler[{EXTRA}]')"
        ) from exc
