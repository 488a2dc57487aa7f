"""robots.txt (RFC 9309): what a fetch of it means, the rules it sets, and their cache.

This module never fetches: the worker fetches ``/robots.txt`` under the host's
politeness with its HTTP client and hands the outcome to
``RobotsPolicy.from_fetch``. Rules are kept per **origin** (scheme, host and
port, RFC 9309 section 2.3): ``http://a.test`` and ``https://a.test`` share a
politeness key but not their robots.txt. The status policy, section 2.3.1:

- **2xx, read whole**: the first ``max_bytes`` bytes are parsed (RFC 9309 asks
  for at least 500 KiB). A file cut there loses its last, partial line too, so
  a truncated ``Allow: /private-stuff`` cannot become ``Allow: /``. A UTF-8 byte
  order mark is stripped; invalid UTF-8 is replaced, never fatal. A 2xx whose
  body did not arrive whole (the connection dropped mid-body, a timeout) or
  could not be decoded (corrupt gzip, an unknown content coding) is no file:
  the worker reports it as unreachable (``status=None``), never as empty.
- **3xx**: the fetch side follows redirects on the same host (host and port,
  the politeness key), up to ``max_redirects`` hops, each hop waiting the
  host's delay (``RobotsPolicy.next_hop``). A hop to another host is not
  followed: it would be a request to that host outside its lease, its delay
  and its own rules (30 hosts redirecting to one victim would put 30 requests
  in flight there at once). It is read as section 2.3.1.2 reads a chain too
  long to follow: the file is unavailable, allow all. Nothing is lost for the
  common case, a host that redirects everything elsewhere (to ``www.`` or to
  https on another port): its pages redirect too, and what they lead to is
  fetched under the target host's own robots.txt. What is given up: a host that
  serves its pages itself but keeps its robots.txt on another host is crawled
  as if it had none. A 3xx that reaches ``from_fetch`` (too many hops, no usable
  Location) is likewise unavailable.
- **4xx other than 429**: unavailable, allow all.
- **429, 5xx, any other status, timeout or unreachable** (``status=None``):
  disallow all and retry. Try ``n`` (counting from 1) that fails is retried
  ``retry_delay * 2**(n-1)`` seconds later, or after the answer's
  ``Retry-After`` if that is longer (at most ``cache_ttl`` either way), until
  ``tries`` tries in all have failed: the origin is then ``unreachable`` (its
  URLs end as ``robots_unreachable``) for ``unreachable_retry`` seconds, after
  which robots.txt is tried again (``tries`` more times), so a host that comes
  back is crawled again. The caller counts the tries (it keeps them with the
  host's state).
- **A stale copy** (section 2.4): when the refetch of an expired file fails,
  the copy that expired is used instead of disallowing all, for at most
  ``max_stale`` seconds past its expiry, while the tries go on with the same
  back-off (``unreachable_retry`` apart once ``tries`` have failed).

Definitive answers are kept for ``cache_ttl`` (RFC 9309: at most 24 hours).

**Groups** are matched as Google's open-source parser (google/robotstxt) does,
by normalizing the lines before protego reads them (``group_lines``): a group's
``User-agent`` lines run until its first rule line (``Allow``, ``Disallow``, or
``Crawl-delay``, which Google ignores and we obey), so a line of another field
between two ``User-agent`` lines does not split the group; a ``User-agent``
value stands for its product token, its leading run of letters, ``-`` and
``_`` (``hive bot`` and ``hive/2.0`` are ``hive``, ``*`` is ``*``), matched
to ours exactly and case-insensitively; the groups of our token are merged,
else those of ``*``. Lines before any ``User-agent`` and lines of
unknown fields are dropped. Protego (pinned: we read its parsed rule sets)
spells the patterns and URLs alike for comparison (percent-encoding).

**Matching.** The rules of our group are compiled once into ``AgentRules``:
plain prefixes in a dict probed once per distinct pattern length (the longest
match is the first hit), ``$``-anchored ones in a dict of exact paths, and
wildcard patterns indexed by their literal prefix and tried longest first, each
by ``str.find`` over its literal parts (linear in the path, no backtracking).
The longest pattern wins, ``Allow`` on a tie; ``/robots.txt`` itself is always
allowed. A check does at most ``MAX_CHECK_WORK`` units of work on wildcard
patterns (a unit: a substring probed in an index, or a literal part searched
for, weighted by the path's length); a URL that needs more (a file built to be
slow to match) is refused, which is the safe side. So the frontier thread,
which checks every page before it is leased, spends on one check at most a
slice and a dict probe per distinct plain-pattern length (at most the path's
length), one dict probe for ``$`` paths, and ``MAX_CHECK_WORK`` units on
wildcards (a few ms at most). bench/bench_robots.py, 25,000 rules (512 KB):
7-15 us per URL plain, 30-45 us with wildcards (protego: 4-5 ms and 30-42 ms).
Compiling such a file (protego's parse, in a fetch thread) costs 1-5 s;
loading its compiled rules back from the store after an eviction, which the
frontier thread does, 40-130 ms: linear in the rules, bounded by
``max_bytes``, and once per origin until the next eviction.

Persistence: the ``robots`` store keeps, per host key, one entry per scheme:
the kind, expiry, stale limit, the sitemaps its ``Sitemap:`` lines name
(hive.fetch.sitemaps; for the sitemaps the crawl reads and for
cross-submission, which the origin vouches for by naming another host's
sitemap) and our group's compiled rules (not the body, so a load costs no
parse). Entries of an older format (before sitemaps were kept, version 2, or
before robots.txt was kept per origin, version 1) are never misread: their
origins fetch robots.txt again. ``RobotsCache`` keeps the rules in memory in an LRU
bounded by their estimated size in bytes, over ``load``/``store`` callables
that the worker backs with LMDB.
"""

