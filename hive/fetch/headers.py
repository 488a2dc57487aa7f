"""The values of the response header fields the crawler acts on, parsed so that nothing raises.

A header value is whatever bytes a server sent, read as Latin-1 (so any byte
sequence is some string). Every parser here takes such a string and returns a
value or None: a value it cannot read is as good as absent, and no input makes
it raise (the tests feed them arbitrary text with hypothesis). Numbers are
ASCII digits only: ``str.isdigit`` and ``int`` also accept ``²``, ``١٢`` or
``1_0``, which no HTTP grammar does.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Iterable
from urllib.parse import urljoin

from hive.fetch.parse import refresh_url

# Seconds beyond which a Retry-After means "not in this crawl" (politeness caps it lower).
_MAX_SECONDS = 1e9
# X-Robots-Tag directives that stop links being followed, as the robots meta tag's.
_NOFOLLOW = frozenset({"nofollow", "none"})
_DIRECTIVE = re.compile(r"[a-z_-]+", re.ASCII)


def parse_retry_after(value: str, now: float) -> float | None:
    """Seconds to wait from ``now`` by a Retry-After value (delay-seconds or HTTP-date).

    A date in the past gives 0; a value that is neither gives None; any value
    gives a finite number of seconds, at most a billion.
    """
    value = value.strip(" \t")
    if _is_number(value):
        return min(float(value), _MAX_SECONDS)
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        when = float(email.utils.mktime_tz(parsed))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if not math.isfinite(when):
        return None
    return min(max(0.0, when - now), _MAX_SECONDS)


def content_length(value: str | None) -> int | None:
    """A Content-Length's value, or None when absent or not one decimal number."""
    if value is None:
        return None
    value = value.strip(" \t")
    return int(value) if _is_number(value) and len(value) <= 18 else None


def _is_number(value: str) -> bool:
    """Whether value is ASCII digits only (for ASCII text, isdigit means 0-9)."""
    return value.isascii() and value.isdigit()


def content_codings(value: str) -> list[str]:
    """The codings a Content-Encoding value lists, lowercased, in the order applied."""
    return [coding.strip(" \t").lower() for coding in value.split(",")]


def resolve_location(url: str, value: str) -> str | None:
    """A Location value resolved against the URL it came from; None if it cannot be."""
    value = value.strip(" \t")
    if not value:
        return None
    try:
        return urljoin(url, value)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return None


def refresh_target(url: str, value: str) -> str | None:
    """The URL a ``Refresh`` header sends to (``5; url=/next``), resolved; None if none."""
    target = refresh_url(value)
    return resolve_location(url, target) if target is not None else None


def robots_nofollow(values: Iterable[str], agent: str) -> bool:
    """Whether X-Robots-Tag values forbid following the page's links to ``agent``.

    Each value is a comma-separated list of directives, optionally scoped to one
    crawler by a leading ``name:`` (``googlebot: nofollow``); a scope naming
    another crawler is ignored. ``nofollow`` and ``none`` forbid, as in the
    robots meta tag.
    """
    agent = agent.lower()
    for value in values:
        text = value.lower()
        scope, colon, rest = text.partition(":")
        scope = scope.strip(" \t")
        if colon and _DIRECTIVE.fullmatch(scope) and scope not in _KNOWN_DIRECTIVES:
            if scope != agent:
                continue
            text = rest
        if any(part.strip(" \t") in _NOFOLLOW for part in text.split(",")):
            return True
    return False


# Directives that take a value after a colon, so a leading "name:" is not a crawler's name.
_KNOWN_DIRECTIVES = frozenset({
    "unavailable_after", "max-snippet", "max-image-preview", "max-video-preview",
})
