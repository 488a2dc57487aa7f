"""The end of a batch against the races it exists for: counters moving between rounds, acks
outstanding, a worker restarting, a report missing, a stale report."""

from __future__ import annotations

from typing import Any

from hive.procs.batchend import BatchEnd
from hive.procs.stats import WorkerReport

QUIET = {"frontier/admitted": 10, "outbox/batches": 3, "outbox/acked": 3,
         "frontier/done/ok": 7}


def report(worker: int, number: int, idle: bool = True, sent: float = 0.0,
           **stats: Any) -> WorkerReport:
    return WorkerReport(worker, number, idle, sent, sent, {**QUIET, **stats})


def rounds(batch: BatchEnd, *rounds: dict[int, WorkerReport], outbox: int = 0) -> list[bool]:
    return [batch.observe(r, outbox) for r in rounds]


def test_two_quiet_rounds_with_nothing_moved_end_the_batch() -> None:
    batch = BatchEnd(range(2))
    assert rounds(batch, {0: report(0, 1), 1: report(1, 1)},
                  {0: report(0, 2), 1: report(1, 2)}) == [False, True]


def test_a_round_is_only_complete_when_every_worker_reported_anew() -> None:
    batch = BatchEnd(range(2))
    assert not batch.observe({0: report(0, 1), 1: report(1, 1)}, 0)
    # Worker 1 has sent nothing since: its old report does not make a second round.
    assert not batch.observe({0: report(0, 2), 1: report(1, 1)}, 0)
    assert not batch.observe({0: report(0, 3), 1: report(1, 1)}, 0)
    assert batch.observe({0: report(0, 4), 1: report(1, 2)}, 0)


def test_a_missing_report_holds_the_round_open() -> None:
    batch = BatchEnd(range(2))
    assert rounds(batch, {0: report(0, 1)}, {0: report(0, 2)}, {0: report(0, 3)}) == [False] * 3
    assert batch.quiet_rounds == 0


def test_a_counter_that_moved_between_quiet_rounds_starts_the_count_again() -> None:
    batch = BatchEnd(range(2))
    for moved in ({"frontier/done/ok": 8}, {"frontier/admitted": 11}, {"outbox/batches": 4},
                  {"frontier/robots/disallowed": 1}, {"worker/outcome/http_404": 1}):
        batch = BatchEnd(range(2))
        assert rounds(batch, {0: report(0, 1), 1: report(1, 1)},
                      {0: report(0, 2), 1: report(1, 2, **moved)},
                      {0: report(0, 3), 1: report(1, 3, **moved)}) == [False, False, True], moved


def test_outstanding_acks_keep_the_batch_going() -> None:
    batch = BatchEnd(range(1))
    # A worker with batches unacknowledged says it is not idle (its outbox is not empty).
    assert rounds(batch, {0: report(0, 1, idle=False, **{"outbox/acked": 2})},
                  {0: report(0, 2, idle=False, **{"outbox/acked": 2})}) == [False, False]
    # The acks come in: the counter moved, so one quiet round is not enough.
    assert rounds(batch, {0: report(0, 3)}, {0: report(0, 4)}) == [False, True]


def test_the_supervisors_own_outbox_keeps_the_batch_going() -> None:
    batch = BatchEnd(range(1))
    assert rounds(batch, {0: report(0, 1)}, {0: report(0, 2)}, outbox=1) == [False, False]
    assert rounds(batch, {0: report(0, 3)}, {0: report(0, 4)}) == [False, True]


def test_a_busy_worker_between_quiet_rounds_starts_the_count_again() -> None:
    batch = BatchEnd(range(1))
    assert rounds(batch, {0: report(0, 1)}, {0: report(0, 2, idle=False)},
                  {0: report(0, 3)}, {0: report(0, 4)}) == [False, False, False, True]


def test_a_restarted_worker_must_report_twice_from_its_new_process() -> None:
    batch = BatchEnd(range(2))
    assert not batch.observe({0: report(0, 1), 1: report(1, 5, sent=10.0)}, 0)
    batch.restarted(1, 20.0)
    # Its old process's last report (still held, or late in the inbox) counts for nothing.
    assert not batch.observe({0: report(0, 2), 1: report(1, 5, sent=10.0)}, 0)
    assert not batch.observe({0: report(0, 3), 1: report(1, 6, sent=19.9)}, 0)
    # The new process numbers its reports from 1 again.
    assert rounds(batch, {0: report(0, 4), 1: report(1, 1, sent=21.0)},
                  {0: report(0, 5), 1: report(1, 2, sent=22.0)}) == [False, True]


def test_a_report_filed_under_another_worker_does_not_count() -> None:
    batch = BatchEnd(range(2))
    assert rounds(batch, {0: report(0, 1), 1: report(0, 1)},
                  {0: report(0, 2), 1: report(0, 2)}) == [False, False]
