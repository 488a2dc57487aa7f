"""A link farm of 10,000 subdomains of one registered domain, crawled by a real hive: the
hosts it reaches, at the server's request log, are at most scope.max_hosts_per_domain;
the refusals are counted under the domain in status and the batch's last line, and the
stores pass hive verify (their domain rows are the sums of their host records)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, wait_for
from tests.test_hive import Hive, finish

pytestmark = pytest.mark.slow
CAP, FARM = 25, 10_000


def test_a_link_farm_gets_at_most_its_cap_of_hosts(tmp_path: Path) -> None:
    web_def = Web(seed=2, hosts=2, pages=3, hostile=False, farm=FARM)
    with WebProcess(web_def, tmp_path / "requests.jsonl", host=WEB_ADDRESS) as web:
        hive = Hive(tmp_path, web, scope={"max_hosts_per_domain": CAP},
                    dns={"resolve": [web.resolve, f"*.{web_def.farm_domain}={WEB_ADDRESS}"]})
        with hive.seeds.open("a") as seeds:
            seeds.write(web_def.farm_seed(web.port) + "\n")
        process = hive.start(2)

        def refused() -> int:
            status = hive.status() or {"processes": []}
            return sum(row.get("stats", {}).get("refusals/max_hosts_per_domain", 0)
                       for row in status["processes"])

        assert wait_for(refused, timeout=60)
        table = hive.run("status")
        assert "max_hosts_per_domain" in table.stdout, table.stdout
        ended = next(line for line in finish(process, timeout=180).splitlines()
                     if line.startswith("hive stopped:"))
        reached = web_def.farm_hosts(web.requests)
    assert len(reached) == CAP, sorted(reached)
    assert "max_hosts_per_domain" in ended and "example.com" in ended, ended
    assert hive.state()["ring"]["key"] == "domain"
    verified = hive.run("verify")
    assert verified.returncode == 0, verified.stdout
    # The report names the farm's domain among the busiest, with its hosts and refusals.
    made = hive.run("report", "--out", str(tmp_path / "report.html"), timeout=120)
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "report.html").read_text()
    section = page[page.index('id="domains"'):page.index('id="refusals"')]
    row = re.search(r"<td>example\.com</td>((?:<td[^>]*>[^<]*</td>)+)", section)
    assert row is not None, section[:3000]
    cells = [int(c.replace(",", "")) for c in re.findall(r">([\d,]+)<", row.group(1))]
    fetched, pages, hosts, refused_hosts, refused_pages = cells
    assert (hosts, pages, refused_pages) == (CAP, CAP, 0) and fetched == CAP
    assert refused_hosts > 0
    # The normal hosts (their own domains: an unknown TLD) were crawled whole.
    fetched = {r.url for r in web.requests if r.method == "GET"}
    assert web.in_scope_urls() <= fetched