from __future__ import annotations

import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args
from urllib.parse import urljoin, urlsplit

from protego import Protego
from protego._protego import (
    _ALLOW_DIRECTIVE,
    _CRAWL_DELAY_DIRECTIVE,
    _DISALLOW_DIRECTIVE,
    _USER_AGENT_DIRECTIVE,
    _extract_directive,
)
from protego._utils import _quote_path

from hive.config import Config
from hive.errors import ConfigError, StoreError

RulesKind = Literal["allow_all", "disallow_all", "parsed", "unreachable"]
_KINDS: tuple[RulesKind, ...] = get_args(RulesKind)
SCHEMES = ("http", "https")
# Literal parts of wildcard patterns one check may test (see "Matching" above).
MAX_CHECK_WORK = 50_000

_BOM = b"\xef\xbb\xbf"
_FORMAT_VERSION = 3
_ENTRY = struct.Struct(">BBddI")
_PRODUCT = re.compile(r"[A-Za-z_-]*")
_MAX_DELAY_TEXT = 32


def _token(value: str) -> str:
    """A User-agent value's product token, lowercased; ``*`` for the global group."""
    value = value.strip()
    if value.startswith("*") and (len(value) == 1 or value[1].isspace()):
        return "*"
    found = _PRODUCT.match(value)
    return "" if found is None else found.group().lower()


def product_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched against, lowercased."""
    token = _token(user_agent)
    if token in ("", "*"):
        raise ConfigError(f"fetch.user_agent: no product token at the start of {user_agent!r}")
    return token


def group_lines(text: str) -> str:
    """robots.txt lines regrouped as Google's parser groups them (module docstring)."""
    groups: list[tuple[list[str], list[str]]] = []
    closed = True
    for raw in text.splitlines():
        line = raw.partition("#")[0].strip()
        parsed = _extract_directive(line) if line else None
        if parsed is None:
            continue
        name, value = parsed
        if name in _USER_AGENT_DIRECTIVE:
            if closed:
                groups.append(([], []))
                closed = False
            token = _token(value)
            if token:
                groups[-1][0].append(token)
        elif not groups:
            continue
        elif name in _ALLOW_DIRECTIVE or name in _DISALLOW_DIRECTIVE:
            groups[-1][1].append(f"{'allow' if name in _ALLOW_DIRECTIVE else 'disallow'}: {value}")
            closed = True
        elif name in _CRAWL_DELAY_DIRECTIVE:
            groups[-1][1].append(f"crawl-delay: {value[:_MAX_DELAY_TEXT]}")
            closed = True
    out: list[str] = []
    for agents, body in groups:
        if agents:
            out.extend(f"user-agent: {agent}" for agent in agents)
            out.extend(body)
            out.append("")
    return "\n".join(out)


