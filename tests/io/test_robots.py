"""robots.txt: RFC 9309 status policy, rule matching, persistence, the cache, hostile bodies."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive import config
from hive.errors import ConfigError, StoreError
from hive.robots import RobotsCache, RobotsPolicy, RobotsRules, product_token

POLICY = RobotsPolicy(agent="hive", cache_ttl=86400.0, max_bytes=512000, max_redirects=5,
                      tries=3, retry_delay=10.0)


def parsed(text: str | bytes, now: float = 0.0) -> RobotsRules:
    body = text.encode() if isinstance(text, str) else text
    decision = POLICY.from_fetch(200, body, now=now, attempt=1)
    assert decision.final and decision.rules.kind == "parsed"
    return decision.rules


# --- the agent token -------------------------------------------------------

@pytest.mark.parametrize("user_agent, token", [
    ("hive/0.1 (+https://hive-crawler.invalid/bot; crawler@hive-crawler.invalid)", "hive"),
    ("HiveBot/2.0", "hivebot"),
    ("  my-bot_x/1", "my-bot_x"),
    ("hive", "hive"),
])
def test_product_token(user_agent: str, token: str) -> None:
    assert product_token(user_agent) == token


@pytest.mark.parametrize("user_agent", ["", "/1.0", "(compatible)"])
def test_a_user_agent_without_product_token_is_a_config_error(user_agent: str) -> None:
    with pytest.raises(ConfigError, match="fetch.user_agent"):
        product_token(user_agent)


def test_policy_from_config() -> None:
    cfg = config.load(environ={})
    policy = RobotsPolicy.from_config(cfg)
    assert policy.agent == "hive"
    assert (policy.cache_ttl, policy.max_bytes, policy.tries) == (
        cfg.robots.cache_ttl, cfg.robots.max_bytes, cfg.robots.tries)


# --- rules -----------------------------------------------------------------

def test_a_byte_order_mark_keeps_the_first_group() -> None:
    rules = parsed(b"\xef\xbb\xbfUser-agent: hive\nDisallow: /secret\n")
    assert not rules.allowed("https://a.test/secret/x")
    assert rules.allowed("https://a.test/open")


def test_disallowed_directory_is_honoured() -> None:
    rules = parsed("User-agent: *\nDisallow: /private/\n")
    assert not rules.allowed("https://a.test/private/")
    assert not rules.allowed("https://a.test/private/page.html?q=1")
    assert rules.allowed("https://a.test/private")
    assert rules.allowed("https://a.test/public/private/")
    assert rules.allowed("https://a.test/robots.txt")


@pytest.mark.parametrize("path, allowed", [
    ("/shop/", False),
    ("/shop/cart", False),
    ("/shop/cart/public", True),
    ("/shop/cart/public/item", True),
    ("/shop/cart/publicity", True),
    ("/docs/a.pdf", False),
    ("/docs/a.pdf?x=1", True),
    ("/docs/a.html", True),
    ("/tie", True),
    ("/", True),
])
def test_longest_match_wins_and_allow_wins_ties(path: str, allowed: bool) -> None:
    rules = parsed(
        "User-agent: *\n"
        "Disallow: /shop/\n"
        "Allow: /shop/cart/public\n"
        "Disallow: /*.pdf$\n"
        "Disallow: /tie\n"
        "Allow: /tie\n"
    )
    assert rules.allowed(f"https://a.test{path}") is allowed


@pytest.mark.parametrize("group", ["hive", "HIVE", "Hive"])
def test_our_group_is_matched_case_insensitively(group: str) -> None:
    rules = parsed(f"User-agent: *\nDisallow: /\n\nUser-agent: {group}\nDisallow: /only-this\n")
    assert rules.allowed("https://a.test/page")
    assert not rules.allowed("https://a.test/only-this")


def test_other_agents_groups_do_not_apply() -> None:
    rules = parsed("User-agent: hivemind\nUser-agent: googlebot\nDisallow: /\n")
    assert rules.allowed("https://a.test/page")
    assert rules.crawl_delay() is None


@pytest.mark.parametrize("text, delay", [
    ("User-agent: hive\nCrawl-delay: 2.5\n\nUser-agent: *\nCrawl-delay: 9\n", 2.5),
    ("User-agent: *\nCrawl-delay: 7\n", 7.0),
    ("User-agent: googlebot\nCrawl-delay: 7\n", None),
    ("User-agent: *\nDisallow: /x\n", None),
    ("User-agent: *\nCrawl-delay: soon\n", None),
    ("User-agent: *\nCrawl-delay: -3\n", None),
])
def test_crawl_delay_for_our_token_then_star(text: str, delay: float | None) -> None:
    assert parsed(text).crawl_delay() == delay


def test_only_parsed_rules_carry_a_crawl_delay() -> None:
    assert RobotsRules("allow_all", "hive", 1.0).crawl_delay() is None
    assert RobotsRules("disallow_all", "hive", 1.0).crawl_delay() is None


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        RobotsRules("maybe", "hive", 1.0)  # type: ignore[arg-type]


# --- the status policy -----------------------------------------------------

@pytest.mark.parametrize("status", [200, 203, 204, 299])
def test_2xx_is_parsed(status: int) -> None:
    decision = POLICY.from_fetch(status, b"User-agent: *\nDisallow: /x\n", now=100.0, attempt=1)
    assert decision.final and not decision.unreachable
    assert decision.rules.kind == "parsed"
    assert decision.rules.expires == 100.0 + 86400.0
    assert not decision.rules.allowed("https://a.test/x")


def test_an_empty_2xx_body_allows_everything() -> None:
    assert parsed(b"").allowed("https://a.test/anything")


@pytest.mark.parametrize("status", [300, 301, 302, 307, 308, 400, 401, 403, 404, 410, 451, 499])
def test_unavailable_allows_all(status: int) -> None:
    decision = POLICY.from_fetch(status, b"User-agent: *\nDisallow: /\n", now=5.0, attempt=1)
    assert decision.final and decision.rules.kind == "allow_all"
    assert decision.rules.expires == 5.0 + 86400.0
    assert decision.rules.allowed("https://a.test/anything")


@pytest.mark.parametrize("status", [None, 429, 500, 502, 503, 504, 599, 100, 600, 999])
def test_unreachable_disallows_all_until_a_retry(status: int | None) -> None:
    decision = POLICY.from_fetch(status, b"User-agent: *\nAllow: /\n", now=5.0, attempt=1)
    assert not decision.final and not decision.unreachable
    assert decision.retry_at == 15.0
    assert decision.rules.kind == "disallow_all"
    assert decision.rules.expires == 15.0
    assert not decision.rules.allowed("https://a.test/anything")


def test_retries_back_off_then_give_up() -> None:
    policy = RobotsPolicy(agent="hive", cache_ttl=86400.0, max_bytes=512000, max_redirects=5,
                          tries=4, retry_delay=10.0)
    now, waits = 0.0, []
    for attempt in (1, 2, 3):
        decision = policy.from_fetch(503, b"", now=now, attempt=attempt)
        assert decision.retry_at is not None
        waits.append(decision.retry_at - now)
        now = decision.retry_at
    assert waits == [10.0, 20.0, 40.0]
    last = policy.from_fetch(None, b"", now=now, attempt=4)
    assert last.final and last.unreachable
    assert last.rules.kind == "unreachable" and last.rules.expires == now + 86400.0
    assert not last.rules.allowed("https://a.test/")


def test_a_longer_retry_after_wins_up_to_the_cache_ttl() -> None:
    for retry_after, wait in [(None, 10.0), (3.0, 10.0), (45.0, 45.0), (10**9, 86400.0)]:
        decision = POLICY.from_fetch(503, b"", now=5.0, attempt=1, retry_after=retry_after)
        assert decision.retry_at == 5.0 + wait, retry_after
        assert decision.rules.kind == "disallow_all"


def test_the_default_tries_are_three_in_all() -> None:
    assert POLICY.from_fetch(500, b"", now=0.0, attempt=2).retry_at == 20.0
    assert POLICY.from_fetch(500, b"", now=0.0, attempt=3).unreachable


def test_a_success_after_failures_is_definitive() -> None:
    assert POLICY.from_fetch(404, b"", now=0.0, attempt=3).rules.kind == "allow_all"
    assert POLICY.from_fetch(200, b"", now=0.0, attempt=3).rules.kind == "parsed"


def test_backoff_never_exceeds_the_cache_ttl() -> None:
    policy = RobotsPolicy(agent="hive", cache_ttl=100.0, max_bytes=10, max_redirects=5,
                          tries=50, retry_delay=10.0)
    assert policy.from_fetch(503, b"", now=0.0, attempt=30).retry_at == 100.0


def test_single_try_gives_up_at_once() -> None:
    policy = RobotsPolicy(agent="hive", cache_ttl=100.0, max_bytes=10, max_redirects=5,
                          tries=1, retry_delay=10.0)
    assert policy.from_fetch(503, b"", now=0.0, attempt=1).unreachable


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError, match="attempt"):
        POLICY.from_fetch(503, b"", now=0.0, attempt=0)


def test_only_max_bytes_are_parsed_and_a_cut_line_is_dropped() -> None:
    head = b"User-agent: *\nDisallow: /\n"
    body = head + b"Allow: /public-stuff\n" + b"# padding\n" * 100
    policy = RobotsPolicy(agent="hive", cache_ttl=100.0, max_bytes=len(head) + 8,
                          max_redirects=5, tries=3, retry_delay=10.0)
    rules = policy.from_fetch(200, body, now=0.0, attempt=1).rules
    assert rules.body == head
    assert not rules.allowed("https://a.test/public-stuff")
    assert not rules.allowed("https://a.test/")


def test_a_body_within_max_bytes_is_kept_whole() -> None:
    body = b"User-agent: *\nDisallow: /x"
    assert parsed(body).body == body


@pytest.mark.parametrize("location, hops, target", [
    ("/robots-moved.txt", 0, "https://a.test/robots-moved.txt"),
    ("https://b.test/robots.txt", 4, "https://b.test/robots.txt"),
    ("//c.test/robots.txt", 1, "https://c.test/robots.txt"),
    ("https://b.test/robots.txt", 5, None),
    (None, 0, None),
    ("  ", 0, None),
    ("ftp://b.test/robots.txt", 0, None),
    ("http://[broken/robots.txt", 0, None),
])
def test_next_hop(location: str | None, hops: int, target: str | None) -> None:
    assert POLICY.next_hop("https://a.test/robots.txt", location, hops) == target


# --- persistence -----------------------------------------------------------

@pytest.mark.parametrize("rules", [
    RobotsRules("allow_all", "hive", 123.5),
    RobotsRules("disallow_all", "hive", 42.0),
    RobotsRules("unreachable", "hive", math.inf),
    RobotsRules("parsed", "hive", 7.0, b"\xef\xbb\xbfUser-agent: hive\nDisallow: /p\n"),
])
def test_encode_decode_roundtrip(rules: RobotsRules) -> None:
    back = RobotsRules.decode(rules.encode(), "hive")
    assert back == rules
    for path in ("/", "/p", "/q"):
        assert back.allowed(f"https://a.test{path}") == rules.allowed(f"https://a.test{path}")


def test_decode_parses_for_the_agent_it_is_given() -> None:
    rules = parsed("User-agent: hive\nDisallow: /\n")
    other = RobotsRules.decode(rules.encode(), "otherbot")
    assert other.allowed("https://a.test/") and not rules.allowed("https://a.test/")


@pytest.mark.parametrize("data", [
    b"",
    b"\x01\x00",
    b"\x02" + RobotsRules("allow_all", "hive", 1.0).encode()[1:],
    b"\x01\x09" + RobotsRules("allow_all", "hive", 1.0).encode()[2:],
])
def test_corrupt_entries_raise_store_error(data: bytes) -> None:
    with pytest.raises(StoreError):
        RobotsRules.decode(data, "hive")


# --- the cache -------------------------------------------------------------

class Store:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.loads: list[str] = []

    def load(self, key: str) -> bytes | None:
        self.loads.append(key)
        return self.data.get(key)

    def store(self, key: str, data: bytes) -> None:
        self.data[key] = data


def test_cache_hits_until_expiry() -> None:
    cache = RobotsCache(10, "hive")
    assert cache.get("a.test", now=0.0) is None
    rules = parsed("User-agent: *\nDisallow: /x\n", now=0.0)
    cache.put("a.test", rules)
    assert cache.get("a.test", now=86399.0) is rules
    assert cache.get("a.test", now=86400.0) is None
    assert cache.stats() == {"robots/hits": 1, "robots/loads": 0, "robots/misses": 2,
                             "robots/evictions": 0, "robots/corrupt": 0, "robots/entries": 0}


def test_cache_is_a_bounded_lru() -> None:
    cache = RobotsCache(2, "hive")
    for key in ("a", "b"):
        cache.put(key, RobotsRules("allow_all", "hive", 100.0))
    assert cache.get("a", now=0.0) is not None
    cache.put("c", RobotsRules("allow_all", "hive", 100.0))
    assert cache.get("b", now=0.0) is None
    assert cache.get("a", now=0.0) is not None
    assert cache.get("c", now=0.0) is not None
    stats = cache.stats()
    assert stats["robots/evictions"] == 1 and stats["robots/entries"] == 2


def test_cache_reads_through_and_writes_to_the_store() -> None:
    store = Store()
    cache = RobotsCache(1, "hive", load=store.load, store=store.store)
    rules = parsed("User-agent: *\nDisallow: /x\n", now=0.0)
    cache.put("a.test", rules)
    assert RobotsRules.decode(store.data["a.test"], "hive") == rules
    cache.put("b.test", RobotsRules("allow_all", "hive", 50.0))
    loaded = cache.get("a.test", now=10.0)
    assert loaded == rules and loaded is not rules
    assert loaded is not None and not loaded.allowed("https://a.test/x")
    assert cache.get("a.test", now=11.0) is loaded
    assert cache.get("b.test", now=60.0) is None
    assert cache.stats()["robots/loads"] == 1
    assert cache.stats()["robots/misses"] == 1
    assert cache.stats()["robots/hits"] == 1


def test_a_fresh_cache_finds_what_a_previous_one_stored() -> None:
    store = Store()
    RobotsCache(5, "hive", load=store.load, store=store.store).put(
        "a.test", RobotsRules("unreachable", "hive", 100.0))
    reopened = RobotsCache(5, "hive", load=store.load, store=store.store)
    found = reopened.get("a.test", now=1.0)
    assert found is not None and found.kind == "unreachable"
    assert reopened.get("a.test", now=100.0) is None


def test_a_corrupt_stored_entry_is_a_miss() -> None:
    store = Store()
    store.data["a.test"] = b"junk"
    cache = RobotsCache(5, "hive", load=store.load, store=store.store)
    assert cache.get("a.test", now=0.0) is None
    assert cache.stats()["robots/corrupt"] == 1 and cache.stats()["robots/misses"] == 1


def test_cache_bound_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RobotsCache(0, "hive")


# --- hostile bodies --------------------------------------------------------

URLS = ["https://a.test/", "https://a.test/private/x", "https://a.test/%ff%00?q=\u00e9",
        "http://[::1]/a", "https://a.test/a*b$", "/relative", "", "http://[broken"]


def assert_usable(rules: RobotsRules) -> None:
    for url in URLS:
        assert isinstance(rules.allowed(url), bool)
    delay = rules.crawl_delay()
    assert delay is None or delay >= 0
    assert RobotsRules.decode(rules.encode(), "hive") == rules


HOSTILE = {
    "nul": b"User-agent: *\x00\nDisallow: /\x00private\n\x00\x00",
    "invalid-utf8": b"\xff\xfe\xfdUser-agent: *\nDisallow: /\xc3(\n",
    "binary": bytes(range(256)) * 400,
    "1mb-rule": b"User-agent: *\nDisallow: /" + b"a" * 1_000_000 + b"\n",
    "many-wildcards": b"User-agent: *\nDisallow: /*" + b"a*" * 200_000 + b"\n",
    "newlines": b"\r\r\n\n\r" * 10_000,
    "1mb-agent": b"User-agent: " + b"x" * 1_000_000,
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_bodies_never_raise(body: bytes) -> None:
    big = RobotsPolicy(agent="hive", cache_ttl=100.0, max_bytes=2_000_000, max_redirects=5,
                       tries=3, retry_delay=10.0)
    for policy in (POLICY, big):
        assert_usable(policy.from_fetch(200, body, now=0.0, attempt=1).rules)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    assert_usable(POLICY.from_fetch(200, body, now=0.0, attempt=1).rules)


LINE = st.one_of(
    st.tuples(
        st.sampled_from(["User-agent", "user-AGENT", "Allow", "Disallow", "Crawl-delay",
                         "Sitemap", "Request-rate", "Visit-time", "Host", "junk"]),
        st.sampled_from([":", " ", ": ", "::"]),
        st.text(st.characters(codec="utf-8"), max_size=40),
    ).map("".join),
    st.text(max_size=40),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(LINE, max_size=40), st.sampled_from(["\n", "\r\n", "\r"]), st.text(max_size=60))
def test_arbitrary_directives_never_raise(lines: list[str], newline: str, path: str) -> None:
    rules = parsed(newline.join(lines).encode("utf-8", errors="surrogatepass"))
    assert_usable(rules)
    assert isinstance(rules.allowed("https://a.test/" + path), bool)
