"""URL lists of any length go to the control socket in chunks that fit it."""

from __future__ import annotations

import json

from hive.procs.seeds import url_chunks


def test_chunks_fit_their_bound_and_keep_every_url_in_order() -> None:
    lines = [f"http://a.test/{i}-{'é' * (i % 50)}\n".encode() for i in range(20_000)]
    chunks = list(url_chunks(iter(lines), "stdin", 64 << 10))
    assert len(chunks) > 10
    assert all(len(json.dumps(c.urls)) <= 64 << 10 for c in chunks)
    assert [u for c in chunks for u in c.urls] == [x.decode().strip() for x in lines]
    assert not any(c.refused for c in chunks)


def test_unreadable_and_overlong_lines_are_refused_by_number() -> None:
    lines = [b"http://a.test/1\n", b"\xff\xfe\n", b"# a comment\n", b"\n",
             b"http://a.test/" + b"x" * 5000 + b"\n", b"http://a.test/2"]
    chunk, = url_chunks(iter(lines), "stdin", 1000)
    assert chunk.urls == ["http://a.test/1", "http://a.test/2"]
    assert [str(r) for r in chunk.refused] == ["'stdin line 2': not UTF-8 (byte 1)",
                                               "'stdin line 5': longer than 1000 bytes"]


def test_nothing_in_nothing_out() -> None:
    assert list(url_chunks(iter([b"\n", b"# x\n"]), "stdin", 1000)) == []


def test_a_sitemap_seed_keeps_its_prefix_canonical_after_it() -> None:
    from hive import config
    from hive.procs.seeds import screen

    cfg = config.load(environ={})
    seeds = screen(["sitemap:HTTP://A.test:80/s.xml", "sitemap:nonsense", "http://a.test"], cfg)
    assert seeds.urls == ["sitemap:http://a.test/s.xml", "http://a.test/"]
    assert [r.seed for r in seeds.refused] == ["sitemap:nonsense"]