def _clip(body: bytes, max_bytes: int) -> bytes:
    if len(body) <= max_bytes:
        return body
    cut = body[:max_bytes]
    end = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
    return cut[: end + 1]


Rule = tuple[str, bool, int]  # (pattern as protego spells it, allow, priority)
_Wild = tuple[int, bool, tuple[str, ...], bool]  # (priority, allow, literal parts, anchored)
# Wildcard patterns that share a literal prefix are indexed by up to this many characters
# of their next literal part, which a matching path must contain.
_KEY = 8
# Groups this small are tried one by one: an index would cost more than it saves.
_UNINDEXED = 4


class _WildGroup:
    """The wildcard patterns of one literal prefix, indexed by a substring they need."""

    __slots__ = ("free", "keyed", "lengths")

    def __init__(self, rules: list[_Wild]) -> None:
        self.free: list[_Wild] = []
        self.keyed: dict[str, list[_Wild]] = {}
        for rule in rules:
            key = rule[2][1][:_KEY]
            if key:
                self.keyed.setdefault(key, []).append(rule)
            else:
                self.free.append(rule)
        self.lengths = tuple(sorted({len(k) for k in self.keyed}))

    def candidates(self, path: str, start: int) -> list[_Wild]:
        """The patterns that may match ``path`` (whose first ``start`` chars are the prefix)."""
        found = list(self.free)
        keyed = self.keyed
        for length in self.lengths:
            for key in {path[i : i + length] for i in range(start, len(path) - length + 1)}:
                rules = keyed.get(key)
                if rules is not None:
                    found.extend(rules)
        return found

    def rules(self) -> list[_Wild]:
        out = list(self.free)
        for rules in self.keyed.values():
            out.extend(rules)
        return out


