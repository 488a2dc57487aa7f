"""Name resolution for fetches: the DNS cache, its resolvers, and the address guard.

This module owns turning a host name into addresses and judging whether an
address may be contacted. Its policy:

- **Cache.** ``DnsCache.lookup(host, now)`` never raises for a DNS failure; it
  returns a :class:`Resolution`. Answers are cached for their TTL clamped to
  ``[min_ttl, max_ttl]`` (``default_ttl``, clamped too, when the resolver gives
  none); failures (``nxdomain``, ``timeout``, ``no_address``, ``error``) are
  cached for ``negative_ttl``. At most ``max_entries`` names are kept; the least
  recently used is evicted. ``hits`` counts answers served from the cache
  (negative ones included), ``misses`` resolver calls, ``failures`` resolver
  calls that failed, ``evictions`` names pushed out by the bound. IP literals
  (``127.0.0.1``, ``[::1]``, ``::1``) and overrides are answered without a
  lookup, never expire and are not counted.
- **Overrides** work like curl's ``--resolve``: ``HOST=IP[,IP...]``. A wildcard
  ``*.example.test=IP`` matches every name below ``example.test`` at any depth
  but not ``example.test`` itself (add ``example.test=IP`` for that, as with TLS
  certificates); an exact entry beats a wildcard, and a longer wildcard beats a
  shorter one.
- **Threads.** Fetch threads share one cache: a lock guards the table, never a
  resolver call. Two threads missing the same name at once may both resolve it
  (rare: a host has one fetch in flight at a time); the later answer is kept.
- **Resolvers.** ``from_config`` reads ``/etc/hosts`` once (its names get
  ``default_ttl``), then asks dnspython with the nameservers of
  ``/etc/resolv.conf``: A then AAAA within one ``timeout``, IPv4 addresses
  first, the TTL being the smallest along the CNAME chain. An AAAA query that
  fails after A succeeded only loses the IPv6 addresses. When dnspython has no
  nameservers to ask (no ``/etc/resolv.conf`` or none listed in it), it falls
  back to ``socket.getaddrinfo`` (the system's own order, ``default_ttl``, and
  no enforceable timeout) and logs a warning.
- **Order.** ``happy_eyeballs`` orders a host's addresses for connecting: IPv6
  and IPv4 in turn from the family of the first (RFC 8305's interleaving); the
  pipeline tries the next when a connection fails (hive.fetch.client:
  ``fetch.connect_attempts``), one after another rather than raced.
- **Address guard.** ``AddressGuard.check(address)`` judges addresses, never
  names: every address that is not globally reachable per the IANA
  special-purpose registries is refused unless ``allow_private`` is set or it
  lies in one of ``allow_nets``. IPv4 carried in IPv6 (IPv4-mapped,
  IPv4-compatible, 6to4, NAT64, Teredo) is unwrapped and judged as IPv4. Whole
  blocks are refused where the registries carve out a few anycast services
  (192.0.0.0/24, 2001::/23): no web site lives there.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hive.config import DnsConfig
from hive.errors import HiveError
from hive.netspec import IPAddress, ip_literal, networks, normalize_host, parse_override

if TYPE_CHECKING:
    import dns.resolver

log = logging.getLogger(__name__)

FailureKind = Literal["nxdomain", "timeout", "no_address", "error"]

Resolver = Callable[[str, float], tuple[list[str], float | None]]
Addresses = tuple[str, ...]
"""A host's addresses to connect to, in the order to try them (IP literals)."""
"""``resolver(host, timeout) -> (addresses, ttl or None)``; raises :class:`DnsFailure`."""

HOSTS_FILE = Path("/etc/hosts")
# Addresses whose guard verdict is remembered; the memory is cleared when full.
GUARD_CACHE = 4096


def happy_eyeballs(addresses: Sequence[str]) -> list[str]:
    """The order to try a host's addresses in: IPv6 and IPv4 taking turns, from the family
    of the first (RFC 8305 section 4's interleaving, each family in its answer's order).
    The first family is the answer's own: the dnspython resolver puts IPv4 first and
    getaddrinfo gives the system's RFC 6724 order, which puts IPv6 first only where the
    machine can reach it; the pipeline tries them one after another, not raced."""
    if not addresses:
        return []
    first_v6 = ":" in addresses[0]
    same = [a for a in addresses if (":" in a) == first_v6]
    other = [a for a in addresses if (":" in a) != first_v6]
    order = [a for pair in zip(same, other, strict=False) for a in pair]
    k = min(len(same), len(other))
    return order + same[k:] + other[k:]


