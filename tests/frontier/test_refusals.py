"""The refusals tally and its one-line summary (pure)."""

from __future__ import annotations

from hive.frontier.refusals import Refusals, describe, merge


def tally(*refusals: tuple[str, str, int]) -> dict[str, int]:
    r = Refusals(log_per_host=10)
    for reason, host, n in refusals:
        for _ in range(n):
            r.note(reason, host)
    return r.stats()


def test_workers_are_summed_by_reason_and_host() -> None:
    one = tally(("max_urls_per_host", "pg.test", 500), ("scope_domain", "x.org", 3))
    two = tally(("max_urls_per_host", "pg.test", 370), ("max_urls_per_host", "b.test", 1))
    assert merge([one, two, {"frontier/pending": 4}]) == {
        "max_urls_per_host": (871, {"pg.test": 870, "b.test": 1}),
        "scope_domain": (3, {"x.org": 3}),
    }
    assert describe([one, two]) == (
        "874 refused: max_urls_per_host 871 (pg.test 870, b.test 1), scope_domain 3 (x.org 3)"
    )
    assert describe([{"frontier/pending": 4}, {}]) == ""


def test_a_summary_names_a_few_hosts_and_reasons() -> None:
    stats = tally(*[("max_depth", f"h{i}.test", 10 - i) for i in range(6)],
                  *[(f"reason_{i}", "a.test", 1) for i in range(5)])
    line = describe([stats])
    assert line.startswith("50 refused: max_depth 45 (h0.test 10, h1.test 9, h2.test 8, …), ")
    assert line.endswith(", 2 more reasons in the stats")
