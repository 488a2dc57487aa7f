"""``hive export`` of a real crawl of the test web (hostile hosts, requisites, revisits):
the Parquet index says what the WARCs' CDXJ indexes say, DuckDB reading it, and every
offset in it reads its record with warcio; the WACZ passes ``wacz validate`` and replays
in pywb from its own index; a crawl still being written is exported without its open
files; a hive without the export extra says what to install.

Under ``CI=true`` a missing library of the test extra fails these tests; elsewhere they skip.
"""

from __future__ import annotations

import gzip
import importlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive.testweb import Web, WebProcess
from hive.testweb.graph import Response
from tests.conftest import WEB_ADDRESS, wait_for
from tests.real.test_replay import COLLECTION, get, serve
from tests.test_hive import Hive, finish

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def need(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is missing: install the test extra")
        pytest.skip(f"{module} is not installed")


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hive, WebProcess]]:
    """One finished crawl: hostile hosts (redirects, 429s, a body cut at the size cap),
    requisites and copies (revisits), metadata records."""
    tmp = tmp_path_factory.mktemp("crawl")
    web = Web(seed=7, hosts=4, pages=5, hostile=True, requisites=True, copies=2)
    with WebProcess(web, tmp / "requests.jsonl", host=WEB_ADDRESS) as server:
        hive = Hive(tmp, server, warc={"revisit_min_bytes": 1, "metadata_records": True},
                    frontier={"max_urls_per_host": 30})
        finish(hive.start(2), timeout=180)
        yield hive, server


def cdxj_lines(data: Path) -> list[tuple[str, str, dict[str, str]]]:
    found = []
    for index in sorted((data / "warc").glob("*.cdxj")):
        for line in index.read_text().splitlines():
            key, stamp, fields = line.split(" ", 2)
            found.append((key, stamp, json.loads(fields)))
    return found


def log_lines(data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((data / "logs").glob("crawl-*.jsonl"))
            for line in path.read_text().splitlines()]


def respond(server: WebProcess, url: str) -> Response | None:
    """What the test web serves at url, if it serves it whole (not a stream)."""
    host, _, path = url.removeprefix("http://").partition("/")
    served = server.web.respond(host.partition(":")[0], "/" + path, port=server.port,
                                tripwire=0)
    return served if isinstance(served, Response) else None


def payload(warc: Path, offset: int) -> bytes:
    """The payload of the response record at offset, read by warcio."""
    with warc.open("rb") as f:
        f.seek(offset)
        body: bytes = next(iter(ArchiveIterator(f))).content_stream().read()
        return body


