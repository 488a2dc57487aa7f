"""A recrawl at a real server: nginx serving a copy of python3-doc's tutorial, crawled, then
changed (10 % of pages edited, two deleted, one added and linked from an edited one, one
made a redirect to it, one touched: a new time, the same bytes), then crawled again with
``--recrawl-from``, and again from both crawls.

Judged at the server, from nginx's access log, whose format here records the request's
``If-None-Match`` and ``If-Modified-Since``: the recrawl asks for every page the first
crawl had, each conditional on the ETag and Last-Modified nginx gave it then; nginx
answers 304 for the pages left alone, 200 for the edited ones, 404 for the deleted, 301
for one made a redirect, and the added page is asked for unconditionally; no two requests
overlap and none comes sooner than the delay. ``hive changes`` counts exactly what was done.

Under ``CI=true`` a missing nginx or python3-doc fails the test (``.ci/run`` installs
both); elsewhere it skips.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive import config
from hive.core.prior import Prior
from hive.testweb import Request, politeness_violations
from tests.conftest import LAUNCHED, wait_for
from tests.real.conftest import ADDRESS, docs_html, free_ports, listening, nginx_binary, unavailable
from tests.real.test_replay import COLLECTION, get, serve
from tests.real.test_replay import wayback as pywb  # noqa: F401 (a fixture: its path)
from tests.test_hive import write_config

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
HOST = "docs.recrawl.test"
DELAY = 0.05
STAMP_ROUNDING = 0.002
LOG_FORMAT = (
    '{"msec": $msec, "request_time": $request_time, "request": "$request", '
    '"status": $status, "inm": "$http_if_none_match", "ims": "$http_if_modified_since", '
    '"etag": "$sent_http_etag", "lm": "$sent_http_last_modified", "bytes": $body_bytes_sent}'
)


class Site:
    """nginx serving ``root`` on ADDRESS, logging each request with its validators."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root = folder / "site"
        self.log = folder / "access.jsonl"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def redirects(self) -> Path:
        return self.folder / "redirects.conf"

    def redirect(self, path: str, target: str) -> None:
        """Make ``path`` a 301 to ``target`` (nginx reloads its config on SIGHUP); return once
        nginx answers so (asked with HEAD, which hive never sends)."""
        assert self.process is not None
        self.redirects.write_text(f"location = {path} {{ return 301 {target}; }}\n")
        self.process.send_signal(signal.SIGHUP)

        def moved() -> bool:
            with socket.create_connection((ADDRESS, self.port), timeout=5) as sock:
                sock.sendall(f"HEAD {path} HTTP/1.0\r\nHost: {HOST}\r\n\r\n".encode())
                return sock.recv(64).startswith(b"HTTP/1.1 301")

        assert wait_for(moved, timeout=20), "nginx did not reload"

    def start(self, tries: int = 3) -> None:
        """Start on a free port; another process may take it between the probe and nginx's
        bind, so a start whose nginx exits is tried again on another."""
        for _ in range(tries):
            self.process = self._launch(free_ports(1)[0])
            if wait_for(self._up, timeout=20) == "up":
                return
        raise AssertionError(f"nginx did not start: {(self.folder / 'e.log').read_text()}")

    def _up(self) -> str | None:
        """"exited" if nginx did, "up" once it listens, None while neither."""
        assert self.process is not None
        if self.process.poll() is not None:
            return "exited"
        return "up" if listening(self.port) else None

    def _launch(self, port: int) -> subprocess.Popen[bytes]:
        binary = nginx_binary()
        self.port = port
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        temp = self.folder / "temp"
        temp.mkdir(exist_ok=True)
        self.redirects.write_text("")
        conf = self.folder / "nginx.conf"
        conf.write_text(
            f"{user}worker_processes 1;\ndaemon off;\npid {self.folder / 'nginx.pid'};\n"
            f"error_log {self.folder / 'error.log'} info;\nevents {{ worker_connections 64; }}\n"
            "http {\n    types { text/html html; }\n"
            + "".join(f"    {kind}_temp_path {temp / kind};\n"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + f"    log_format recrawl escape=json '{LOG_FORMAT}';\n"
            f"    access_log {self.log} recrawl;\n"
            f"    server {{ listen {ADDRESS}:{self.port}; server_name {HOST}; "
            f"root {self.root}; include {self.redirects}; }}\n}}\n"
        )
        return subprocess.Popen(
            [binary, "-p", str(self.folder), "-c", str(conf), "-e", str(self.folder / "e.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def hits(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text().splitlines():
            hit = json.loads(line)
            hit["method"], hit["path"] = hit["request"].split(" ")[:2]
            hit["end"] = float(hit["msec"])
            hit["start"] = hit["end"] - float(hit["request_time"])
            if hit["method"] == "GET":
                out.append(hit)
        return out


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    docs = docs_html()
    if docs is None:
        unavailable("python3-doc")
    server = Site(tmp_path / "nginx")
    tutorial = server.root / "tutorial"
    tutorial.mkdir(parents=True)
    for page in sorted((docs / "tutorial").glob("*.html")):
        shutil.copy2(page, tutorial / page.name)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def start(site: Site, tmp: Path, name: str, *extra: str) -> Path:
    """``hive start`` over the tutorial to its end; returns the data directory."""
    cfg = config.load(environ={}).replace(
        dns={"resolve": [f"{HOST}={ADDRESS}"], "allow_nets": [f"{ADDRESS}/32"]},
        politeness={"min_delay": DELAY, "max_delay": 0.1},
        fetch={"threads": 4},
        scope={"allow": [r"/tutorial/"], "embeds": "off"},
        frontier={"sync_interval": 0.5},
    )
    data = tmp / name
    seeds = tmp / "seeds.txt"
    seeds.write_text(f"{site.origin}/tutorial/index.html\n")
    out = tmp / f"{name}.out"
    with out.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "--config", str(write_config(cfg, tmp / "hive.toml")),
             "start", "--procs", "2", "--data", str(data), "--seeds", str(seeds), "--quiet",
             *extra],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True)
    LAUNCHED.append(process)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"hive did not finish:\n{out.read_text()[-3000:]}") from None
    assert process.returncode == 0, out.read_text()[-3000:]
    return data


def edit(page: Path) -> None:
    """Change a page's content, and its time, as a site's edit does."""
    text = page.read_text()
    page.write_text(text.replace("</body>", "<p>Edited for the recrawl.</p></body>"))
    stat = page.stat()
    os.utime(page, (stat.st_atime, stat.st_mtime + 60))


def hive(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr


def records(data: Path) -> dict[str, dict[str, str]]:
    """Each response's or revisit's WARC fields, by target URI."""
    found = {}
    for warc in sorted((data / "warc").glob("*.warc.gz")):
        with warc.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("response", "revisit"):
                    found[record.rec_headers["WARC-Target-URI"]] = dict(
                        record.rec_headers.headers)
    return found


def replays(tmp: Path, wayback: str, crawls: list[Path]) -> str:
    """pywb serving both crawls' WARCs and their indexes, merged, as one collection."""
    archive = tmp / "collections" / COLLECTION / "archive"
    indexes = tmp / "collections" / COLLECTION / "indexes"
    archive.mkdir(parents=True)
    indexes.mkdir()
    lines = []
    for data in crawls:
        hive("index", "--data", str(data))
        lines += (data / "index.cdxj").read_text().splitlines()
        for warc in sorted((data / "warc").glob("*.warc.gz")):
            (archive / warc.name).symlink_to(warc)
    (indexes / "index.cdxj").write_text("".join(f"{line}\n" for line in sorted(lines)))
    (tmp / "config.yaml").write_text("framed_replay: false\n")
    return serve(tmp, wayback)


def test_a_recrawl_asks_conditionally_and_counts_what_changed(
    site: Site, tmp_path: Path, pywb: str,  # noqa: F811 (the fixture imported above)
) -> None:
    crawl1 = start(site, tmp_path, "crawl1")
    first = site.hits()
    served = {path: (site.root / path.lstrip("/")).read_bytes()
              for path in (hit["path"] for hit in first) if path.endswith(".html")}
    had = {hit["path"]: hit for hit in first if hit["status"] == 200
           and hit["path"].startswith("/tutorial/")}
    pages = sorted(had)
    assert len(pages) >= 15, pages

    # 10 % of the pages edited (the index among them, where the new page is linked), two
    # deleted, one added.
    tutorial = site.root / "tutorial"
    others = [path for path in pages if path != "/tutorial/index.html"]
    edited = ["/tutorial/index.html", others[3]]
    deleted = [others[5], others[7]]
    for path in edited:
        edit(site.root / path.lstrip("/"))
    index = tutorial / "index.html"
    index.write_text(index.read_text().replace(
        "</body>", '<a href="whatsnew-recrawl.html">new</a></body>'))
    (tutorial / "whatsnew-recrawl.html").write_text(
        "<!DOCTYPE html><html><head><title>New</title></head><body>A new page.</body></html>")
    for path in deleted:
        (site.root / path.lstrip("/")).unlink()
    # One page moved: a redirect to the new page.
    moved = others[9]
    site.redirect(moved, "/tutorial/whatsnew-recrawl.html")
    # One page touched, not changed: a new ETag and time, the same payload.
    touched = others[1]
    stat = (site.root / touched.lstrip("/")).stat()
    os.utime(site.root / touched.lstrip("/"), (stat.st_atime, stat.st_mtime + 60))

    crawl2 = start(site, tmp_path, "crawl2", "--recrawl-from", str(crawl1))
    second = site.hits()[len(first):]
    asked = {hit["path"]: hit for hit in second if hit["path"].startswith("/tutorial/")}

    # Every page crawl1 had asked for again, conditional on what nginx said then.
    assert sorted(set(pages) - set(asked)) == []
    for path in pages:
        hit = asked[path]
        assert hit["inm"] == had[path]["etag"], (path, hit)
        assert hit["ims"] == had[path]["lm"], (path, hit)
        expected = (200 if path in edited + [touched] else 404 if path in deleted
                    else 301 if path == moved else 304)
        assert hit["status"] == expected, (path, hit["status"], expected)
    new = asked["/tutorial/whatsnew-recrawl.html"]
    assert new["status"] == 200 and new["inm"] == "" and new["ims"] == ""
    unchanged = len(pages) - len(edited) - len(deleted) - 1
    assert sum(hit["status"] == 304 for hit in second) == unchanged - 1

    # Polite: no overlap, the delay kept.
    requests = [Request(HOST, hit["path"], "GET", hit["status"], hit["start"], hit["end"],
                        ADDRESS) for hit in second]
    assert not politeness_violations(requests, DELAY, tolerance=STAMP_ROUNDING)

    # The change feed says what was done.
    feed = tmp_path / "changes.jsonl"
    hive("changes", "--data", str(crawl2), "--out", str(feed))
    lines = [json.loads(line) for line in feed.read_text().splitlines()]
    by_url = {line["url"].removeprefix(site.origin): line for line in lines}
    counts = {change: sum(line["change"] == change for line in lines)
              for change in ("new", "changed", "unchanged", "gone", "moved")}
    assert counts == {"new": 1, "changed": len(edited), "unchanged": unchanged,
                      "gone": len(deleted), "moved": 1}, counts
    assert by_url[moved]["location"] == f"{site.origin}/tutorial/whatsnew-recrawl.html"
    assert by_url[edited[1]]["evidence"] == "new_digest"
    assert by_url[deleted[0]]["evidence"] == "status"
    assert (by_url[touched]["change"], by_url[touched]["evidence"]) == ("unchanged", "same_digest")
    hive("report", "--data", str(crawl2), "--out", str(tmp_path / "report.html"))
    page = (tmp_path / "report.html").read_text()
    assert "Changes since the prior crawls" in page
    assert f'<td>unchanged</td><td class="n">{unchanged}</td>' in page
    unchanged_line = by_url[others[0]]
    assert unchanged_line["evidence"] == "304"
    assert unchanged_line["validators"]["etag"].startswith('"')
    assert unchanged_line["prior_date"] < unchanged_line["date"]

    # A 304 is a server-not-modified revisit of crawl1's capture, which pywb replays as it.
    url = site.origin + others[0]
    before, after = records(crawl1)[url], records(crawl2)[url]
    assert after["WARC-Type"] == "revisit"
    assert after["WARC-Profile"] == (
        "http://netpreserve.org/warc/1.1/revisit/server-not-modified")
    assert after["WARC-Refers-To-Target-URI"] == url
    assert after["WARC-Refers-To-Date"] == before["WARC-Date"]
    assert after["WARC-Refers-To"] == before["WARC-Record-ID"]
    assert after["WARC-Payload-Digest"] == before["WARC-Payload-Digest"]
    # A 200 of crawl1's payload is an identical-payload-digest revisit of crawl1's capture.
    again = records(crawl2)[site.origin + touched]
    assert again["WARC-Type"] == "revisit"
    assert again["WARC-Profile"].endswith("/identical-payload-digest")
    assert again["WARC-Refers-To"] == records(crawl1)[site.origin + touched]["WARC-Record-ID"]
    replay = replays(tmp_path / "pywb", pywb, [crawl1, crawl2])
    stamp = after["WARC-Date"].replace("-", "").replace(":", "").replace("T", "")[:14]
    assert get(f"{replay}/{stamp}id_/{url}") == (200, served[others[0]])

    # A recrawl from both: its plan keeps each page's history (crawl1's capture, then
    # crawl2's) and the validators nginx gave crawl2, so the edited pages are 304 now.
    crawl3 = start(site, tmp_path, "crawl3", "--recrawl-from", str(crawl1), "--recrawl-from",
                   str(crawl2))
    plan = {Prior.decode(line).url.removeprefix(site.origin): Prior.decode(line)
            for line in (crawl3 / "recrawl.jsonl").read_bytes().splitlines()}
    assert (plan[edited[1]].seen, plan[edited[1]].changed) == (2, 1)
    assert (plan[others[0]].seen, plan[others[0]].changed) == (2, 0)
    assert (plan[deleted[0]].seen, plan[deleted[0]].changed, plan[deleted[0]].status) == (
        2, 1, 404)
    assert plan["/tutorial/whatsnew-recrawl.html"].seen == 1
    third = {hit["path"]: hit for hit in site.hits()[len(first) + len(second):]}
    assert third[edited[1]]["inm"] == asked[edited[1]]["etag"] != had[edited[1]]["etag"]
    assert third[edited[1]]["status"] == 304
