"""Outcome kinds: one enumerated type whose values are the strings on disk and in logs."""

from __future__ import annotations

import json

import pytest

from hive.fetch.client import OUTCOME_KINDS
from hive.outcome import Kind, kind, parse_kinds
from hive.procs.stats import errors


def test_a_kind_is_its_old_string_everywhere() -> None:
    assert Kind.OK == "ok" and f"frontier/done/{Kind.ROBOTS_UNREACHABLE}" == (
        "frontier/done/robots_unreachable")
    assert json.dumps({"outcome": Kind.HANDOFF_FAILED}) == '{"outcome": "handoff_failed"}'
    assert {"ok": 1}[Kind.OK] == 1 and kind("robots") is Kind.ROBOTS


def test_every_kind_the_fetcher_reports_is_a_kind() -> None:
    assert all(isinstance(name, Kind) for name in OUTCOME_KINDS)


@pytest.mark.parametrize("status", [100, 301, 404, 429, 503, 999])
def test_http_kinds_are_made_once_per_status(status: int) -> None:
    made = Kind.http(status)
    assert made == f"http_{status}" and kind(f"http_{status}") is made and made.retryable
    assert made.error and not made.final


@pytest.mark.parametrize("value", ["timout", "http_5xx", "http_99", "http_1000", "OK", ""])
def test_a_string_that_is_no_kind_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        kind(value)


def test_what_each_kind_says_of_itself() -> None:
    assert Kind.TIMEOUT.retryable and not Kind.TIMEOUT.final
    assert Kind.OK.final and not Kind.OK.retryable and not Kind.OK.error
    assert Kind.ROBOTS.final and not Kind.ROBOTS.error
    assert Kind.ROBOTS_UNREACHABLE.final and Kind.ROBOTS_UNREACHABLE.error
    assert not Kind.ROBOTS_RETRY.final and not Kind.ROBOTS_RETRY.retryable
    assert {k for k in Kind if not k.error} == {
        Kind.OK, Kind.REDIRECT, Kind.ROBOTS, Kind.DENIED, Kind.ROBOTS_OK, Kind.ROBOTS_STALE,
        Kind.SITEMAP_OK, Kind.SITEMAP_TRUNCATED, Kind.FEED_OK, Kind.FEED_TRUNCATED,
        Kind.NOT_MODIFIED}
    assert Kind.NOT_MODIFIED.final and not Kind.NOT_MODIFIED.retryable
    # A sitemap or feed that did not parse to its end is an error; one cut at a limit is not.
    assert Kind.SITEMAP_ERROR.error and Kind.SITEMAP_ERROR.final
    assert Kind.FEED_ERROR.error and not Kind.SITEMAP_TRUNCATED.retryable


def test_the_batch_counts_errors_by_kind() -> None:
    stats = {"frontier/done/ok": 5, "frontier/done/redirect": 2, "frontier/done/robots": 1,
             "frontier/done/denied": 1, "frontier/done/http_404": 3, "frontier/done/timeout": 1,
             "frontier/done/robots_unreachable": 2, "worker/outcome/timeout": 9}
    assert errors(stats) == 6


def test_parse_kinds_names_the_key() -> None:
    assert parse_kinds("k", ["timeout", "http_503"]) == {Kind.TIMEOUT, Kind.http(503)}
    with pytest.raises(ValueError, match=r"^k: 'robots_ok' is not a kind a fetch can retry"):
        parse_kinds("k", ["robots_ok"])
