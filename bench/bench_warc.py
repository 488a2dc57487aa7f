"""What a metadata record (via, hopsFromSeed) adds to each fetch's WARC records.

Writes the same exchanges (a ~5 KB page, as the crawl bench's pages) with
``metadata_records`` on and off, in alternating rounds, into a temporary directory, and
reports the least CPU microseconds per exchange of each (best of the rounds: the machine
is shared), their difference, the cost of building and compressing the record alone, and
the bytes it adds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hive.fetch.warc import WarcWriter
from hive.fetch.warc_records import gzip_member, metadata_record, record_id

BODY = (b"<!doctype html><html><body>" + b"<p>lorem ipsum dolor sit amet</p>\n" * 150)[:5000]
URL = "http://h017.web.test:8080/p/42.html"
VIA = "http://h017.web.test:8080/p/7.html"
REQUEST = (b"GET /p/42.html HTTP/1.1\r\nHost: h017.web.test:8080\r\nUser-Agent: hive/0.1\r\n"
           b"Accept: */*\r\nAccept-Encoding: gzip\r\n\r\n")
HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(BODY)))]


def round_us(directory: Path, metadata: bool, n: int) -> tuple[float, int]:
    """CPU microseconds per exchange and bytes written, for n exchanges."""
    with WarcWriter(directory, f"bench-{int(metadata)}", 10**12, 1, "bench",
                    metadata_records=metadata) as writer:
        start = time.process_time()
        for _ in range(n):
            writer.write_exchange(
                url=URL, ip="127.0.0.2", request=REQUEST, status_line="HTTP/1.1 200 OK",
                response_headers=HEADERS, body=BODY, via=VIA, hop_path="LLL",
            )
        spent = time.process_time() - start
        size = writer.stats()["warc/bytes"]
    return spent / n * 1e6, size // n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--exchanges", type=int, default=5000, help="per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    on: list[float] = []
    off: list[float] = []
    sizes = {True: 0, False: 0}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for metadata, times in ((True, on), (False, off)):
                directory = Path(tmp) / f"{r}-{int(metadata)}"
                us, sizes[metadata] = round_us(directory, metadata, args.exchanges)
                times.append(us)
    alone = []
    for _ in range(args.rounds):
        start = time.process_time()
        for _ in range(args.exchanges):
            gzip_member(metadata_record(URL, "2026-12-01T12:00:00.000000Z", record_id(),
                                        VIA, "LLL"), 1)
        alone.append((time.process_time() - start) / args.exchanges * 1e6)
    print(f"exchange, metadata off   {min(off):7.1f} us  {sizes[False]} bytes")
    print(f"exchange, metadata on    {min(on):7.1f} us  {sizes[True]} bytes")
    print(f"difference               {min(on) - min(off):7.1f} us"
          f"  {sizes[True] - sizes[False]} bytes")
    print(f"record built + gzipped   {min(alone):7.1f} us (its record ID included)")


if __name__ == "__main__":
    main()