class AgentRules:
    """One group's rules compiled for fast checks (see "Matching" in the module docstring)."""

    __slots__ = ("_plain", "_plain_lengths", "_exact", "_wild", "_wild_lengths", "count",
                 "size")

    def __init__(self, rules: Iterable[Rule]) -> None:
        plain: dict[str, bool] = {}
        exact: dict[str, tuple[int, bool]] = {}
        wild_rules: dict[str, list[_Wild]] = {}
        count = 0
        for pattern, allow, priority in rules:
            count += 1
            anchored = pattern.endswith("$")
            body = pattern[:-1] if anchored else pattern
            if "*" in body:
                parts = tuple((re.sub(r"\*+", "*", body) if "**" in body else body).split("*"))
                wild_rules.setdefault(parts[0], []).append((priority, allow, parts, anchored))
            elif anchored:
                exact[body] = max(exact.get(body, (-1, False)), (priority, allow))
            else:
                plain[body] = plain.get(body, False) or allow
        wild: dict[str, _WildGroup | list[_Wild]] = {}
        for prefix, group in wild_rules.items():
            if len(group) > _UNINDEXED:
                wild[prefix] = _WildGroup(group)
            else:
                group.sort(reverse=True)
                wild[prefix] = group
        self._plain = plain
        self._plain_lengths = tuple(sorted({len(p) for p in plain}, reverse=True))
        self._exact = exact
        self._wild = wild
        self._wild_lengths = tuple(sorted({len(p) for p in wild}, reverse=True))
        self.count = count
        self.size = self._estimate()

    def _estimate(self) -> int:
        """Bytes this object holds, estimated from counts and lengths (CPython 3.11 sizes:
        a str of n ASCII chars is 49 + n, a dict slot ~50, a tuple 40 + 8 per item)."""
        size = 400 + 8 * (len(self._plain_lengths) + len(self._wild_lengths))
        size += sum(map(len, self._plain)) + 100 * len(self._plain)
        size += sum(map(len, self._exact)) + 170 * len(self._exact)
        for prefix, group in self._wild.items():
            rules = group if isinstance(group, list) else group.rules()
            size += 160 + len(prefix) + 8 * len(rules)
            for rule in rules:
                size += 104 + 57 * len(rule[2]) + sum(map(len, rule[2]))
            if not isinstance(group, list):
                size += 200 + sum(100 + len(key) for key in group.keyed)
        return size

    def check(self, path: str) -> bool | None:
        """May ``path`` (as ``_quote_path`` spells it) be fetched? None: over the budget."""
        best, allow = -1, True
        size = len(path)
        plain = self._plain
        for length in self._plain_lengths:
            if length <= size:
                found = plain.get(path[:length])
                if found is not None:
                    best, allow = length, found
                    break
        exact = self._exact.get(path)
        if exact is not None and exact > (best, allow):
            best, allow = exact
        # Work in units of about one short string operation: a substring probed for
        # the index, or a literal part searched for (a longer path costs more per part).
        work, per_part = 0, 1 + size // 64
        for length in self._wild_lengths:
            group = self._wild.get(path[:length]) if length <= size else None
            if group is None:
                continue
            if isinstance(group, list):
                candidates = group
            else:
                work += len(group.lengths) * (size - length)
                if work > MAX_CHECK_WORK:
                    return None
                candidates = group.candidates(path, length)
                candidates.sort(reverse=True)
            for priority, rule_allow, parts, anchored in candidates:
                if (priority, rule_allow) <= (best, allow):
                    break
                work += len(parts) * per_part
                if work > MAX_CHECK_WORK:
                    return None
                if _wild_match(path, parts, anchored):
                    best, allow = priority, rule_allow
                    break
        return allow

    def rules(self) -> list[Rule]:
        """The rules again, as given (up to duplicates), for the store."""
        out: list[Rule] = [(p, a, len(p)) for p, a in self._plain.items()]
        out.extend((p + "$", a, pr) for p, (pr, a) in self._exact.items())
        for group in self._wild.values():
            out.extend(("*".join(parts) + ("$" if anc else ""), a, pr)
                       for pr, a, parts, anc in (group if isinstance(group, list)
                                                 else group.rules()))
        return out

    def encode(self) -> bytes:
        return "\n".join(f"{'A' if a else 'D'}{pr} {p}" for p, a, pr in self.rules()).encode()

    @classmethod
    def decode(cls, data: bytes) -> AgentRules:
        rules: list[Rule] = []
        for line in data.decode().split("\n") if data else ():
            priority, _, pattern = line[1:].partition(" ")
            if line[:1] not in ("A", "D") or not priority.isdigit():
                raise StoreError(f"robots entry has a malformed rule {line[:40]!r}")
            rules.append((pattern, line[0] == "A", int(priority)))
        return cls(rules)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AgentRules):
            return NotImplemented
        return sorted(self.rules()) == sorted(other.rules())

    __hash__ = None  # type: ignore[assignment]


def _wild_match(path: str, parts: tuple[str, ...], anchored: bool) -> bool:
    """Does ``path`` (which starts with ``parts[0]``) match the wildcard pattern?

    The leftmost occurrence of each literal part is as good as any later one,
    so one ``find`` per part decides, without backtracking.
    """
    pos = len(parts[0])
    for part in parts[1:-1]:
        pos = path.find(part, pos)
        if pos < 0:
            return False
        pos += len(part)
    last = parts[-1]
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return not last or path.find(last, pos) >= 0


