"""CPU of the crawler's hot path per page: link extraction, canonicalization, scope.

Renders pages of the synthetic web (hive.testweb's ``Web``, the bench_crawl
unbound workload's: seed 7, 200 hosts, 5 KB pages of 20 links) in memory, then
times, in this process, what a fetch thread does with a fetched page before it
hands the links on: ``extract_links`` (parse, canonicalize every link against
the page) and the scope check of each link; with ``--embeds``, the page requisites
too. No network, no storage. Prints the best of ``--rounds`` rounds, in CPU
milliseconds per 1000 pages. Run by hand:

    python bench/bench_links.py [--pages 2000] [--rounds 5]

Run it on two checkouts in one session (same load) to compare them.
"""

from __future__ import annotations

import argparse
import time

from hive.fetch.parse import Scope, extract_links
from hive.fetch.requisites import EmbedBudget
from hive.testweb import Web


def pages(count: int) -> list[tuple[str, bytes]]:
    web = Web(seed=7, hosts=200, pages=100, hostile=False)
    out = []
    for i in range(count):
        host, page = web.names[i % len(web.names)], i // len(web.names)
        path = "/" if page == 0 else f"/p/{page}.html"
        answer = web.respond(host, path, port=80, tripwire=1)
        out.append((web.url(host, path), bytes(getattr(answer, "body", b""))))
    return out


def one_round(work: list[tuple[str, bytes]], scope: Scope, embeds: bool) -> tuple[float, int]:
    links = 0
    start = time.process_time()
    for url, body in work:
        budget = EmbedBudget(2_000_000, 2000) if embeds else None
        result = extract_links(url, body, "text/html; charset=utf-8", embeds=budget)
        for link in result.links:
            if scope.check(link, url) is None:
                links += 1
    return time.process_time() - start, links


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--embeds", action="store_true",
                        help="Also extract page requisites (hive.fetch.requisites).")
    args = parser.parse_args()
    work = pages(args.pages)
    scope = Scope("domain")
    best, links = min(one_round(work, scope, args.embeds) for _ in range(args.rounds))
    print(f"{len(work)} pages, {links} links in scope: "
          f"{best / len(work) * 1e6:.0f} CPU-ms per 1000 pages (best of {args.rounds})")


if __name__ == "__main__":
    main()