class DnsFailure(HiveError):
    """A lookup failed; ``kind`` is one of nxdomain, timeout, no_address, error."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        self.kind: FailureKind = kind
        self.message = message
        super().__init__(f"{kind}: {message}")


@dataclass(frozen=True, slots=True)
class Resolution:
    """The answer for one host: addresses until ``expires``, or a failure."""

    host: str
    addresses: tuple[str, ...] = ()
    expires: float = math.inf
    error: FailureKind | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


class DnsCache:
    """A bounded, thread-safe LRU of resolutions over an injected resolver."""

    def __init__(
        self,
        resolver: Resolver,
        *,
        min_ttl: float,
        max_ttl: float,
        default_ttl: float,
        negative_ttl: float,
        max_entries: int,
        overrides: list[str],
        timeout: float,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._resolver = resolver
        self._min_ttl = min_ttl
        self._max_ttl = max_ttl
        self._default_ttl = default_ttl
        self._negative_ttl = negative_ttl
        self._max_entries = max_entries
        self._timeout = timeout
        self._exact: dict[str, tuple[str, ...]] = {}
        self._wildcard: dict[str, tuple[str, ...]] = {}
        for entry in overrides:
            name, addresses = parse_override(entry)
            if name.startswith("*."):
                self._wildcard[name[2:]] = addresses
            else:
                self._exact[name] = addresses
        self._entries: OrderedDict[str, Resolution] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._failures = self._evictions = 0

    @classmethod
    def from_config(cls, cfg: DnsConfig, resolver: Resolver | None = None) -> DnsCache:
        """The cache the config asks for, over the system resolver unless one is given."""
        return cls(
            resolver if resolver is not None else on_first_query(system_resolver),
            min_ttl=cfg.min_ttl,
            max_ttl=cfg.max_ttl,
            default_ttl=cfg.default_ttl,
            negative_ttl=cfg.negative_ttl,
            max_entries=cfg.cache_size,
            overrides=cfg.resolve,
            timeout=cfg.timeout,
        )

    def _override(self, host: str) -> tuple[str, ...] | None:
        if host in self._exact:
            return self._exact[host]
        dot = host.find(".")
        while dot != -1:
            suffix = host[dot + 1 :]
            if suffix in self._wildcard:
                return self._wildcard[suffix]
            dot = host.find(".", dot + 1)
        return None

    def lookup(self, host: str, now: float) -> Resolution:
        """Addresses for ``host`` (or why there are none) as of ``now``."""
        name = normalize_host(host)
        known = self._without_resolver(name)
        if known is not None:
            return known
        if not name:
            return Resolution(name, expires=now, error="error", message="empty host name")
        with self._lock:
            cached = self._entries.get(name)
            if cached is not None and now < cached.expires:
                self._entries.move_to_end(name)
                self._hits += 1
                return cached
            self._misses += 1
        result = self._resolve(name, now)
        with self._lock:
            if result.error is not None:
                self._failures += 1
            self._entries[name] = result
            self._entries.move_to_end(name)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
                self._evictions += 1
        return result

    def cached(self, host: str, now: float) -> Resolution | None:
        """The answer ``lookup`` would give without asking the resolver, or None if only
        the resolver knows (for a thread that must not wait on DNS)."""
        name = normalize_host(host)
        known = self._without_resolver(name)
        if known is not None:
            return known
        with self._lock:
            cached = self._entries.get(name)
        return cached if cached is not None and now < cached.expires else None

    def _without_resolver(self, name: str) -> Resolution | None:
        """The answer for an IP literal or a ``--resolve`` entry, which no cache holds."""
        literal = ip_literal(name)
        if literal is not None:
            return Resolution(name, (str(literal),))
        fixed = self._override(name)
        return Resolution(name, fixed) if fixed is not None else None

    def _resolve(self, name: str, now: float) -> Resolution:
        try:
            addresses, ttl = self._resolver(name, self._timeout)
        except DnsFailure as exc:
            return Resolution(name, expires=now + self._negative_ttl, error=exc.kind,
                              message=exc.message)
        if not addresses:
            return Resolution(name, expires=now + self._negative_ttl, error="no_address",
                              message=f"{name} has no address")
        raw = self._default_ttl if ttl is None else ttl
        clamped = min(max(raw, self._min_ttl), self._max_ttl)
        return Resolution(name, tuple(addresses), expires=now + clamped)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "dns/hits": self._hits,
                "dns/misses": self._misses,
                "dns/failures": self._failures,
                "dns/evictions": self._evictions,
                "dns/entries": len(self._entries),
            }


def dnspython_resolver(resolver: dns.resolver.Resolver) -> Resolver:
    """A :data:`Resolver` asking ``resolver``: A, then AAAA in what is left of the timeout."""
    import dns.exception
    import dns.name
    import dns.rdatatype
    import dns.resolver

    def query(host: str, timeout: float) -> tuple[list[str], float | None]:
        try:
            qname = dns.name.from_text(host)
        except dns.exception.DNSException as exc:
            raise DnsFailure("error", f"{host}: not a valid name ({exc})") from exc
        deadline = time.monotonic() + timeout
        addresses: list[str] = []
        ttls: list[int] = []
        for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            left = max(deadline - time.monotonic(), 0.001)
            try:
                answer = resolver.resolve(qname, rdtype, raise_on_no_answer=False, lifetime=left)
            except dns.exception.DNSException as exc:
                if addresses:
                    break
                if isinstance(exc, dns.resolver.NXDOMAIN):
                    raise DnsFailure("nxdomain", f"{host} does not exist") from exc
                kind: FailureKind = "timeout" if isinstance(exc, dns.exception.Timeout) else "error"
                raise DnsFailure(kind, f"{host}: {exc}") from exc
            if answer.rrset is not None:
                addresses.extend(rdata.address for rdata in answer.rrset)
                ttls.append(answer.chaining_result.minimum_ttl)
        if not addresses:
            raise DnsFailure("no_address", f"{host} has no A or AAAA record")
        return addresses, float(min(ttls))

    return query


def getaddrinfo_resolver(host: str, timeout: float) -> tuple[list[str], float | None]:
    """A :data:`Resolver` over ``socket.getaddrinfo``; it cannot honour ``timeout``."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_NONAME:
            raise DnsFailure("nxdomain", f"{host} does not exist") from exc
        if exc.errno == socket.EAI_AGAIN:
            raise DnsFailure("timeout", f"{host}: {exc.strerror}") from exc
        raise DnsFailure("error", f"{host}: {exc.strerror}") from exc
    except (OSError, UnicodeError) as exc:
        raise DnsFailure("error", f"{host}: {exc}") from exc
    v4 = [str(info[4][0]) for info in infos if info[0] == socket.AF_INET]
    v6 = [str(info[4][0]) for info in infos if info[0] == socket.AF_INET6]
    return list(dict.fromkeys(v4 + v6)), None