def compile_group(text: str, agent: str) -> tuple[AgentRules, float | None]:
    """Our group's compiled rules and Crawl-delay from a robots.txt's text."""
    parser = Protego.parse(group_lines(text))
    groups = parser._user_agents
    rule_set = groups.get(agent) or groups.get("*")
    if rule_set is None:
        return AgentRules(()), None
    rules = [(r.value._pattern, r.field == "allow", r.value.priority) for r in rule_set._rules]
    delay = rule_set.crawl_delay
    return AgentRules(rules), None if delay is None else float(delay)


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """One origin's rules for our agent token, valid until ``expires``.

    ``stale_until``: how long the rules may stand in for a robots.txt that
    cannot be fetched again after they expire (RFC 9309 section 2.4).
    ``parse`` builds parsed rules from a body; the constructor takes compiled ones.
    """

    kind: RulesKind
    agent: str
    expires: float
    stale_until: float = 0.0
    compiled: AgentRules | None = field(default=None, repr=False)
    delay: float | None = None
    sitemaps: tuple[str, ...] = ()  # canonical URLs named by Sitemap: lines

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown robots rules kind {self.kind!r}")
        if (self.kind == "parsed") != (self.compiled is not None):
            raise ValueError("parsed rules, and only they, carry compiled rules")

    @classmethod
    def parse(
        cls, body: bytes, agent: str, expires: float, stale_until: float,
        sitemaps: tuple[str, ...] = (),
    ) -> RobotsRules:
        text = body.removeprefix(_BOM).decode("utf-8", errors="replace")
        compiled, delay = compile_group(text, agent)
        return cls("parsed", agent, expires, stale_until, compiled, delay, sitemaps)

    def check(self, url: str) -> bool | None:
        """May our agent fetch ``url``? None when the check ran over its budget."""
        if self.compiled is None:
            return self.kind == "allow_all"
        try:
            path = _quote_path(url)
        except ValueError:
            return False
        if path == "/robots.txt":
            return True
        return self.compiled.check(path)

    def allowed(self, url: str) -> bool:
        """May our agent fetch ``url``? Unreadable URLs and checks over budget are refused."""
        return self.check(url) is True

    def crawl_delay(self) -> float | None:
        """The Crawl-delay of the group that applies to our agent, if any."""
        return self.delay

    @property
    def size(self) -> int:
        """Estimated bytes held in memory, for the cache's bound."""
        named = sum(map(len, self.sitemaps)) + 56 * len(self.sitemaps) if self.sitemaps else 0
        return 240 + named + (0 if self.compiled is None else self.compiled.size)

    def expired(self, now: float) -> bool:
        return now >= self.expires

    def usable_stale(self, now: float) -> bool:
        """May these rules stand in for a robots.txt that cannot be fetched again now?"""
        return self.kind in ("parsed", "allow_all") and now < self.stale_until

    def restamped(self, expires: float) -> RobotsRules:
        return RobotsRules(self.kind, self.agent, expires, self.stale_until, self.compiled,
                           self.delay, self.sitemaps)

    def encode(self) -> bytes:
        """Bytes for one scheme's slot in the store (see ``encode_entries``)."""
        delay = "" if self.delay is None else repr(self.delay)
        # Canonical URLs hold no space or newline (hive.core.urls percent-encodes them).
        head = f"{self.agent}\n{delay}\n{' '.join(self.sitemaps)}\n".encode()
        rules = b"" if self.compiled is None else self.compiled.encode()
        return head + rules

    @classmethod
    def decode(cls, kind: int, expires: float, stale_until: float, data: bytes) -> RobotsRules:
        """Rules from ``encode`` output; StoreError if corrupt."""
        if kind >= len(_KINDS):
            raise StoreError(f"robots entry of unknown kind {kind}")
        try:
            agent, delay_text, named, rest = data.split(b"\n", 3) if data.count(b"\n") >= 3 else (
                data, b"", b"", b"")
            delay = float(delay_text) if delay_text else None
            name = _KINDS[kind]
            compiled = AgentRules.decode(rest) if name == "parsed" else None
            sitemaps = tuple(named.decode().split(" ")) if named else ()
            return cls(name, agent.decode(), expires, stale_until, compiled, delay, sitemaps)
        except (UnicodeDecodeError, ValueError) as exc:
            raise StoreError(f"robots entry is corrupt: {exc}") from exc


def origin(url: str) -> tuple[str, str]:
    """(scheme, host key) of a canonical URL: ``http://a.test:81/x`` -> (http, a.test:81)."""
    scheme, _, rest = url.partition("://")
    return scheme, rest.partition("/")[0]


def encode_slot(scheme: str, rules: RobotsRules) -> bytes:
    """One scheme's slot of a host key's store value."""
    data = rules.encode()
    head = _ENTRY.pack(SCHEMES.index(scheme), _KINDS.index(rules.kind), rules.expires,
                       rules.stale_until, len(data))
    return head + data


def split_slots(data: bytes) -> dict[str, bytes]:
    """A host key's store value as its slots, undecoded; StoreError if corrupt.

    A value of an older format (1: one entry per host, before robots.txt was kept
    per origin; 2: before the Sitemap: lines were kept) holds no slots: its
    origins fetch robots.txt again.
    """
    if not data:
        raise StoreError("robots entry is empty")
    if data[0] != _FORMAT_VERSION:
        if data[0] in (1, 2):
            return {}
        raise StoreError(f"robots entry of unknown version {data[0]}")
    slots: dict[str, bytes] = {}
    pos = 1
    while pos < len(data):
        if len(data) - pos < _ENTRY.size:
            raise StoreError("robots entry is cut short")
        scheme, _, _, _, size = _ENTRY.unpack_from(data, pos)
        end = pos + _ENTRY.size + size
        if scheme >= len(SCHEMES) or end > len(data):
            raise StoreError("robots entry is corrupt")
        slots[SCHEMES[scheme]] = data[pos:end]
        pos = end
    return slots


