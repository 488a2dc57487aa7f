"""A URL's state in its owner's seen set: the one enumerated type every layer names.

Every admitted URL has exactly one state (hive/storage/schema.py keeps it in
``urls``, with the byte that encodes it, which only that module knows):

- ``PENDING``: admitted and queued, in a front or a back queue; a leased URL is
  pending too, its back key named in ``leases`` until its outcome is applied;
- ``DONE``: its fetch has an outcome, stored with it (an outcome kind,
  hive.outcome);
- ``REFUSED``: refused at admission, stored with the reason.
"""

from __future__ import annotations

from enum import Enum


class UrlState(Enum):
    """A URL's state in the seen set (see the module docstring)."""

    PENDING = "pending"
    DONE = "done"
    REFUSED = "refused"
