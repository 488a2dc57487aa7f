"""hive's exception hierarchy.

Library errors are converted at the boundary that meets them; a failed fetch is
an outcome (data), never one of these. These are for callers that must stop::

    HiveError
    ├── ConfigError        a bad config key or value (names the key)
    ├── URLError           a URL hive refuses (also a ValueError; carries .reason)
    ├── StoreError         a store cannot do what was asked, or a file of it is damaged
    ├── DnsFailure         a lookup failed (hive.fetch.dns; cached and turned into an outcome)
    ├── WireError          a malformed message (hive.core.wire; counted and dropped)
    ├── RunDirError        the private socket directory is unsafe (hive.procs.endpoints)
    ├── LockedError        another process holds the data or worker directory
    └── ControlError       the control socket gave no answer or an error answer
"""

from __future__ import annotations


class HiveError(Exception):
    """Base of every error hive raises on purpose."""


class ConfigError(HiveError):
    """A configuration key or value is wrong; the message names the key."""


class URLError(HiveError, ValueError):
    """A URL hive refuses to crawl; ``reason`` is a short machine-readable kind."""

    def __init__(self, reason: str, url: str, detail: str = "") -> None:
        self.reason = reason
        self.url = url
        shown = url if len(url) <= 120 else url[:117] + "..."
        super().__init__(f"{reason}: {detail + ': ' if detail else ''}{shown!r}")


class StoreError(HiveError):
    """A store failed (map full beyond growth, disk full), or a data-directory file is damaged
    (a store's ``data.mdb``, ``hive.json``); the message names the file."""


class ControlError(HiveError):
    """A control request failed or timed out."""
