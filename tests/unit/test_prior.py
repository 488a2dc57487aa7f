"""hive.core.prior: a plan line's form, the change a fetch shows, the head a 304 confirms,
and Cho and Garcia-Molina's change-rate estimate."""

from __future__ import annotations

import io
import math
import random

import pytest

from hive.core.prior import (
    CHANGED,
    GONE,
    MOVED,
    NEW,
    UNCHANGED,
    UNKNOWN,
    Prior,
    classify,
    read_plan,
)
from hive.frontier.priority import change_level

PAGE = Prior("http://a.test/p", depth=2, path="LL", status=200, digest="sha1:AAA",
             etag='"e1"', last_modified="Tue, 01 Dec 2026 10:00:00 GMT",
             date="2026-12-01T10:00:00Z", record_id="<urn:uuid:1>",
             head="HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: \"e1\"\r\n"
                  "Content-Length: 10\r\nCache-Control: max-age=60")


def test_a_prior_survives_its_line_and_a_bad_line_is_named() -> None:
    assert Prior.decode(PAGE.encode()) == PAGE
    assert Prior.decode(Prior("http://a.test/").encode()) == Prior("http://a.test/")
    with pytest.raises(ValueError, match="unknown fields: evil"):
        Prior.decode(b'{"url": "http://a.test/", "evil": 1}')
    with pytest.raises(ValueError, match="depth: expected int"):
        Prior.decode(b'{"url": "http://a.test/", "depth": "2"}')
    with pytest.raises(ValueError, match="not JSON"):
        Prior.decode(b"{")


def test_read_plan_says_why_a_line_is_skipped_and_reads_past_a_long_one() -> None:
    plan = b"\n".join([
        PAGE.encode(), b"{not json", Prior("ftp://x/").encode(),
        Prior("http://a.test/k", kind="zz").encode(), b'{"url": "http://a.test/' + b"x" * 70000
        + b'"}', Prior("http://a.test/last").encode(),
    ]) + b"\n"
    read = [(number, prior.url if prior else None, why)
            for number, prior, why in read_plan(io.BytesIO(plan))]
    assert read == [(1, PAGE.url, ""), (2, None, "fields"), (3, None, "url"),
                    (4, None, "fields"), (5, None, "too_long"), (6, "http://a.test/last", "")]


def test_conditional_lines_send_the_validators_and_never_a_control_character() -> None:
    assert PAGE.conditional_lines() == [
        'If-None-Match: "e1"', "If-Modified-Since: Tue, 01 Dec 2026 10:00:00 GMT"]
    assert Prior("http://a.test/", etag='"x"\r\nX-Evil: 1').conditional_lines() == []


@pytest.mark.parametrize(("prior", "status", "digest", "location", "expected"), [
    (None, 200, "", None, (NEW, "not_in_prior")),
    (None, 301, "", "http://a.test/q", (NEW, "not_in_prior")),
    (None, 404, "", None, None),
    (PAGE, 304, "", None, (UNCHANGED, "304")),
    (PAGE, 200, "sha1:AAA", None, (UNCHANGED, "same_digest")),
    (PAGE, 200, "sha1:BBB", None, (CHANGED, "new_digest")),
    (PAGE, 404, "", None, (GONE, "status")),
    (PAGE, 410, "", None, (GONE, "status")),
    (Prior("http://a.test/p", status=404), 404, "", None, (UNCHANGED, "status")),
    (Prior("http://a.test/p", status=404), 200, "sha1:A", None, (CHANGED, "status")),
    (PAGE, 301, "", "http://a.test/q", (MOVED, "redirect")),
    (Prior("http://a.test/p", status=301, location="http://a.test/q"), 301, "",
     "http://a.test/q", (UNCHANGED, "redirect")),
    (Prior("http://a.test/p", status=301, location="http://a.test/q"), 302, "",
     "http://a.test/r", (MOVED, "redirect")),
    (PAGE, 503, "", None, None),
    (PAGE, None, "", None, None),
])
def test_classify(prior: Prior | None, status: int | None, digest: str, location: str | None,
                  expected: tuple[str, str] | None) -> None:
    assert classify(prior, status, digest, location) == expected


def test_a_304_confirms_the_stored_head_with_its_own_fields() -> None:
    refreshed = PAGE.refreshed_head([("ETag", '"e1"'), ("Cache-Control", "max-age=120"),
                                     ("Date", "Fri"), ("Content-Length", "0"),
                                     ("Connection", "close")])
    assert refreshed == ("HTTP/1.1 200 OK", [
        ("Content-Type", "text/html"), ("Content-Length", "10"), ("ETag", '"e1"'),
        ("Cache-Control", "max-age=120"), ("Date", "Fri")])
    assert Prior("http://a.test/").refreshed_head([("Date", "Fri")]) is None


def test_the_change_probability_follows_the_estimator() -> None:
    day = 86400.0
    assert Prior("u").change_probability(1e9) == UNKNOWN  # one capture: no interval
    # Changed at each of 3 visits a day apart: r = -ln(0.5 / 3.5) = ln 7, lambda = ln 7 a day.
    often = Prior("u", seen=4, changed=3, span=3 * day, last=0.0)
    assert often.change_probability(day) == pytest.approx(1 - 1 / 7)
    never = Prior("u", seen=4, changed=0, span=3 * day, last=0.0)
    assert never.change_probability(day) == 0.0
    once = Prior("u", seen=4, changed=1, span=3 * day, last=0.0)
    assert 0 < once.change_probability(day) < UNKNOWN < often.change_probability(day)
    assert once.change_probability(10 * day) > once.change_probability(day)


def test_the_estimator_is_nearly_unbiased_for_a_poisson_page() -> None:
    """Pages changing as Poisson processes of known rates, visited n times at interval I:
    the estimator's mean rate is within 10 % of the true one (the naive X / nI is not,
    for a page changing about as often as it is visited). Seed fixed."""
    rng, interval, visits = random.Random(7), 1.0, 10
    for rate in (0.3, 1.0, 2.0):
        estimates, naive = [], []
        for _ in range(4000):
            changed = sum(rng.random() < 1 - math.exp(-rate * interval) for _ in range(visits))
            prior = Prior("u", seen=visits + 1, changed=changed, span=visits * interval)
            # p over one interval back to a rate: -ln(1 - p) / I.
            p = prior.change_probability(prior.last + interval)
            estimates.append(-math.log(max(1 - p, 1e-12)) / interval)
            naive.append(changed / (visits * interval))
        assert sum(estimates) / len(estimates) == pytest.approx(rate, rel=0.10), rate
        if rate >= 1.0:
            assert sum(naive) / len(naive) < 0.8 * rate


def test_change_level_puts_likely_changes_first() -> None:
    assert change_level(1.0, 8) == 1
    assert change_level(0.0, 8) == 8
    assert change_level(UNKNOWN, 8) in (4, 5)
    assert change_level(2.0, 8) == 1 and change_level(-1.0, 8) == 8