def export(hive: Hive, form: str, out: Path) -> subprocess.CompletedProcess[str]:
    result = hive.run("export", "--format", form, "--out", str(out), timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_the_parquet_index_says_what_the_cdxj_says(
    crawl: tuple[Hive, WebProcess], tmp_path: Path
) -> None:
    duckdb = need("duckdb")
    hive, _ = crawl
    out = tmp_path / "crawl.parquet"
    export(hive, "parquet", out)
    db = duckdb.connect()
    db.execute(f"CREATE VIEW c AS SELECT * FROM read_parquet('{out}')")
    lines = cdxj_lines(hive.data)
    assert len(lines) > 50

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return sorted(db.execute(sql).fetchall(), key=repr)

    # Counts by status and by MIME type, and every record's place, as the CDXJ has them.
    by_status = Counter(int(f["status"]) for _, _, f in lines)
    assert rows("SELECT fetch_status, count(*) FROM c WHERE warc_record_type IS NOT NULL "
                "GROUP BY 1") == sorted(by_status.items(), key=repr)
    by_mime = Counter(f["mime"] for _, _, f in lines)
    assert rows("SELECT content_mime_type, count(*) FROM c WHERE warc_record_type IS NOT NULL "
                "GROUP BY 1") == sorted(by_mime.items(), key=repr)
    places = {(f["filename"], int(f["offset"]), int(f["length"]), f["url"], key,
               f.get("digest", "").removeprefix("sha1:")) for key, _, f in lines}
    assert set(rows("SELECT warc_filename, warc_record_offset, warc_record_length, url, "
                    "url_surtkey, content_digest FROM c WHERE warc_record_type IS NOT NULL")) \
        == places
    assert by_mime["warc/revisit"] > 0
    # No text sink in this crawl: no language anywhere.
    assert db.execute("SELECT count(content_languages) FROM c").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM c WHERE warc_record_type = 'revisit'").fetchone() \
        == (by_mime["warc/revisit"],)

    # Each offset reads its record: type, target URI, date (to the second), status, and
    # what only the record says: a redirect's Location and WARC-Truncated.
    exported = db.execute(
        "SELECT warc_filename, warc_record_offset, warc_record_type, url, "
        "strftime(fetch_time, '%Y-%m-%dT%H:%M:%S'), fetch_status, fetch_redirect, "
        "content_truncated FROM c WHERE warc_record_type IS NOT NULL").fetchall()
    redirects = truncated = 0
    for filename, offset, kind, url, when, status, redirect, cut in exported:
        with (hive.data / "warc" / filename).open("rb") as f:
            f.seek(offset)
            record = next(iter(ArchiveIterator(f)))
            assert record.rec_type == kind
            assert record.rec_headers["WARC-Target-URI"] == url
            assert record.rec_headers["WARC-Date"].startswith(when)
            assert record.http_headers.get_statuscode() == str(status)
            location = record.http_headers.get_header("Location")
            assert (redirect is not None) == (location is not None and 300 <= status < 400)
            if redirect is not None:
                redirects += 1
                assert redirect.endswith(location), (url, redirect, location)
            assert cut == record.rec_headers.get_header("WARC-Truncated"), url
            truncated += cut is not None
    assert redirects > 0 and truncated > 0

    # Every crawl-log line is in exactly one row: a capture's, or one of its own.
    logged = log_lines(hive.data)
    assert db.execute("SELECT count(*) FROM c WHERE outcome IS NOT NULL").fetchone() \
        == (len(logged),)
    assert db.execute("SELECT count(*) FROM c WHERE warc_record_type IS NOT NULL "
                      "AND outcome IS NULL").fetchone() == (0,)
    unfetched = Counter(entry["outcome"] for entry in logged if entry["status"] is None)
    assert rows("SELECT outcome, count(*) FROM c WHERE warc_record_type IS NULL GROUP BY 1") \
        == sorted(unfetched.items(), key=repr)
    assert unfetched["refused"] > 0
    # A capture carries its own fetch's line: its hop path, depth, via and duration.
    fetched = {(e["url"], e.get("hop", ""), e["depth"], e["via"] or None,
                e["dl"]) for e in logged if e["status"] is not None}
    assert set(db.execute("SELECT url, hop_path, depth, via, fetch_duration FROM c "
                          "WHERE warc_record_type IS NOT NULL").fetchall()) == fetched
    # Common Crawl's queries run: its column names and types.
    types = dict(db.execute("SELECT column_name, column_type FROM "
                            "(DESCRIBE SELECT * FROM c)").fetchall())
    assert types["fetch_status"] == "SMALLINT" and types["url_port"] == "INTEGER"
    assert types["fetch_time"] == "TIMESTAMP WITH TIME ZONE"
    assert db.execute("SELECT DISTINCT url_host_registered_domain FROM c WHERE "
                      "url_host_name LIKE 'h%'").fetchall() == [("web.test",)]


def test_a_directory_gets_parts_and_rows_come_in_bounded_groups(
    crawl: tuple[Hive, WebProcess], tmp_path: Path
) -> None:
    """--out a directory: part files a glob reads; row groups of ROW_GROUP_ROWS at most."""
    pq = need("pyarrow.parquet")
    from hive.export import parquet
    from hive.export.captures import Tally

    hive, _ = crawl
    out = tmp_path / "parts"
    out.mkdir()
    written = parquet.export(hive.data, out, Tally(), group_rows=7)
    assert written == [out / "part-00000.parquet"]
    meta = pq.ParquetFile(written[0]).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert max(sizes) == 7 and sum(sizes) == meta.num_rows > 7 * 5
    assert not list(out.glob("*.part")) and not list(out.glob(".hive-export-*"))


def test_the_wacz_validates_and_replays_in_pywb(
    crawl: tuple[Hive, WebProcess], tmp_path: Path
) -> None:
    need("wacz")
    wayback, manager = shutil.which("wayback"), shutil.which("wb-manager")
    if wayback is None or manager is None:
        need("pywb.no_such_module")  # fails under CI, skips elsewhere
    assert wayback is not None and manager is not None
    hive, server = crawl
    package = tmp_path / "crawl.wacz"
    export(hive, "wacz", package)
    checked = subprocess.run([sys.executable, "-m", "wacz", "validate", "-f", str(package)],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert checked.returncode == 0 and "is valid" in checked.stdout, checked.stdout

    # pages.jsonl: a header, then each HTML page with a 2xx, its title as the server wrote it.
    lines = cdxj_lines(hive.data)
    html = {f["url"] for _, _, f in lines
            if f["mime"] == "text/html" and f["status"].startswith("2")}
    with zipfile.ZipFile(package) as zf:
        names = set(zf.namelist())
        pages = [json.loads(line) for line in zf.read("pages/pages.jsonl").splitlines()]
        assert zf.getinfo("indexes/index.cdx.gz").compress_type == zipfile.ZIP_STORED
        index = gzip.decompress(zf.read("indexes/index.cdx.gz")).decode()
    assert {f"archive/{p.name}" for p in (hive.data / "warc").glob("*.warc.gz")} < names
    assert pages[0]["format"] == "json-pages-1.0"
    assert sorted(page["url"] for page in pages[1:]) == sorted(html)
    titled = 0
    for page in pages[1:]:
        served = respond(server, page["url"])
        body = served.body.decode("utf-8", "replace") if served is not None else ""
        if "<title>" in body:
            title = " ".join(body.split("<title>", 1)[1].split("</title>", 1)[0].split())
            assert page.get("title") == title, page
            titled += 1
    assert titled > 10
    assert index == "".join(sorted(
        line + "\n" for path in (hive.data / "warc").glob("*.cdxj")
        for line in path.read_text().splitlines()))

    # pywb, from the package's own index (wb-manager unpacks it; it indexes nothing).
    subprocess.run([manager, "init", COLLECTION], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    subprocess.run([manager, "add", "--unpack-wacz", COLLECTION, str(package)], cwd=tmp_path,
                   check=True, capture_output=True, timeout=60)
    (tmp_path / "config.yaml").write_text("framed_replay: false\n")
    replay = serve(tmp_path, wayback)
    latest = {f["url"]: (stamp, f) for _, stamp, f in sorted(lines, key=lambda line: line[1])
              if f["mime"] == "text/html"}
    replayed = 0
    for url in sorted(html):
        # The normal hosts' pages replay as archived (a hostile host's gzip bomb, decoded).
        if url.startswith("http://h0"):
            stamp, found = latest[url]
            archived = payload(hive.data / "warc" / found["filename"], int(found["offset"]))
            assert get(f"{replay}/{stamp}id_/{url}") == (200, archived), url
            replayed += 1
    assert replayed > 10


def test_a_running_crawl_is_exported_without_its_open_files(
    crawl: tuple[Hive, WebProcess], tmp_path: Path
) -> None:
    """A WARC still written and a log line half written: left out, said, and the open
    file's fetches are rows without a record."""
    duckdb = need("duckdb")
    hive, _ = crawl
    copy = tmp_path / "data"
    shutil.copytree(hive.data, copy, ignore=shutil.ignore_patterns("lock*", "*.mdb"))
    warcs = sorted((copy / "warc").glob("*.warc.gz"))
    still = warcs[0]
    opened = [json.loads(f.split(" ", 2)[2]) for f in
              (copy / "warc" / (still.name.removesuffix(".warc.gz") + ".cdxj")).read_text()
              .splitlines()]
    still.rename(still.with_name(still.name + ".open"))
    (copy / "warc" / (still.name.removesuffix(".warc.gz") + ".cdxj")).unlink()
    with next((copy / "logs").glob("crawl-*.jsonl")).open("a") as log:
        log.write('{"t": 1.0, "outcome": "ok", "url": "http://half.test/"')
    out = tmp_path / "running.parquet"
    result = subprocess.run(
        hive.command("export", "--data", str(copy), "--format", "parquet", "--out", str(out)),
        env=hive.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"{still.name}.open: still open" in result.stderr
    assert "1 unfinished last line" in result.stderr
    db = duckdb.connect()
    files = {name for (name,) in db.execute(
        f"SELECT DISTINCT warc_filename FROM '{out}' WHERE warc_filename IS NOT NULL").fetchall()}
    assert files == {path.name for path in warcs[1:]}
    unrecorded = Counter(url for (url,) in db.execute(
        f"SELECT url FROM '{out}' WHERE warc_record_type IS NULL AND fetch_status IS NOT NULL"
    ).fetchall())
    assert unrecorded == Counter(f["url"] for f in opened)


def test_an_export_of_a_crawl_while_it_runs(tmp_path: Path) -> None:
    """Exported mid-crawl (WARCs rotating under it): every record it names is where it
    says, and every one is in the finished crawl's indexes."""
    duckdb = need("duckdb")
    web = Web(seed=2, hosts=3, pages=15, hostile=False)
    with WebProcess(web, tmp_path / "requests.jsonl", host=WEB_ADDRESS) as server:
        hive = Hive(tmp_path, server, politeness={"min_delay": 0.3, "max_delay": 0.3},
                    warc={"max_file_bytes": 20_000})
        process = hive.start(1)
        wait_for(lambda: list((hive.data / "warc").glob("*.cdxj")), timeout=60)
        out = tmp_path / "running.parquet"
        export(hive, "parquet", out)
        assert process.poll() is None, "the crawl ended before the export: make it longer"
        finish(process, timeout=120)
    exported = duckdb.connect().execute(
        f"SELECT warc_filename, warc_record_offset, warc_record_length, url FROM '{out}' "
        "WHERE warc_record_type IS NOT NULL").fetchall()
    assert exported
    final = {(f["filename"], int(f["offset"]), int(f["length"]), f["url"])
             for _, _, f in cdxj_lines(hive.data)}
    assert set(exported) <= final
    for filename, offset, _, url in exported:
        with (hive.data / "warc" / filename).open("rb") as f:
            f.seek(offset)
            assert next(iter(ArchiveIterator(f))).rec_headers["WARC-Target-URI"] == url


def test_captures_without_their_log_line_or_whole_record_are_counted(
    crawl: tuple[Hive, WebProcess], tmp_path: Path
) -> None:
    """A worker's crawl log gone, a redirect's record damaged: rows kept, each counted."""
    duckdb = need("duckdb")
    hive, _ = crawl
    copy = tmp_path / "data"
    shutil.copytree(hive.data, copy, ignore=shutil.ignore_patterns("lock*", "*.mdb"))
    for log in (copy / "logs").glob("crawl-00*.jsonl"):
        log.unlink()
    lines = cdxj_lines(copy)
    unlogged = sum(f["filename"].startswith("hive-00-") for _, _, f in lines)
    moved = next(f for _, _, f in lines if f["status"].startswith("3"))
    with (copy / "warc" / moved["filename"]).open("r+b") as warc:
        warc.seek(int(moved["offset"]) + 10)
        warc.write(b"\xff" * 16)
    out = tmp_path / "damaged.parquet"
    result = subprocess.run(
        hive.command("export", "--data", str(copy), "--format", "parquet", "--out", str(out)),
        env=hive.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"export: {unlogged:,} captures have no crawl-log line" in result.stderr
    assert "export: 1 records did not read at their offset" in result.stderr
    db = duckdb.connect()
    assert db.execute(f"SELECT count(*) FROM '{out}' WHERE warc_record_type IS NOT NULL "
                      "AND outcome IS NULL").fetchone() == (unlogged,)
    assert db.execute(f"SELECT fetch_redirect FROM '{out}' WHERE warc_filename = ? AND "
                      "warc_record_offset = ?", [moved["filename"], int(moved["offset"])]
                      ).fetchone() == (None,)
    assert db.execute(f"SELECT count(*) FROM '{out}' WHERE warc_record_type IS NOT NULL"
                      ).fetchone() == (len(lines),)


def test_a_damaged_index_is_named_not_a_traceback(
    crawl: tuple[Hive, WebProcess], tmp_path: Path
) -> None:
    hive, _ = crawl
    copy = tmp_path / "data"
    shutil.copytree(hive.data, copy, ignore=shutil.ignore_patterns("lock*", "*.mdb"))
    index = sorted((copy / "warc").glob("*.cdxj"))[-1]
    lines = index.read_text().splitlines(keepends=True)
    index.write_text("".join([*lines[:2], "com,example)/ 2026 {not json\n", *lines[2:]]))
    for form in ("parquet", "wacz"):
        result = subprocess.run(
            hive.command("export", "--data", str(copy), "--format", form,
                         "--out", str(tmp_path / f"out.{form}")),
            env=hive.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        where = f"{index}:3: " if form == "parquet" else "of the merged index"
        assert where in result.stderr and "not a CDXJ line" in result.stderr, result.stderr
        assert list(tmp_path.glob("out.*")) == []


def test_without_the_extra_hive_export_says_what_to_install(tmp_path: Path) -> None:
    """pyarrow hidden from the interpreter: a message naming the extra, no traceback."""
    (tmp_path / "data" / "warc").mkdir(parents=True)
    blocker = tmp_path / "blocked"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pyarrow':\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"}
    result = subprocess.run(
        [sys.executable, "-m", "cli", "export", "--data", str(tmp_path / "data"),
         "--format", "parquet", "--out", str(tmp_path / "out.parquet")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
    )
    assert result.returncode == 1
    assert "pip install 'hive-crawler[export]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.parquet").exists()