def decode_slot(slot: bytes) -> RobotsRules:
    _, kind, expires, stale_until, _ = _ENTRY.unpack_from(slot)
    return RobotsRules.decode(kind, expires, stale_until, slot[_ENTRY.size :])


def join_slots(slots: Iterable[bytes]) -> bytes:
    return bytes([_FORMAT_VERSION]) + b"".join(slots)


def encode_entries(entries: dict[str, RobotsRules]) -> bytes:
    """One host key's store value: a version byte, then a slot per scheme."""
    return join_slots(encode_slot(scheme, rules) for scheme, rules in entries.items())


def decode_entries(data: bytes) -> dict[str, RobotsRules]:
    """``encode_entries`` undone; StoreError if corrupt."""
    return {scheme: decode_slot(slot) for scheme, slot in split_slots(data).items()}


@dataclass(frozen=True, slots=True)
class RobotsDecision:
    """What one robots.txt fetch settles: rules to use, and maybe when to try again.

    ``retry_at`` is set for a transient failure: ``rules`` then disallow all
    (or, ``stale``, are the expired copy) until that time, when the caller
    fetches robots.txt again.
    """

    rules: RobotsRules
    retry_at: float | None = None
    stale: bool = False

    @property
    def final(self) -> bool:
        return self.retry_at is None

    @property
    def unreachable(self) -> bool:
        return self.rules.kind == "unreachable"


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """The RFC 9309 status policy of the module docstring, with its config values."""

    agent: str
    cache_ttl: float
    max_bytes: int
    max_redirects: int
    tries: int
    retry_delay: float
    unreachable_retry: float = 3600.0
    max_stale: float = 86400.0

    @classmethod
    def from_config(cls, cfg: Config) -> RobotsPolicy:
        return cls(
            agent=product_token(cfg.fetch.user_agent),
            cache_ttl=cfg.robots.cache_ttl,
            max_bytes=cfg.robots.max_bytes,
            max_redirects=cfg.robots.max_redirects,
            tries=cfg.robots.tries,
            retry_delay=cfg.robots.retry_delay,
            unreachable_retry=cfg.robots.unreachable_retry,
            max_stale=cfg.robots.max_stale,
        )

    def from_fetch(
        self, status: int | None, body: bytes, now: float, attempt: int,
        retry_after: float | None = None, stale: RobotsRules | None = None,
        sitemaps: tuple[str, ...] = (),
    ) -> RobotsDecision:
        """The decision for try number ``attempt`` (from 1) that got ``status``.

        ``status`` is None when no whole response came (timeout, refused, reset,
        DNS, a body cut or undecodable). ``retry_after``: the answer's
        Retry-After, in seconds from ``now``, if any. ``stale``: the expired
        rules of this origin, if the caller still has them. ``sitemaps``: what the
        body's ``Sitemap:`` lines name, kept with rules parsed from it.
        """
        if attempt < 1:
            raise ValueError(f"attempt counts from 1, got {attempt}")
        expires = now + self.cache_ttl
        keep = expires + self.max_stale
        if status is not None and 200 <= status < 300:
            body = _clip(body, self.max_bytes)
            return RobotsDecision(RobotsRules.parse(body, self.agent, expires, keep, sitemaps))
        if status is not None and 300 <= status < 500 and status != 429:
            return RobotsDecision(RobotsRules("allow_all", self.agent, expires, keep))
        if attempt >= self.tries:
            wait = self.unreachable_retry
        else:
            wait = min(max(self.retry_delay * 2 ** (attempt - 1), retry_after or 0.0),
                       self.cache_ttl)
        if stale is not None and stale.usable_stale(now):
            retry_at = min(now + wait, stale.stale_until)
            return RobotsDecision(stale.restamped(retry_at), retry_at, stale=True)
        if attempt >= self.tries:
            return RobotsDecision(RobotsRules("unreachable", self.agent, now + wait))
        return RobotsDecision(RobotsRules("disallow_all", self.agent, now + wait), now + wait)

    def next_hop(self, url: str, location: str | None, hops: int) -> str | None:
        """Where a robots.txt redirect leads, or None to stop and hand the 3xx over.

        ``hops`` counts the redirects already followed; the target must be http(s).
        Whether a hop to another host is taken is the caller's (it is not).
        """
        if hops >= self.max_redirects or not location or not location.strip():
            return None
        try:
            target = urljoin(url, location.strip())
            scheme = urlsplit(target).scheme
        except ValueError:
            return None
        return target if scheme in ("http", "https") else None


