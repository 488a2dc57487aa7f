"""The store schema's owner: the meta state object on real LMDB stores, and the layout table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hive.core.urlstate import UrlState
from hive.errors import StoreError
from hive.frontier.frontier import Frontier
from hive.outcome import Kind, Outcome
from hive.storage import schema
from hive.storage.modes import read_only
from hive.storage.schema import META_STATE, MetaState
from hive.storage.store import Store
from tests.frontier.conftest import rec, small_config


def put_state(path: Path, raw: bytes) -> None:
    store = Store(path, sync_interval=0.0)
    store.put("meta", META_STATE, raw)
    store.close(0.0)


def test_the_meta_state_round_trips_through_a_store(tmp_path: Path) -> None:
    state = MetaState(seq=41, back_queued=3, counts={"frontier/admitted": 7, "frontier/done/ok": 4})
    store = Store(tmp_path, sync_interval=0.0)
    state.save(store)
    store.close(0.0)
    with read_only(tmp_path) as txn:
        loaded = MetaState.load(txn)
    assert (loaded.seq, loaded.back_queued, loaded.counts) == (41, 3, state.counts)
    assert loaded.missing == frozenset() and loaded.extra == {}


def test_the_bytes_are_the_ones_earlier_hives_wrote_and_read() -> None:
    counts = {"frontier/admitted": 2}
    earlier = json.dumps({"seq": 9, "counts": counts, "back_queued": 1}).encode()
    assert MetaState(9, 1, counts).encode() == earlier
    assert MetaState.decode(earlier, Path("x")) == MetaState(9, 1, counts)


def test_url_states_are_stored_as_earlier_hives_wrote_them(tmp_path: Path) -> None:
    """Each state has its byte (a store written before the enum opens and reads the
    same), a value round-trips, and a byte that is no state's is no state."""
    assert schema.URL_STATE_BYTES == {
        UrlState.PENDING: b"p", UrlState.DONE: b"d", UrlState.REFUSED: b"r"}
    frontier = Frontier.from_config(tmp_path, small_config(robots={"enabled": False}))
    frontier.admit([rec("http://a.test/1"), rec("http://a.test/2")], 1.0)
    lease = frontier.pop_ready(1.0).lease
    assert lease is not None
    frontier.done(lease, Outcome(Kind.OK), 1.0, 1.0)
    frontier.close(1.0)
    with read_only(tmp_path) as txn:
        stored = sorted(value for _, value in txn.items("urls"))
    assert stored[0] == b"dok" and stored[1][:1] == b"p"
    placed = schema.pending(stored[1])
    assert placed is not None and (placed.kind, placed.depth, placed.level) == ("", 1, 2)
    assert placed.base == placed.level and placed.seq > 0, "the place its entry is queued at"
    assert schema.pending(placed.encode()) == placed
    assert schema.pending(schema.pending_state("", 1)) == schema.Pending("", 1), (
        "a state of an earlier hive names its entry by kind and depth, no place")
    assert [schema.url_state(v)[0] for v in stored if schema.url_state(v)] == [
        UrlState.DONE, UrlState.PENDING]
    assert schema.url_state(b"dok") == (UrlState.DONE, "ok")
    assert schema.url_state(b"p") == (UrlState.PENDING, ""), "a bare p, as stores before wrote"
    assert schema.url_state(b"x") is None and schema.state_counters(b"x") == ()
    assert schema.state_counters(b"rtoo_deep") == ("frontier/refused/too_deep",)


def test_a_store_without_a_state_loads_the_defaults(tmp_path: Path) -> None:
    Store(tmp_path, sync_interval=0.0).close(0.0)
    with read_only(tmp_path) as txn:
        assert MetaState.load(txn) == MetaState()


def test_missing_fields_load_as_defaults_and_are_named() -> None:
    state = MetaState.decode(b'{"seq": 5}', Path("x"))
    assert (state.seq, state.back_queued, state.counts) == (5, 0, {})
    assert state.missing == {"back_queued", "counts"}


def test_unknown_fields_survive_a_frontier_that_does_not_know_them(tmp_path: Path) -> None:
    """A field a later hive adds is not lost when this one commits the state."""
    put_state(tmp_path, b'{"seq": 0, "counts": {}, "back_queued": 0, "later": [1, 2]}')
    frontier = Frontier.from_config(tmp_path, small_config())
    frontier.admit([rec("http://a.test/")], 0.0)
    frontier.close(0.0)
    with read_only(tmp_path) as txn:
        state = MetaState.load(txn)
    assert state.extra == {"later": [1, 2]}
    assert state.counts["frontier/admitted"] == 1 and state.seq >= 1


@pytest.mark.parametrize(("raw", "why"), [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"seq": "7", "counts": {}, "back_queued": 0}', "wrong type"),
    (b'{"seq": 7, "counts": {"frontier/admitted": "x"}, "back_queued": 0}', "wrong type"),
])
def test_damaged_bytes_are_a_store_error_naming_the_file(
    tmp_path: Path, raw: bytes, why: str
) -> None:
    put_state(tmp_path, raw)
    with pytest.raises(StoreError) as caught:
        Frontier.from_config(tmp_path, small_config())
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'data.mdb'}: meta state") and why in message


def test_add_takes_counts_away_too() -> None:
    state = MetaState(counts={"frontier/admitted": 5})
    state.add({"frontier/admitted": 2, "frontier/done/ok": 1}, -1)
    assert state.counts == {"frontier/admitted": 3, "frontier/done/ok": -1}


def test_the_layout_table_names_every_database_and_no_other() -> None:
    """The schema's docstring table is the documentation of DB_NAMES: kept in step."""
    lines = (schema.__doc__ or "").splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("=====")]
    body = lines[rules[1] + 1 : rules[2]]
    named = {line.split()[0] for line in body if line and not line.startswith(" ")}
    assert named == set(schema.DB_NAMES)
    assert set(schema.DB_NAMES) >= schema.ADDED_LATER
