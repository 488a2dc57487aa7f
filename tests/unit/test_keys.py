"""The ring key and the politeness key (hive.core.keys): the politeness key is the host
key; the ring key is the host key or its registered domain, by the crawl's scheme."""

from __future__ import annotations

import pytest

from hive.core.keys import DOMAIN, HOST, politeness_key, registered_domain, ring_key
from hive.core.ring import Ring
from hive.core.urls import canonicalize, host_key

URLS = [
    "http://a.test/", "https://a.test/x", "http://a.test:8080/", "http://[::1]:81/",
    "http://127.0.0.1/", "http://b\u00fccher.test/", "http://sub.a.test/",
    "http://www.example.co.uk/", "http://x.blogspot.com:8080/", "http://blogspot.com/",
    "http://b\u00fccher.de/", "http://a.b.c.example.com/",
]


@pytest.mark.parametrize("url", URLS)
def test_the_politeness_key_is_the_host_key(url: str) -> None:
    key = host_key(canonicalize(url))
    assert politeness_key(key) == key == ring_key(key, HOST)


@pytest.mark.parametrize(
    ("url", "domain"),
    [
        ("http://www.example.co.uk/", "example.co.uk"),
        ("http://a.b.c.example.com:8080/", "example.com"),
        # The list's private section: a blog is a domain of its own.
        ("http://x.blogspot.com/", "x.blogspot.com"),
        ("http://y.x.blogspot.com/", "x.blogspot.com"),
        # No registered domain: the host key itself, port and all.
        ("http://blogspot.com/", "blogspot.com"),
        ("http://a.test:8080/", "a.test:8080"),
        ("http://sub.a.test/", "sub.a.test"),
        ("http://localhost:81/", "localhost:81"),
        ("http://127.0.0.1:8080/", "127.0.0.1:8080"),
        ("http://[::1]:81/", "[::1]:81"),
        ("http://b\u00fccher.de/", "xn--bcher-kva.de"),
        ("http://www.b\u00fccher.de/", "xn--bcher-kva.de"),
    ],
)
def test_the_domain_ring_key_is_the_registered_domain(url: str, domain: str) -> None:
    key = host_key(canonicalize(url))
    assert ring_key(key, DOMAIN) == registered_domain(key) == domain


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("scheme", [HOST, DOMAIN])
def test_a_politeness_unit_has_one_owner(url: str, scheme: str) -> None:
    """The rule a politeness key must keep: a resize places a host record by the ring
    key of the politeness key it holds, so that is the ring key of each of its hosts."""
    key = host_key(canonicalize(url))
    ring = Ring(7, vnodes=64, key=scheme)
    assert ring_key(politeness_key(key), scheme) == ring_key(key, scheme)
    assert ring.owner(politeness_key(key)) == ring.owner(key)


def test_a_domain_ring_puts_every_host_of_a_domain_at_one_worker() -> None:
    hosts = [f"s{i}.example.com" for i in range(300)] + ["example.com", "example.com:81"]
    assert len({Ring(8, 64, key=DOMAIN).owner(h) for h in hosts}) == 1
    assert len({Ring(8, 64, key=HOST).owner(h) for h in hosts}) == 8
    # Hosts without a registered domain spread as the host ring spreads them.
    tests = [f"h{i}.web.test:8080" for i in range(300)]
    assert ([Ring(8, 64, key=DOMAIN).owner(h) for h in tests]
            == [Ring(8, 64, key=HOST).owner(h) for h in tests])


def test_an_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="ring key scheme"):
        ring_key("a.test", "address")
