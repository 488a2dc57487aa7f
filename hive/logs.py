"""Repeated log warnings, rate-limited: a flood of bad input must not become a flood of log.

A flood of 30-40k malformed control messages a second once wrote 600,000
warnings (32 MB of log) and starved the supervisor. :class:`RepeatFilter`
lets through, per call site and level (the logger, the unformatted message
and the level: one kind of event), at most ``burst`` records in each
``window`` seconds; the first record let through after a quiet spell says how
many like it were dropped. One filter serves every handler of a process (the
terminal and the file see the same records). Records below WARNING pass untouched: the file
log's info lines are the crawl's own record, bounded by its work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

BURST = 20
WINDOW = 60.0
# Distinct kinds of event remembered; beyond it the oldest window is forgotten.
MAX_KINDS = 1000

Kind = tuple[str, str, int]


class RepeatFilter(logging.Filter):
    """At most ``burst`` records of one kind per ``window`` seconds (see the module docstring)."""

    def __init__(self, burst: int = BURST, window: float = WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self.clock = clock
        # kind -> [window start, records let through in it, records dropped since the last]
        self._kinds: dict[Kind, list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # One instance serves every handler of a process: a record is judged once.
        decided = getattr(record, "hive_repeat", None)
        if decided is None:
            decided = record.hive_repeat = self._judge(record)
        return bool(decided)

    def _judge(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        now = self.clock()
        kind = (record.name, str(record.msg), record.levelno)
        state = self._kinds.get(kind)
        if state is None or now - state[0] >= self.window:
            dropped = int(state[2]) if state is not None else 0
            if state is None and len(self._kinds) >= MAX_KINDS:
                del self._kinds[next(iter(self._kinds))]
            self._kinds[kind] = [now, 1, 0]
            if dropped:
                record.msg = f"{record.msg} ({dropped} more like it in {self.window:g}s not logged)"
            return True
        if state[1] < self.burst:
            state[1] += 1
            return True
        state[2] += 1
        return False
