"""Memory and CPU of reading one full sitemap file (50,000 URLs), plain and gzipped.

Builds a urlset of ``MAX_URLS`` entries (loc, lastmod, priority, changefreq;
~7 MB), then reads it with ``SitemapReader`` as a worker would, the fetched body
in hand, counting the entries and keeping none. Prints the CPU time and the peak
of memory the reading allocated (tracemalloc, the body itself excluded; tracing
slows the reading, so CPU is timed in a separate untraced pass). Run by hand:

    python bench/bench_sitemaps.py
"""

from __future__ import annotations

import gzip
import time
import tracemalloc

from hive.fetch.sitemaps import MAX_URLS, SitemapReader
from hive.testweb.sitemaps import SitemapWeb


def read(body: bytes) -> int:
    reader = SitemapReader("http://sm-oversize.test/sitemap.xml")
    count = sum(1 for _ in reader.read(body))
    assert reader.error is None
    return count


def main() -> None:
    web = SitemapWeb()
    doc = web.respond(web.host("oversize"), "/sitemap.xml")
    assert doc is not None
    # Drop the one entry past the limit: a full, valid file.
    plain = doc.body[: doc.body.rindex(b"<url>")] + b"</urlset>\n"
    for name, body in (("plain", plain), ("gzip", gzip.compress(plain, 6))):
        start = time.process_time()
        count = read(body)
        cpu = time.process_time() - start
        tracemalloc.start()
        read(body)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == MAX_URLS
        print(f"{name:5} {len(body) / 1e6:5.1f} MB, {count} URLs: {cpu:.2f} s CPU, "
              f"peak {peak / 1024:.0f} KiB allocated while reading")


if __name__ == "__main__":
    main()