def read_hosts(path: Path) -> dict[str, list[str]]:
    """Names and addresses of a hosts(5) file; an unreadable file is empty."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    table: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.partition("#")[0].split()
        if len(fields) < 2 or ip_literal(fields[0]) is None:
            continue
        for name in fields[1:]:
            addresses = table.setdefault(normalize_host(name), [])
            if fields[0] not in addresses:
                addresses.append(fields[0])
    return table


def with_hosts(hosts: Mapping[str, list[str]], resolver: Resolver) -> Resolver:
    """A :data:`Resolver` answering names of ``hosts`` itself and asking ``resolver`` for others."""

    def query(host: str, timeout: float) -> tuple[list[str], float | None]:
        found = hosts.get(host)
        if found:
            return list(found), None
        return resolver(host, timeout)

    return query


def on_first_query(make: Callable[[], Resolver]) -> Resolver:
    """A :data:`Resolver` that has ``make`` build the real one at its first query, once.

    Overrides and IP literals never reach a resolver, so a crawl whose names all
    come from ``--resolve`` never imports dnspython nor reads ``/etc/resolv.conf``
    (a tenth of a CPU-second a worker).
    """
    made: list[Resolver] = []
    lock = threading.Lock()

    def query(host: str, timeout: float) -> tuple[list[str], float | None]:
        if not made:
            with lock:
                if not made:
                    made.append(make())
        return made[0](host, timeout)

    return query


def system_resolver() -> Resolver:
    """/etc/hosts, then dnspython over /etc/resolv.conf; getaddrinfo if dnspython cannot work."""
    import dns.resolver

    try:
        configured = dns.resolver.Resolver(configure=True)
    except dns.resolver.NoResolverConfiguration as exc:
        log.warning("dnspython cannot resolve (%s); falling back to getaddrinfo", exc)
        return getaddrinfo_resolver
    return with_hosts(read_hosts(HOSTS_FILE), dnspython_resolver(configured))


def _nets(*specs: tuple[str, str]) -> tuple[tuple[IPv4Network | IPv6Network, str], ...]:
    return tuple((ipaddress.ip_network(net), what) for net, what in specs)


# First match names the reason, so a block inside another comes before it.
_SPECIAL = _nets(
    ("0.0.0.0/8", "in 0.0.0.0/8 ('this network')"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "an IETF protocol assignment"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),
    ("100::/64", "discard-only"),
    ("100:0:0:1::/64", "a dummy prefix"),
    ("2001:2::/48", "benchmarking"),
    ("2001::/23", "an IETF protocol assignment"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
)
_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")
_NAT64 = IPv6Network("64:ff9b::/96")


def _special(address: IPAddress) -> str | None:
    for net, what in _SPECIAL:
        if address in net:
            return what
    if isinstance(address, IPv6Address) and address not in _GLOBAL_UNICAST_V6:
        return "reserved"
    return None


def _carried_v4(address: IPv6Address) -> tuple[IPv4Address, str] | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if address.teredo is not None:
        return address.teredo[1], "Teredo"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    if 1 < int(address) <= 0xFFFFFFFF:
        return IPv4Address(int(address)), "IPv4-compatible"
    return None


class AddressGuard:
    """Refuses non-global addresses unless allowed; see the module docstring."""

    def __init__(
        self, allow_private: bool, allow_nets: list[str], proxy_nets: list[str] | None = None
    ) -> None:
        self._allow_private = allow_private
        self._verdicts: dict[str, str | None] = {}
        self._allow_nets = networks("dns.allow_nets", allow_nets)
        self._proxy_nets = networks("fetch.proxy_allow_nets", proxy_nets or [])

    @classmethod
    def from_config(cls, cfg: DnsConfig, proxy_nets: list[str] | None = None) -> AddressGuard:
        return cls(cfg.allow_private, cfg.allow_nets, proxy_nets)

    def check_proxy(self, address: str) -> str | None:
        """None if the proxy at ``address`` may be used, else why not.

        A proxy is judged apart from targets: a global address, or one that
        ``allow_private`` or the proxy's own networks allow; ``allow_nets``, which
        allows targets, does not allow a proxy (nor the proxy's networks a target)."""
        ip = ip_literal(address.strip())
        if ip is None:
            return f"proxy {address!r} is not an IP address"
        if self._allow_private or any(ip in net for net in self._proxy_nets):
            return None
        carried = _carried_v4(ip) if isinstance(ip, IPv6Address) else None
        what = _special(carried[0] if carried is not None else ip)
        if what is None:
            return None
        return f"proxy {address} is {what} (allow it with fetch.proxy_allow_nets)"

    def _allowed(self, *addresses: IPAddress) -> bool:
        return any(a in net for a in addresses for net in self._allow_nets)

    def check(self, address: str) -> str | None:
        """None if ``address`` may be contacted, else why not (naming the address).

        Verdicts are remembered per address (a crawl contacts few): they never change."""
        try:
            return self._verdicts[address]
        except KeyError:
            pass
        if len(self._verdicts) >= GUARD_CACHE:
            self._verdicts.clear()
        verdict = self._verdicts[address] = self._check(address)
        return verdict

    def _check(self, address: str) -> str | None:
        text = address.strip()
        ip = ip_literal(text)
        if ip is None:
            return f"{text!r} is not an IP address"
        if self._allow_private:
            return None
        carried = _carried_v4(ip) if isinstance(ip, IPv6Address) else None
        if carried is not None:
            v4, wrapper = carried
            what = _special(v4)
            if what is None or self._allowed(ip, v4):
                return None
            return f"{text} carries {v4} ({wrapper}), which is {what}"
        what = _special(ip)
        if what is None or self._allowed(ip):
            return None
        return f"{text} is {what}"
