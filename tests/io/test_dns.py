"""DnsCache (TTL clamp, negative entries, LRU, overrides, threads), the resolvers, AddressGuard.

Nothing here sends a packet beyond 127.0.0.1: the cache runs over an injected
resolver, and the dnspython path talks to a tiny DNS server on loopback.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dns.message
import dns.rcode
import dns.rdatatype
import dns.resolver
import dns.rrset
import pytest

from hive import config
from hive.errors import ConfigError
from hive.fetch import dns as hdns
from hive.fetch.dns import AddressGuard, DnsCache, DnsFailure

Answer = tuple[list[str], float | None]


class FakeResolver:
    """Answers from a table, counting calls; unknown names are NXDOMAIN."""

    def __init__(self, table: dict[str, Answer | DnsFailure] | None = None) -> None:
        self.table = table or {}
        self.calls: list[str] = []
        self.timeouts: set[float] = set()
        self.lock = threading.Lock()

    def __call__(self, host: str, timeout: float) -> Answer:
        with self.lock:
            self.calls.append(host)
            self.timeouts.add(timeout)
        found = self.table.get(host)
        if found is None:
            raise DnsFailure("nxdomain", f"{host} does not exist")
        if isinstance(found, DnsFailure):
            raise found
        return found


def make_cache(resolver: hdns.Resolver, max_entries: int = 100,
               overrides: list[str] | None = None) -> DnsCache:
    return DnsCache(resolver, min_ttl=60.0, max_ttl=3600.0, default_ttl=300.0,
                    negative_ttl=30.0, max_entries=max_entries, overrides=overrides or [],
                    timeout=1.0)


# --- the cache -------------------------------------------------------------

@pytest.mark.parametrize("host, address", [
    ("127.0.0.1", "127.0.0.1"),
    ("[::1]", "::1"),
    ("::1", "::1"),
    ("[2001:DB8::1]", "2001:db8::1"),
])
def test_ip_literals_resolve_to_themselves(host: str, address: str) -> None:
    resolver = FakeResolver()
    cache = make_cache(resolver)
    result = cache.lookup(host, now=0.0)
    assert result.ok and result.addresses == (address,)
    assert resolver.calls == []
    assert cache.stats()["dns/misses"] == 0


@pytest.mark.parametrize("ttl, kept", [
    (1.0, 60.0), (120.0, 120.0), (10.0**6, 3600.0), (None, 300.0),
])
def test_ttl_is_clamped(ttl: float | None, kept: float) -> None:
    cache = make_cache(FakeResolver({"a.test": (["192.0.2.1"], ttl)}))
    result = cache.lookup("a.test", now=1000.0)
    assert result.addresses == ("192.0.2.1",)
    assert result.expires == 1000.0 + kept


def test_answers_are_cached_until_they_expire() -> None:
    resolver = FakeResolver({"a.test": (["192.0.2.1"], 100.0)})
    cache = make_cache(resolver)
    cache.lookup("a.test", now=0.0)
    cache.lookup("A.Test.", now=99.9)
    assert resolver.calls == ["a.test"]
    cache.lookup("a.test", now=100.0)
    assert resolver.calls == ["a.test", "a.test"]
    assert cache.stats() == {"dns/hits": 1, "dns/misses": 2, "dns/failures": 0,
                             "dns/evictions": 0, "dns/entries": 1}


@pytest.mark.parametrize("kind", ["nxdomain", "timeout", "no_address", "error"])
def test_failures_are_returned_and_cached_for_negative_ttl(kind: hdns.FailureKind) -> None:
    resolver = FakeResolver({"bad.test": DnsFailure(kind, "it went wrong")})
    cache = make_cache(resolver)
    first = cache.lookup("bad.test", now=0.0)
    assert not first.ok and first.error == kind and first.message == "it went wrong"
    assert first.addresses == () and first.expires == 30.0
    assert cache.lookup("bad.test", now=29.0) is first
    assert len(resolver.calls) == 1
    cache.lookup("bad.test", now=30.0)
    assert len(resolver.calls) == 2
    stats = cache.stats()
    assert (stats["dns/failures"], stats["dns/hits"], stats["dns/misses"]) == (2, 1, 2)


def test_an_empty_answer_is_no_address() -> None:
    cache = make_cache(FakeResolver({"void.test": ([], 100.0)}))
    result = cache.lookup("void.test", now=0.0)
    assert result.error == "no_address"


def test_an_empty_name_is_an_error_without_a_lookup() -> None:
    resolver = FakeResolver()
    result = make_cache(resolver).lookup("", now=5.0)
    assert result.error == "error" and resolver.calls == []


def test_least_recently_used_is_evicted() -> None:
    resolver = FakeResolver({h: (["192.0.2.1"], 100.0) for h in ("a.test", "b.test", "c.test")})
    cache = make_cache(resolver, max_entries=2)
    cache.lookup("a.test", now=0.0)
    cache.lookup("b.test", now=0.0)
    cache.lookup("a.test", now=1.0)
    cache.lookup("c.test", now=2.0)
    assert cache.stats()["dns/evictions"] == 1
    assert cache.stats()["dns/entries"] == 2
    cache.lookup("a.test", now=3.0)
    assert resolver.calls == ["a.test", "b.test", "c.test"]
    cache.lookup("b.test", now=3.0)
    assert resolver.calls[-1] == "b.test"
    assert cache.stats()["dns/evictions"] == 2


def test_negative_entries_count_against_the_bound() -> None:
    cache = make_cache(FakeResolver(), max_entries=3)
    for i in range(10):
        cache.lookup(f"nx{i}.test", now=0.0)
    assert cache.stats()["dns/entries"] == 3
    assert cache.stats()["dns/evictions"] == 7


# --- overrides -------------------------------------------------------------

OVERRIDES = [
    "exact.example.test=192.0.2.10",
    "*.example.test=127.0.0.1",
    "*.deep.example.test=127.0.0.2",
    "Multi.Test.=192.0.2.1, [2001:db8::5]",
]


@pytest.mark.parametrize("host, addresses", [
    ("exact.example.test", ("192.0.2.10",)),
    ("www.example.test", ("127.0.0.1",)),
    ("a.b.c.example.test", ("127.0.0.1",)),
    ("x.deep.example.test", ("127.0.0.2",)),
    ("deep.example.test", ("127.0.0.1",)),
    ("sub.exact.example.test", ("127.0.0.1",)),
    ("WWW.Example.Test.", ("127.0.0.1",)),
    ("multi.test", ("192.0.2.1", "2001:db8::5")),
])
def test_overrides_answer_without_a_lookup(host: str, addresses: tuple[str, ...]) -> None:
    resolver = FakeResolver()
    cache = make_cache(resolver, overrides=OVERRIDES)
    result = cache.lookup(host, now=0.0)
    assert result.addresses == addresses
    assert result.expires == float("inf")
    assert cache.lookup(host, now=1e12) == result
    assert resolver.calls == []
    assert cache.stats()["dns/hits"] == cache.stats()["dns/misses"] == 0


def test_a_wildcard_does_not_match_the_bare_domain() -> None:
    resolver = FakeResolver({"example.test": (["192.0.2.99"], 100.0)})
    cache = make_cache(resolver, overrides=OVERRIDES)
    assert cache.lookup("example.test", now=0.0).addresses == ("192.0.2.99",)
    assert cache.lookup("notexample.test", now=0.0).error == "nxdomain"
    assert resolver.calls == ["example.test", "notexample.test"]


@pytest.mark.parametrize("entry", [
    "no-equals-sign",
    "=192.0.2.1",
    "host.test=",
    "host.test=not-an-ip",
    "host.test=192.0.2.1,",
    "host.test=999.1.1.1",
    "*.=192.0.2.1",
    "*=192.0.2.1",
    "a*.test=192.0.2.1",
    "a..test=192.0.2.1",
    "ex ample.test=192.0.2.1",
    "bücher.test=192.0.2.1",
    "192.0.2.7=192.0.2.1",
])
def test_bad_overrides_name_the_entry(entry: str) -> None:
    with pytest.raises(ConfigError, match="dns.resolve") as info:
        make_cache(FakeResolver(), overrides=[entry])
    assert repr(entry) in str(info.value)


# --- threads ---------------------------------------------------------------

def test_concurrent_lookups_stay_consistent() -> None:
    hosts = [f"h{i}.test" for i in range(20)]
    resolver = FakeResolver({h: ([f"192.0.2.{i}"], 100.0) for i, h in enumerate(hosts)})
    cache = make_cache(resolver, max_entries=8)
    errors: list[str] = []

    def work(seed: int) -> None:
        for n in range(300):
            i = (seed * 7 + n * 13) % len(hosts)
            got = cache.lookup(hosts[i], now=float(n % 50))
            if got.addresses != (f"192.0.2.{i}",):
                errors.append(f"{hosts[i]} -> {got}")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = cache.stats()
    assert errors == []
    assert stats["dns/hits"] + stats["dns/misses"] == 8 * 300
    assert stats["dns/misses"] == len(resolver.calls)
    assert stats["dns/entries"] <= 8


def test_the_lock_is_not_held_during_a_resolver_call() -> None:
    fast_done = threading.Event()

    def resolver(host: str, timeout: float) -> Answer:
        if host == "slow.test":
            assert fast_done.wait(5.0), "a slow lookup blocked another thread"
        return ["192.0.2.1"], 100.0

    cache = make_cache(resolver)
    slow = threading.Thread(target=cache.lookup, args=("slow.test", 0.0))
    slow.start()
    assert cache.lookup("fast.test", now=0.0).ok
    fast_done.set()
    slow.join()
    assert cache.stats()["dns/entries"] == 2


def test_from_config_reads_the_dns_section() -> None:
    cfg = config.load(environ={}).replace(
        dns={"resolve": ["*.site.test=127.0.0.1"], "cache_size": 1, "min_ttl": 1.0}
    ).dns
    resolver = FakeResolver({"a.test": (["192.0.2.1"], 5.0), "b.test": (["192.0.2.2"], 5.0)})
    cache = DnsCache.from_config(cfg, resolver=resolver)
    assert cache.lookup("x.site.test", now=0.0).addresses == ("127.0.0.1",)
    assert cache.lookup("a.test", now=0.0).expires == 5.0
    cache.lookup("b.test", now=0.0)
    assert cache.stats()["dns/evictions"] == 1
    assert resolver.timeouts == {cfg.timeout}


# --- resolvers -------------------------------------------------------------

ZONE: dict[tuple[str, int], list[dns.rrset.RRset]] = {
    ("www.example.test.", dns.rdatatype.A): [
        dns.rrset.from_text("www.example.test.", 30, "IN", "A", "192.0.2.1", "192.0.2.2")],
    ("www.example.test.", dns.rdatatype.AAAA): [
        dns.rrset.from_text("www.example.test.", 20, "IN", "AAAA", "2001:db8::1")],
    ("alias.example.test.", dns.rdatatype.A): [
        dns.rrset.from_text("alias.example.test.", 7, "IN", "CNAME", "www.example.test."),
        dns.rrset.from_text("www.example.test.", 30, "IN", "A", "192.0.2.1")],
    ("v6only.example.test.", dns.rdatatype.AAAA): [
        dns.rrset.from_text("v6only.example.test.", 40, "IN", "AAAA", "2001:db8::6")],
    ("nosix.example.test.", dns.rdatatype.A): [
        dns.rrset.from_text("nosix.example.test.", 50, "IN", "A", "192.0.2.9")],
}
EXISTING = {name for name, _ in ZONE} | {"empty.example.test."}


@pytest.fixture
def dns_server() -> Iterator[int]:
    """A UDP DNS server on 127.0.0.1 answering from ZONE; 'slow.' names get no reply."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.05)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(data)
            question = query.question[0]
            name = question.name.to_text()
            if name.startswith("slow.") or (name.startswith("nosix.")
                                            and question.rdtype == dns.rdatatype.AAAA):
                continue
            response = dns.message.make_response(query)
            if name.startswith("servfail."):
                response.set_rcode(dns.rcode.SERVFAIL)
            elif name not in EXISTING:
                response.set_rcode(dns.rcode.NXDOMAIN)
            response.answer.extend(ZONE.get((name, question.rdtype), []))
            sock.sendto(response.to_wire(), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join()
    sock.close()


@pytest.fixture
def local_resolver(dns_server: int) -> hdns.Resolver:
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = dns_server
    return hdns.dnspython_resolver(resolver)


@pytest.mark.parametrize("host, addresses, ttl", [
    ("www.example.test", ["192.0.2.1", "192.0.2.2", "2001:db8::1"], 20.0),
    ("alias.example.test", ["192.0.2.1"], 7.0),
    ("v6only.example.test", ["2001:db8::6"], 40.0),
])
def test_dnspython_resolver_reads_addresses_and_ttl(
    local_resolver: hdns.Resolver, host: str, addresses: list[str], ttl: float
) -> None:
    got, got_ttl = local_resolver(host, 2.0)
    assert sorted(got) == sorted(addresses)
    assert [":" in a for a in got] == sorted(":" in a for a in got), "IPv4 first"
    assert got_ttl == ttl


@pytest.mark.parametrize("host, kind", [
    ("missing.example.test", "nxdomain"),
    ("empty.example.test", "no_address"),
    ("servfail.example.test", "error"),
    ("slow.example.test", "timeout"),
    ("a..b", "error"),
])
def test_dnspython_resolver_failures(local_resolver: hdns.Resolver, host: str, kind: str) -> None:
    with pytest.raises(DnsFailure) as info:
        local_resolver(host, 0.3)
    assert info.value.kind == kind


def test_a_failed_aaaa_query_keeps_the_ipv4_answer(local_resolver: hdns.Resolver) -> None:
    started = time.monotonic()
    assert local_resolver("nosix.example.test", 0.3) == (["192.0.2.9"], 50.0)
    assert time.monotonic() - started < 1.0


def test_cache_over_the_dnspython_resolver(local_resolver: hdns.Resolver) -> None:
    cache = make_cache(local_resolver)
    first = cache.lookup("www.example.test", now=0.0)
    assert first.addresses[-1] == "2001:db8::1" and first.expires == 60.0
    assert cache.lookup("missing.example.test", now=0.0).error == "nxdomain"


def test_getaddrinfo_resolver_on_a_literal() -> None:
    assert hdns.getaddrinfo_resolver("127.0.0.1", 1.0) == (["127.0.0.1"], None)


def test_hosts_file_answers_before_dns(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# comment\n127.0.0.1 localhost Box.Local.  # trailing\n"
                     "::1 localhost\nnot-an-ip somename\n127.0.0.2\n")
    table = hdns.read_hosts(hosts)
    assert table == {"localhost": ["127.0.0.1", "::1"], "box.local": ["127.0.0.1"]}
    fallback = FakeResolver({"other.test": (["192.0.2.1"], 9.0)})
    resolver = hdns.with_hosts(table, fallback)
    assert resolver("box.local", 1.0) == (["127.0.0.1"], None)
    assert resolver("other.test", 1.0) == (["192.0.2.1"], 9.0)
    assert fallback.calls == ["other.test"]
    assert hdns.read_hosts(tmp_path / "absent") == {}


def test_system_resolver_uses_the_hosts_file(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.9 pinned.test\n")
    monkeypatch.setattr(hdns, "HOSTS_FILE", hosts)

    class Configured(dns.resolver.Resolver):
        def __init__(self, configure: bool = True) -> None:
            super().__init__(configure=False)
            self.nameservers = ["127.0.0.1"]

    monkeypatch.setattr(dns.resolver, "Resolver", Configured)
    assert hdns.system_resolver()("pinned.test", 1.0) == (["127.0.0.9"], None)


def test_system_resolver_falls_back_to_getaddrinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    class Unconfigured:
        def __init__(self, configure: bool = True) -> None:
            raise dns.resolver.NoResolverConfiguration

    monkeypatch.setattr(dns.resolver, "Resolver", Unconfigured)
    assert hdns.system_resolver() is hdns.getaddrinfo_resolver


def test_the_system_resolver_is_made_at_the_first_query_once() -> None:
    made: list[int] = []

    def make() -> hdns.Resolver:
        made.append(1)
        time.sleep(0.05)
        return lambda host, timeout: ([f"127.0.0.{len(made)}"], None)

    resolver = hdns.on_first_query(make)
    assert made == []
    threads = [threading.Thread(target=resolver, args=("a.test", 1.0)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [1] and resolver("b.test", 1.0) == (["127.0.0.1"], None)


def test_overrides_and_literals_never_load_dnspython() -> None:
    script = """
import sys, time
from hive import config
from hive.fetch.dns import DnsCache
cfg = config.load(overrides=['dns.resolve=["pinned.test=127.0.0.9"]'], environ={})
cache = DnsCache.from_config(cfg.dns)
assert cache.lookup("pinned.test", time.time()).addresses == ("127.0.0.9",)
assert cache.lookup("127.0.0.1", time.time()).addresses == ("127.0.0.1",)
assert "dns.resolver" not in sys.modules, "dnspython loaded"
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


# --- the address guard -----------------------------------------------------

REFUSED = [
    ("0.0.0.0", "this network"),
    ("0.1.2.3", "this network"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "shared address space"),
    ("100.127.255.254", "shared address space"),
    ("192.0.0.1", "IETF protocol assignment"),
    ("192.0.0.170", "IETF protocol assignment"),
    ("192.0.2.1", "TEST-NET-1"),
    ("198.51.100.7", "TEST-NET-2"),
    ("203.0.113.200", "TEST-NET-3"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("192.88.99.1", "6to4 relay"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("[::1]", "loopback"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("2001:2::1", "benchmarking"),
    ("2001:10::1", "IETF protocol assignment"),
    ("100::1", "discard-only"),
    ("64:ff9b:1::1", "local-use IPv4/IPv6 translation"),
    ("4000::1", "reserved"),
    ("::ffff:127.0.0.1", "carries 127.0.0.1 (IPv4-mapped), which is loopback"),
    ("::ffff:10.0.0.1", "carries 10.0.0.1 (IPv4-mapped), which is private"),
    ("::127.0.0.1", "carries 127.0.0.1 (IPv4-compatible), which is loopback"),
    ("::192.168.0.1", "(IPv4-compatible), which is private"),
    ("2002:7f00:1::", "carries 127.0.0.1 (6to4), which is loopback"),
    ("2002:c0a8:101::1", "carries 192.168.1.1 (6to4), which is private"),
    ("64:ff9b::7f00:1", "carries 127.0.0.1 (NAT64), which is loopback"),
    ("64:ff9b::a9fe:a9fe", "carries 169.254.169.254 (NAT64), which is link-local"),
    # Teredo: the client's IPv4 is the last 32 bits XOR 0xffffffff.
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "carries 127.0.0.1 (Teredo), which is loopback"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "carries 10.0.0.1 (Teredo), which is private"),
]

ALLOWED = [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0",
    "172.15.255.255", "172.32.0.0", "192.0.1.255", "198.17.255.255", "223.255.255.255",
    "2606:4700::1111", "2a00:1450:4001:80b::200e", "2001:4860:4860::8888",
    "::ffff:8.8.8.8", "::8.8.8.8", "2002:808:808::1", "64:ff9b::808:808",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
]


@pytest.mark.parametrize("address, why", REFUSED)
def test_guard_refuses_non_global_addresses(address: str, why: str) -> None:
    reason = AddressGuard(allow_private=False, allow_nets=[]).check(address)
    assert reason is not None
    assert why in reason
    assert reason.startswith(address.strip())


@pytest.mark.parametrize("address", ALLOWED)
def test_guard_allows_global_addresses(address: str) -> None:
    assert AddressGuard(allow_private=False, allow_nets=[]).check(address) is None


@pytest.mark.parametrize("address", [a for a, _ in REFUSED] + ALLOWED)
def test_allow_private_allows_every_address(address: str) -> None:
    assert AddressGuard(allow_private=True, allow_nets=[]).check(address) is None


def test_guard_names_the_address_and_reason() -> None:
    guard = AddressGuard(allow_private=False, allow_nets=[])
    assert guard.check("127.0.0.1") == "127.0.0.1 is loopback"


@pytest.mark.parametrize("text", ["example.com", "localhost", "", "127.1", "0x7f.0.0.1",
                                  "1.2.3.4.5"])
def test_guard_judges_addresses_not_names(text: str) -> None:
    for allow_private in (False, True):
        reason = AddressGuard(allow_private=allow_private, allow_nets=[]).check(text)
        assert reason is not None and "not an IP address" in reason


def test_allow_nets_open_only_their_networks() -> None:
    guard = AddressGuard(allow_private=False, allow_nets=["127.0.0.2/32", "fd00::/8"])
    assert guard.check("127.0.0.2") is None
    assert guard.check("::ffff:127.0.0.2") is None
    assert guard.check("fd00::5") is None
    assert guard.check("127.0.0.1") == "127.0.0.1 is loopback"
    assert guard.check("10.0.0.1") == "10.0.0.1 is private"
    assert guard.check("fc00::1") == "fc00::1 is unique-local"
    assert guard.check("8.8.8.8") is None


@pytest.mark.parametrize("spec", ["not-a-net", "10.0.0.0/33", "::1/200"])
def test_bad_allow_nets_name_the_entry(spec: str) -> None:
    with pytest.raises(ConfigError, match="dns.allow_nets") as info:
        AddressGuard(allow_private=False, allow_nets=[spec])
    assert repr(spec) in str(info.value)


def test_guard_from_config() -> None:
    cfg = config.load(environ={}).replace(dns={"allow_nets": ["127.0.0.0/8"]}).dns
    guard = AddressGuard.from_config(cfg)
    assert guard.check("127.0.0.1") is None
    assert guard.check("192.168.0.1") is not None
