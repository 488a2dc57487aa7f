"""The Scrapy row of bench_crawl.py: a plain spider over the synthetic web, in a process of its own.

    python bench/scrapy_crawl.py --seeds FILE --hosts FILE --address 127.0.0.2 \
        --domain web.test --delay 0.02 [--concurrency 64] [--timeout 600]

bench_crawl.py runs it as a child, so its CPU is that of a child process. The
spider follows every ``<a href>`` of every page from the seeds, inside the
web's hosts (``allowed_domains``), with what a polite Scrapy crawl sets:
ROBOTSTXT_OBEY, one request per host at a time, a fixed per-host delay
(DOWNLOAD_DELAY without jitter), CONCURRENT_REQUESTS in all, and an honest
User-Agent. Every name of the web resolves to ``--address`` through
:class:`WebResolver`, installed on Twisted's reactor. Pages are only counted;
the crawl stops by itself or after ``--timeout`` seconds (CLOSESPIDER_TIMEOUT).
It prints one JSON line: pages parsed, Scrapy's finish reason, robots.txt
refusals, retries and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.http import Response
from scrapy.settings import default_settings
from twisted.internet import defer
from twisted.internet.base import ReactorBase
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer  # type: ignore[import-untyped]

# Scrapy 2.19 renamed these; the old names still work there, with a deprecation warning.
RESOLVER_SETTING = (
    "TWISTED_DNS_RESOLVER" if hasattr(default_settings, "TWISTED_DNS_RESOLVER") else "DNS_RESOLVER"
)
NO_JITTER = (
    {"DOWNLOAD_DELAY_JITTER": 0}
    if hasattr(default_settings, "DOWNLOAD_DELAY_JITTER")
    else {"RANDOMIZE_DOWNLOAD_DELAY": False}
)


@implementer(IResolverSimple)
class WebResolver:
    """Resolves the web's domain and every name under it to one address; anything else fails."""

    def __init__(self, reactor: ReactorBase, domain: str, address: str) -> None:
        self.reactor = reactor
        self.domain = domain
        self.address = address

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: ReactorBase) -> WebResolver:
        settings = crawler.settings
        return cls(reactor, settings["BENCH_WEB_DOMAIN"], settings["BENCH_WEB_ADDRESS"])

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)  # type: ignore[arg-type]  # zope, not a Protocol

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        name = name.lower().rstrip(".")
        if name == self.domain or name.endswith("." + self.domain):
            return defer.succeed(self.address)
        return defer.fail(DNSLookupError(name))


class FollowAll(scrapy.Spider):
    """Follows every ``<a href>`` to http(s); counts the pages it parses and keeps nothing else.

    The seeds go through the duplicate filter like any link (Scrapy's default
    ``start`` marks them ``dont_filter``, which fetches every host's ``/`` twice).
    """

    name = "follow-all"

    def __init__(self, seeds: list[str], hosts: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = seeds
        self.allowed_domains = hosts
        self.pages = 0

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.seeds:
            yield scrapy.Request(url, self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        self.pages += 1
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            # mailto:, javascript: and the like are not for a crawler (and scrapy.Request
            # raises on a URL without "://").
            if url.startswith(("http://", "https://")):
                yield scrapy.Request(url, self.parse)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=Path, required=True, help="one start URL a line")
    parser.add_argument("--hosts", type=Path, required=True, help="allowed host names, one a line")
    parser.add_argument("--address", required=True, help="every name of the web resolves here")
    parser.add_argument("--domain", required=True, help="the web's domain")
    parser.add_argument("--delay", type=float, required=True, help="seconds between requests")
    parser.add_argument("--concurrency", type=int, default=64, help="CONCURRENT_REQUESTS")
    parser.add_argument("--timeout", type=float, default=600.0, help="CLOSESPIDER_TIMEOUT")
    args = parser.parse_args()
    settings: dict[str, Any] = {
        "USER_AGENT": f"Scrapy/{scrapy.__version__} (hive bench_crawl.py; "
                      "+https://hive-crawler.invalid/bot)",
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": args.delay,
        **NO_JITTER,
        "CLOSESPIDER_TIMEOUT": args.timeout,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        RESOLVER_SETTING: f"{__name__}.WebResolver",
        "BENCH_WEB_DOMAIN": args.domain.lower(),
        "BENCH_WEB_ADDRESS": args.address,
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(FollowAll)
    process.crawl(crawler, seeds=args.seeds.read_text().split(),
                  hosts=args.hosts.read_text().split())
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    spider = crawler.spider
    print(json.dumps({
        "pages": spider.pages if isinstance(spider, FollowAll) else 0,
        "finish_reason": str(stats.get("finish_reason", "")),
        "robots_forbidden": int(stats.get("robotstxt/forbidden", 0)),
        "retries": int(stats.get("retry/count", 0)),
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


if __name__ == "__main__":
    main()
