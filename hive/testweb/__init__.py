"""The synthetic multi-host web that tests, bench/ and ``hive demo`` crawl, served on loopback.

Three modules:

- hive.testweb.graph: :class:`Web`, a site graph that is a pure function of its
  parameters and seed (normal hosts, robots.txt variants, hostile hosts), with
  the expected answers of a crawl;
- hive.testweb.server: :func:`serve` (a :class:`WebServer`), a threaded
  HTTP/1.1 server that routes by the ``Host`` header and records every request
  as a :class:`Request`, and :class:`WebProcess`, the same server in a process
  of its own (``python -m hive.testweb``);
- hive.testweb.requestlog: the request log and its checks,
  :func:`politeness_violations` (on the server's stamps, or corrected by the
  crawl log with :func:`received` and :func:`as_received`) and
  :func:`duplicates`.

The names most used are importable from here.
"""

from __future__ import annotations

from hive.testweb.graph import Web
from hive.testweb.requestlog import (
    Request,
    as_received,
    duplicates,
    politeness_violations,
    received,
)
from hive.testweb.server import WebProcess, WebServer, serve

__all__ = [
    "Request",
    "Web",
    "WebProcess",
    "WebServer",
    "as_received",
    "duplicates",
    "politeness_violations",
    "received",
    "serve",
]
