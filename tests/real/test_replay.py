"""An archive that replays: hive crawls a site of pages with requisites (``hive start``),
``hive index`` indexes its WARCs, and pywb, a real replay client, serves every page and
every requisite the replayed pages name, byte for byte as the site served them. The images
every host serves alike are archived once, the rest of their captures being revisits, which
replay as their original; headless Chromium loads a replayed page and every requisite it
asks for, and its screenshot is kept in the test's directory.

Under ``CI=true`` a missing pywb fails the test (the ``test`` extra installs it);
elsewhere it skips.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urljoin

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive.testweb import Web, WebProcess
from tests.conftest import LAUNCHED, WEB_ADDRESS, wait_for
from tests.test_hive import Hive, finish
from tests.test_report import chromium

pytestmark = pytest.mark.slow
COLLECTION = "hive"
CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)|@import\s+["']([^"']+)""")
WARCIO = [sys.executable, "-c", "from warcio.cli import main; main()"]
# pywb's access log: the path requested and the status answered.
ACCESS = re.compile(r'"GET (\S+) HTTP/[\d.]+" (\d{3}) ')
# A replayed URL's path on pywb: the collection, the timestamp, a modifier (im_, cs_...).
REPLAYED = re.compile(rf"/{COLLECTION}/\d{{14}}(?:[a-z]{{2}}_)?/(\S+)")
# No proxy for loopback, whatever the environment says.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Requisites(HTMLParser):
    """The requisites an HTML page names: src, the 1x candidate of a srcset, stylesheets
    and icons."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag in ("img", "script", "source") and values.get("src"):
            self.urls.append(values["src"])
        for candidate in values.get("srcset", "").split(","):
            parts = candidate.split()
            if parts and parts[1:] in ([], ["1x"]):  # what a browser at 1x loads of a srcset
                self.urls.append(parts[0])
        if tag == "link" and {"stylesheet", "icon"} & set(values.get("rel", "").split()):
            self.urls.append(values["href"])


def get(url: str) -> tuple[int, bytes]:
    try:
        with OPENER.open(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except urllib.error.URLError:
        return 0, b""  # not listening yet


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def wayback() -> str:
    path = shutil.which("wayback")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("pywb's wayback is missing: install the test extra")
        pytest.skip("pywb is not installed")
    return path


@pytest.fixture
def site(tmp_path: Path) -> Iterator[WebProcess]:
    web = Web(seed=5, hosts=2, pages=3, hostile=False, robots_crawl_delay=0.1, requisites=True)
    with WebProcess(web, tmp_path / "requests.jsonl", host=WEB_ADDRESS) as server:
        yield server


def collection(tmp: Path, data: Path) -> None:
    """A pywb collection of the crawl: its WARCs (linked) and its index."""
    archive = tmp / "collections" / COLLECTION / "archive"
    indexes = tmp / "collections" / COLLECTION / "indexes"
    archive.mkdir(parents=True)
    indexes.mkdir()
    for warc in sorted((data / "warc").glob("*.warc.gz")):
        (archive / warc.name).symlink_to(warc)
    shutil.copy(data / "index.cdxj", indexes / "index.cdxj")
    (tmp / "config.yaml").write_text("framed_replay: false\n")


class Captures(NamedTuple):
    """The crawl's WARCs read by warcio: each response's payload by its record ID, the
    record ID each revisit refers to by its target URI, and by record ID of each response
    or revisit, its target URI and the fields of the metadata record concurrent to it."""

    payloads: dict[str, bytes]
    revisits: dict[str, str]
    reached: dict[str, tuple[str, dict[str, str]]]


def captures(data: Path) -> Captures:
    found = Captures({}, {}, {})
    for warc in sorted((data / "warc").glob("*.warc.gz")):
        with warc.open("rb") as f:
            for record in ArchiveIterator(f):
                headers, kind = record.rec_headers, record.rec_type
                if kind == "response":
                    found.payloads[headers["WARC-Record-ID"]] = record.content_stream().read()
                elif kind == "revisit":
                    found.revisits[headers["WARC-Target-URI"]] = headers["WARC-Refers-To"]
                if kind in ("response", "revisit"):
                    found.reached[headers["WARC-Record-ID"]] = (headers["WARC-Target-URI"], {})
                elif kind == "metadata":
                    _, fields = found.reached[headers["WARC-Concurrent-To"]]
                    lines = record.content_stream().read().decode().splitlines()
                    fields.update(line.split(": ", 1) for line in lines)
    return found


def browse(browser: str, url: str, tmp: Path) -> Path:
    """Headless Chromium loads url and leaves its screenshot in tmp."""
    shot = tmp / "replayed.png"
    result = subprocess.run(
        [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-proxy-server",
         f"--user-data-dir={tmp / 'profile'}", "--window-size=800,600",
         f"--screenshot={shot}", url],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return shot


def requested(log: str) -> dict[str, set[str]]:
    """The statuses pywb answered for each archived URL in its access log."""
    answered: dict[str, set[str]] = {}
    for path, status in ACCESS.findall(log):
        match = REPLAYED.match(path)
        if match is not None:
            url = match.group(1)
            url = "http:" + url if url.startswith("//") else url
            answered.setdefault(url, set()).add(status)
    return answered


def serve(tmp: Path, wayback: str) -> str:
    """pywb serving the collection in tmp, its access log in tmp/wayback.err: its URL."""
    port = free_port()
    with (tmp / "wayback.err").open("w") as err:
        server = subprocess.Popen(
            [wayback, "-p", str(port), "-b", "127.0.0.1", "-t", "2"], cwd=tmp,
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, text=True,
        )
    LAUNCHED.append(server)
    replay = f"http://127.0.0.1:{port}/{COLLECTION}"
    wait_for(lambda: get(f"{replay}/")[0] in (200, 404), timeout=20, interval=0.2)
    return replay


def replayed_requisites(
    replay: str, times: dict[str, str], page: str, skip: set[str]
) -> dict[str, bytes]:
    """Every requisite a replayed page names, itself or through its stylesheets, but those
    in skip, and its replayed bytes; each must replay with a 200."""
    status, body = get(f"{replay}/{times[page]}id_/{page}")
    assert status == 200, page
    parser = Requisites()
    parser.feed(body.decode())
    queue = [urljoin(page, url) for url in parser.urls]
    found: dict[str, bytes] = {}
    while queue:
        url = queue.pop()
        if url in found or url in skip:
            continue
        status, found[url] = get(f"{replay}/{times[url]}id_/{url}")
        assert status == 200, url
        if url.endswith(".css"):
            queue += [urljoin(url, a or b) for a, b in CSS_URL.findall(found[url].decode())]
    return found


def test_a_crawl_replays_in_pywb(tmp_path: Path, site: WebProcess, wayback: str) -> None:
    browser = chromium()
    # Every image the hosts share is archived once: the test web's images are small.
    hive = Hive(tmp_path, site, politeness={"min_delay": 0.05}, warc={"revisit_min_bytes": 1,
                                                                    "metadata_records": True})
    finish(hive.start(1), timeout=40)
    warcs = sorted((hive.data / "warc").glob("*.warc.gz"))
    check = subprocess.run([*WARCIO, "check", "-v", *map(str, warcs)],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    payloads, revisits, reached = captures(hive.data)
    logo = {urljoin(page, "/static/logo.png") for page in site.seeds()}
    assert logo & revisits.keys(), "the hosts' one logo should be archived once"
    # Each capture's metadata record says how its URL was reached, as Heritrix's does.
    how = dict(reached.values())
    assert len(how) == len(reached), "one capture per URL"
    for seed in site.seeds():
        assert how[seed] == {"hopsFromSeed": ""}
        assert how[urljoin(seed, "/robots.txt")] == {"hopsFromSeed": "P"}
        assert how[urljoin(seed, "/static/site.css")]["hopsFromSeed"].endswith("E")
        assert how[urljoin(seed, "/static/theme.css")] == {
            "via": urljoin(seed, "/static/site.css"),
            "hopsFromSeed": how[urljoin(seed, "/static/site.css")]["hopsFromSeed"] + "E",
        }
    font = site.web.url(site.web.static, "/cdn/hive.woff2", site.port)
    assert how[font]["hopsFromSeed"].endswith("EEE") and how[font]["via"].endswith("theme.css")
    indexed = hive.run("index")
    assert indexed.returncode == 0, indexed.stderr
    collection(tmp_path, hive.data)
    times = {}
    for line in (hive.data / "index.cdxj").read_text().splitlines():
        _, stamp, fields = line.split(" ", 2)
        times[json.loads(fields)["url"]] = stamp
    replay = serve(tmp_path, wayback)

    web, pages = site.web, sorted(site.in_scope_urls())
    forbidden = web.forbidden_requisites(site.port)
    replayed: dict[str, bytes] = {}
    for page in pages:
        replayed.update(replayed_requisites(replay, times, page, forbidden | replayed.keys()))
    assert replayed.keys() == web.requisite_urls(site.port)
    for url, body in replayed.items():
        host, _, path = url.removeprefix("http://").partition("/")
        served = web.respond(host.partition(":")[0], "/" + path, port=site.port, tripwire=0)
        assert body == served.body, url  # type: ignore[union-attr]
    # A revisit replays as its original: the payload archived once, with a 200.
    for url, original in sorted(revisits.items()):
        assert get(f"{replay}/{times[url]}id_/{url}") == (200, payloads[original]), url
    # The rewritten replay of a page (what a browser loads) names its requisites in the archive.
    home = pages[0]
    status, body = get(f"{replay}/{times[home]}mp_/{home}")
    assert status == 200 and f"/{COLLECTION}/".encode() in body

    # A browser shows a page whose logo is a revisit, and all it asks for is replayed: every
    # requisite the page names (of a srcset, the 1x image), and nothing else but what was
    # never archived (the forbidden image, the browser's own favicon) and pages of the
    # archive, which a browser may fetch ahead of a click (seen once in CI).
    page = next(p for p in pages if urljoin(p, "/static/logo.png") in revisits)
    before = (tmp_path / "wayback.err").read_text()
    shot = browse(browser, f"{replay}/{times[page]}/{page}", tmp_path)
    loaded = requested((tmp_path / "wayback.err").read_text().removeprefix(before))
    named = replayed_requisites(replay, times, page, forbidden)
    wanted = {page, *named} - {url for url in named if url.endswith("@2x.png")}
    assert wanted <= {url for url, statuses in loaded.items() if statuses == {"200"}}
    assert loaded.keys() - wanted - set(pages) <= forbidden | {urljoin(page, "/favicon.ico")}
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and shot.stat().st_size > 10_000
