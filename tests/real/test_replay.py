"""An archive that replays: hive crawls a site of pages with requisites (``hive start``),
``hive index`` indexes its WARCs, and pywb, a real replay client, serves every page and
every requisite the replayed pages name, byte for byte as the site served them.

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
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest

from hive.testweb import Web, WebProcess
from tests.conftest import LAUNCHED, WEB_ADDRESS, wait_for
from tests.test_hive import Hive, finish

pytestmark = pytest.mark.slow
COLLECTION = "hive"
CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)|@import\s+["']([^"']+)""")
# No proxy for loopback, whatever the environment says.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Requisites(HTMLParser):
    """The requisites an HTML page names: src, srcset, stylesheets and icons."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag in ("img", "script", "source") and values.get("src"):
            self.urls.append(values["src"])
        for candidate in values.get("srcset", "").split(","):
            if candidate.strip():
                self.urls.append(candidate.split()[0])
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


def test_a_crawl_replays_in_pywb(tmp_path: Path, site: WebProcess, wayback: str) -> None:
    hive = Hive(tmp_path, site, politeness={"min_delay": 0.05})
    finish(hive.start(1), timeout=40)
    indexed = hive.run("index")
    assert indexed.returncode == 0, indexed.stderr
    collection(tmp_path, hive.data)
    times = {}
    for line in (hive.data / "index.cdxj").read_text().splitlines():
        _, stamp, fields = line.split(" ", 2)
        times[json.loads(fields)["url"]] = stamp
    port = free_port()
    with (tmp_path / "wayback.err").open("w") as err:
        server = subprocess.Popen(
            [wayback, "-p", str(port), "-b", "127.0.0.1", "-t", "2"], cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, text=True,
        )
    LAUNCHED.append(server)
    replay = f"http://127.0.0.1:{port}/{COLLECTION}"
    wait_for(lambda: get(f"{replay}/")[0] in (200, 404), timeout=20, interval=0.2)

    web, pages = site.web, site.in_scope_urls()
    forbidden = web.forbidden_requisites(site.port)
    checked: set[str] = set()
    for page in sorted(pages):
        status, body = get(f"{replay}/{times[page]}id_/{page}")
        assert status == 200, page
        parser = Requisites()
        parser.feed(body.decode())
        queue = [urljoin(page, url) for url in parser.urls]
        while queue:
            url = queue.pop()
            if url in checked or url in forbidden:
                continue
            checked.add(url)
            status, replayed = get(f"{replay}/{times[url]}id_/{url}")
            assert status == 200, url
            host, _, path = url.removeprefix("http://").partition("/")
            served = web.respond(host.partition(":")[0], "/" + path, port=site.port, tripwire=0)
            assert replayed == served.body, url  # type: ignore[union-attr]
            if url.endswith(".css"):
                queue += [urljoin(url, a or b) for a, b in CSS_URL.findall(replayed.decode())]
    assert checked == web.requisite_urls(site.port)
    # The rewritten replay of a page (what a browser loads) names its requisites in the archive.
    home = site.seeds()[0]
    status, body = get(f"{replay}/{times[home]}mp_/{home}")
    assert status == 200 and f"/{COLLECTION}/".encode() in body
