"""``python -m hive.testweb``: serve a synthetic web in a process of its own (for benchmarks)::

    python -m hive.testweb --port 0 --hosts 200 --pages 100 --log FILE

prints the port on stdout's first line, appends the request log to FILE as JSON
lines, and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from hive.testweb.cookies import CookieWeb
from hive.testweb.graph import Web
from hive.testweb.server import serve


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hive.testweb``: serve a web until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m hive.testweb", description=main.__doc__)
    # Not 127.0.0.1: that is the tripwire's, and a crawl allowed only the web's address
    # (--allow-net 127.0.0.2/32) proves it never strays to other loopback services.
    parser.add_argument("--host", default="127.0.0.2", help="address to listen on")
    parser.add_argument("--also", action="append", default=[],
                        help="also serve the web at this address, on the same port (repeat)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=20, help="pages per host")
    parser.add_argument("--links", type=int, default=20, help="links per page")
    parser.add_argument("--cross-host", type=float, default=0.2, help="share of cross-host links")
    parser.add_argument("--page-bytes", type=int, default=5000)
    parser.add_argument("--domain", default="web.test")
    parser.add_argument("--no-hostile", action="store_true", help="leave the hostile hosts out")
    parser.add_argument("--requisites", action="store_true",
                        help="pages embed stylesheets, images, a script and a font")
    parser.add_argument("--crawl-delay", type=float, default=0.5, help="that robots variant's")
    parser.add_argument("--copies", type=int, default=0,
                        help="copy pages per host, one body on every host")
    parser.add_argument("--broken", type=int, default=0,
                        help="pages per host that answer 500 for ever, linked from /")
    parser.add_argument("--farm", type=int, default=0,
                        help="also serve a link farm of this many hosts (s<n>.<farm domain>)")
    parser.add_argument("--farm-domain", default="example.com")
    parser.add_argument("--sitemaps", action="store_true",
                        help="also serve the sitemap and feed hosts (sm-<kind>.<domain>)")
    parser.add_argument("--cookie-hosts", type=int, default=0,
                        help="also serve this many cookie hosts (ck-<i>.<domain>)")
    parser.add_argument("--cookie-count", type=int, default=49, help="big cookies a host sets")
    parser.add_argument("--cookie-bytes", type=int, default=64_000, help="bytes of each")
    parser.add_argument("--cookie-pages", type=int, default=3,
                        help="pages a cookie host serves after setting them")
    parser.add_argument("--log", type=Path, help="append the request log here as JSON lines")
    args = parser.parse_args(argv)
    web = Web(
        args.seed, args.hosts, args.pages, args.links, args.cross_host, args.page_bytes,
        args.domain, not args.no_hostile, args.crawl_delay, args.copies,
        args.requisites, args.broken, args.farm, args.farm_domain,
    )
    # Hand the GIL over often, so a handler stamps a response's end soon after sending it.
    sys.setswitchinterval(0.0005)
    stop = {signal.SIGTERM, signal.SIGINT}
    # Blocked before the server threads start, so they inherit the mask and only sigwait sees them.
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    cookies = (CookieWeb(args.domain, args.cookie_hosts, args.cookie_count, args.cookie_bytes,
                         args.cookie_pages) if args.cookie_hosts else None)
    with serve(web, args.host, args.port, args.log, args.sitemaps, cookies,
               also=tuple(args.also)) as server:
        print(server.port, flush=True)
        signal.sigwait(stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
