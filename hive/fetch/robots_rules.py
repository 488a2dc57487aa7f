"""robots.txt rules (RFC 9309): our group read from a file, compiled, and matched.

What a fetch of robots.txt means is hive.fetch.robots_policy's; where the rules
are kept, hive.fetch.robots_cache's. ``RobotsRules`` is one origin's rules for
our agent token, as the policy settles them and the cache keeps them.

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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

from protego import Protego
from protego._protego import (
    _ALLOW_DIRECTIVE,
    _CRAWL_DELAY_DIRECTIVE,
    _DISALLOW_DIRECTIVE,
    _USER_AGENT_DIRECTIVE,
    _extract_directive,
)
from protego._utils import _quote_path

from hive.errors import ConfigError, StoreError

RulesKind = Literal["allow_all", "disallow_all", "parsed", "unreachable"]
KINDS: tuple[RulesKind, ...] = get_args(RulesKind)
# Literal parts of wildcard patterns one check may test (see "Matching" above).
MAX_CHECK_WORK = 50_000

_BOM = b"\xef\xbb\xbf"
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
        if self.kind not in KINDS:
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

