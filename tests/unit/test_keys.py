"""The ring key and the politeness key (hive.core.keys): equal today, and kept apart."""

from __future__ import annotations

import pytest

from hive.core.keys import politeness_key, ring_key
from hive.core.ring import Ring
from hive.core.urls import canonicalize, host_key

URLS = [
    "http://a.test/", "https://a.test/x", "http://a.test:8080/", "http://[::1]:81/",
    "http://127.0.0.1/", "http://b\u00fccher.test/", "http://sub.a.test/",
]


@pytest.mark.parametrize("url", URLS)
def test_the_keys_agree_today(url: str) -> None:
    """Both are the host key, so a host's queue, lease and record sit at its ring owner."""
    key = host_key(canonicalize(url))
    assert ring_key(key) == politeness_key(key) == key


@pytest.mark.parametrize("url", URLS)
def test_a_politeness_unit_has_one_owner(url: str) -> None:
    """The rule a new politeness key must keep: a resize places a host record by the ring
    key of the politeness key it holds, so that is the ring key of each of its hosts."""
    key = host_key(canonicalize(url))
    ring = Ring(7, vnodes=64)
    assert ring_key(politeness_key(key)) == ring_key(key)
    assert ring.owner(ring_key(politeness_key(key))) == ring.owner(ring_key(key))