class RobotsCache:
    """A thread-safe LRU of rules by origin, bounded by bytes, over a persistent store.

    ``hits`` are answers from memory, ``loads`` from the store, ``misses`` when
    neither holds unexpired rules (the caller then fetches robots.txt);
    ``corrupt`` counts stored entries that could not be decoded (read as
    misses). The store is keyed by host key and holds every scheme's entry.
    Expired rules stay until evicted, for ``stale``. An entry larger than the
    whole bound is kept alone.
    """

    def __init__(
        self,
        max_bytes: int,
        agent: str,
        load: Callable[[str], bytes | None] | None = None,
        store: Callable[[str, bytes], None] | None = None,
    ) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self._max_bytes = max_bytes
        self._agent = agent
        self._load = load
        self._store = store
        self._entries: OrderedDict[tuple[str, str], RobotsRules] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = self._loads = self._misses = self._evictions = self._corrupt = 0

    def get(self, url: str, now: float) -> RobotsRules | None:
        """Unexpired rules for the origin of ``url``, or None when robots.txt must be fetched."""
        key = origin(url)
        with self._lock:
            rules = self._entries.get(key)
            if rules is not None and not rules.expired(now):
                self._entries.move_to_end(key)
                self._hits += 1
                return rules
        stored = self._read(key) if rules is None else None
        with self._lock:
            if stored is not None and not stored.expired(now):
                self._loads += 1
                self._insert(key, stored)
                return stored
            self._misses += 1
            return None

    def stale(self, url: str, now: float) -> RobotsRules | None:
        """The expired rules of ``url``'s origin, if they may still stand in (section 2.4)."""
        key = origin(url)
        with self._lock:
            rules = self._entries.get(key)
        if rules is None:
            rules = self._read(key)
        return rules if rules is not None and rules.usable_stale(now) else None

    def _slots(self, host_key: str) -> dict[str, bytes]:
        data = None if self._load is None else self._load(host_key)
        if data is None:
            return {}
        try:
            return split_slots(data)
        except StoreError:
            with self._lock:
                self._corrupt += 1
            return {}

    def _read(self, key: tuple[str, str]) -> RobotsRules | None:
        """The stored rules of one origin: only its own slot is decoded."""
        slot = self._slots(key[1]).get(key[0])
        if slot is None:
            return None
        try:
            rules = decode_slot(slot)
        except StoreError:
            with self._lock:
                self._corrupt += 1
            return None
        return rules if rules.agent == self._agent else None

    def put(self, url: str, rules: RobotsRules) -> None:
        """Keep ``rules`` for ``url``'s origin in memory and hand them to the store."""
        scheme, host = key = origin(url)
        if scheme not in SCHEMES:
            raise ValueError(f"robots.txt rules for an origin that is not http(s): {url!r}")
        with self._lock:
            self._insert(key, rules)
        if self._store is not None:
            slots = self._slots(host)
            slots[scheme] = encode_slot(scheme, rules)
            self._store(host, join_slots(slots.values()))

    def _insert(self, key: tuple[str, str], rules: RobotsRules) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        self._entries[key] = rules
        self._bytes += rules.size
        while self._bytes > self._max_bytes and len(self._entries) > 1:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.size
            self._evictions += 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "robots/hits": self._hits,
                "robots/loads": self._loads,
                "robots/misses": self._misses,
                "robots/evictions": self._evictions,
                "robots/corrupt": self._corrupt,
                "robots/entries": len(self._entries),
                "robots/bytes": self._bytes,
            }
