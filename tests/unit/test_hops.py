"""A URL record's hop path: one letter a hop, its last letters kept, embed chains counted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hive.core.record import (
    MAX_PATH_LETTERS,
    UrlRecord,
    embed_hops,
    extend_path,
    path_hops,
)


def walk(hops: str) -> str:
    path = ""
    for hop in hops:
        path = extend_path(path, hop)
    return path


def test_a_short_path_is_its_letters() -> None:
    assert walk("LLE") == "LLE"
    assert path_hops("LLE") == 3
    assert walk("") == "" and path_hops("") == 0


@given(st.text("LER", max_size=80))
def test_a_long_path_keeps_its_last_letters_and_its_count(hops: str) -> None:
    path = walk(hops)
    assert path_hops(path) == len(hops)
    letters = path.rpartition("+")[2]
    assert letters == hops[-MAX_PATH_LETTERS:] if hops else letters == ""
    assert len(path) <= MAX_PATH_LETTERS + 3


def test_a_long_path_is_written_as_heritrix_writes_it() -> None:
    path = walk("L" * 20 + "E")
    assert path == "5+" + "L" * 15 + "E"


def test_embed_hops_count_the_embeds_after_the_last_link() -> None:
    assert embed_hops("") == 0
    assert embed_hops("LL") == 0
    assert embed_hops("LE") == 1
    assert embed_hops("LEER") == 2
    assert embed_hops("ELR") == 0
    assert embed_hops("R") == 0
    assert embed_hops("9+EEEEEEEEEEEEEEEE") == 16


def test_a_record_carries_its_path_through_its_byte_form() -> None:
    record = UrlRecord("http://a.test/s.css", "a.test", 2, "http://a.test/", hint=1, path="LE")
    assert UrlRecord.decode(record.encode()) == record
    assert UrlRecord.host_key_of(record.encode()) == "a.test"
