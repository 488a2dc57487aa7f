"""Main text and language of a page: which extractor and which detector, by measurement.

Real pages from Debian's packages, no network:

- **Main text** — the Python documentation (``python3-doc``: Sphinx pages whose
  main content is ``div[role=main]``, beside a sidebar, a header and footer of
  navigation). Each extractor's text is judged against that division: *recall*
  is the share of the main division's paragraphs (``<p>`` of 40+ characters)
  whose first 40 characters appear in the extracted text; *leakage* is the
  share of the page's navigation strings ("Previous topic", "Table of
  Contents", "Quick search", …) that appear in it. CPU per page is measured in
  this process (``time.process_time``), parsing included.
- **Language** — the Debian Reference (``debian-reference-{en,de,fr,es,it,ja}``:
  the same chapters in six languages, labelled by file name), its text taken by
  the chosen extractor; each detector is judged on the whole text and on the
  first 200 characters (a short page), with accuracy per language and CPU per
  call.

Run by hand (the packages: ``apt-get install python3-doc debian-reference-en
debian-reference-de debian-reference-fr debian-reference-es debian-reference-it
debian-reference-ja``; ``pip install resiliparse trafilatura py3langid
lingua-language-detector``)::

    python bench/bench_text.py [--pages 120]

``--sink`` measures the text sink instead (hive.fetch.text_sink, what a crawl with it
on adds per page): ``TextSink.write`` on exchanges of the synthetic web's pages and of
the Python documentation's, each as sent and gzip-encoded (with the body decoded, as
the fetcher hands it on), into a real WET file (CPU per page in this process, bytes of
WET per page). ``--sink-run N`` only writes a first page and then N gzip-encoded
documentation pages through the sink, for an instruction count::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python bench/bench_text.py --sink-run 60

and ``--sink-run 0``: the difference over 60 is the instructions per page.
"""

from __future__ import annotations

import argparse
import gzip
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

PYDOC = Path("/usr/share/doc/python3/html/library")
DEBREF = Path("/usr/share/debian-reference")
LANGUAGES = ("en", "de", "fr", "es", "it", "ja")
NAVIGATION = ("Previous topic", "Next topic", "Table of Contents", "Quick search",
              "This page", "Report a bug", "Show source", "Navigation", "Theme")
SHORT = 200
# What hive gives its detector: the first this many characters of a page's main text.
SAMPLE = 2000


def resiliparse_text(html: bytes) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    return str(extract_plain_text(HTMLTree.parse_from_bytes(html), main_content=True))


def trafilatura_text(html: bytes) -> str:
    import trafilatura

    return trafilatura.extract(html.decode("utf-8", "replace")) or ""


EXTRACTORS: dict[str, Callable[[bytes], str]] = {
    "resiliparse": resiliparse_text, "trafilatura": trafilatura_text}


def main_paragraphs(html: bytes) -> list[str]:
    tree = LexborHTMLParser(html)
    main = tree.css_first("div[role=main]")
    if main is None:
        return []
    out = []
    for p in main.css("p"):
        text = re.sub(r"\s+", " ", p.text()).strip()
        if len(text) >= 40:
            out.append(text[:40])
    return out


def judge_extractors(pages: list[Path]) -> None:
    for extract in EXTRACTORS.values():  # imports and first-call set-up left out
        extract(pages[0].read_bytes())
    print(f"main text, {len(pages)} pages of the Python documentation:")
    print(f"  {'extractor':12s} {'recall':>7s} {'leakage':>8s} {'CPU-ms/page':>12s}")
    for name, extract in EXTRACTORS.items():
        found = total = leaked = navs = 0
        cpu = 0.0
        for path in pages:
            html = path.read_bytes()
            start = time.process_time()
            text = re.sub(r"\s+", " ", extract(html))
            cpu += time.process_time() - start
            wanted = main_paragraphs(html)
            total += len(wanted)
            found += sum(1 for p in wanted if p in text)
            page_text = LexborHTMLParser(html).body
            present = [n for n in NAVIGATION if page_text is not None and n in page_text.text()]
            navs += len(present)
            leaked += sum(1 for n in present if n in text)
        print(f"  {name:12s} {found / max(total, 1):7.1%} {leaked / max(navs, 1):8.1%} "
              f"{cpu / len(pages) * 1000:12.2f}")


def detectors() -> dict[str, Callable[[str], str]]:
    import py3langid
    from lingua import LanguageDetectorBuilder
    from resiliparse.parse.lang import detect_fast

    lingua = LanguageDetectorBuilder.from_all_languages().build()

    def by_lingua(text: str) -> str:
        found = lingua.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found is not None else "?"

    return {
        "resiliparse": lambda text: str(detect_fast(text)[0]),
        "py3langid": lambda text: str(py3langid.classify(text)[0]),
        "lingua": by_lingua,
    }


def judge_detectors(limit: int) -> None:
    texts: list[tuple[str, str]] = []
    for lang in LANGUAGES:
        for path in sorted(DEBREF.glob(f"*.{lang}.html"))[:limit]:
            text = resiliparse_text(path.read_bytes())
            if len(text) > SHORT:
                texts.append((lang, text))
    print(f"\nlanguage, {len(texts)} chapters of the Debian Reference in {len(LANGUAGES)} "
          "languages:")
    print(f"  {'detector':12s} {'whole':>7s} {SAMPLE:>7d} {SHORT:>7d} "
          f"{f'CPU-ms/{SAMPLE}':>13s}  misses ({SAMPLE})")
    for name, detect in detectors().items():
        right = Counter[int]()
        misses: Counter[str] = Counter()
        cpu = 0.0
        for lang, text in texts:
            right[0] += detect(text) == lang
            right[SHORT] += detect(text[:SHORT]) == lang
            start = time.process_time()
            sample = detect(text[:SAMPLE])
            cpu += time.process_time() - start
            right[SAMPLE] += sample == lang
            if sample != lang:
                misses[f"{lang}->{sample}"] += 1
        n = len(texts)
        print(f"  {name:12s} {right[0] / n:7.1%} {right[SAMPLE] / n:7.1%} {right[SHORT] / n:7.1%} "
              f"{cpu / n * 1000:13.2f}  {dict(misses.most_common(4))}")


def judge_sink(pages: list[Path]) -> None:
    from hive import config
    from hive.fetch.sinks import Exchange, SinkContext
    from hive.fetch.text_sink import build
    from hive.testweb import Web
    from hive.testweb.graph import Response

    web = Web(seed=7, hosts=1, pages=len(pages), hostile=False)
    synthetic = [web.respond(web.names[0], f"/p/{n}.html" if n else "/", port=80, tripwire=1)
                 for n in range(len(pages))]
    corpora = {"synthetic web": [r.body for r in synthetic if isinstance(r, Response)],
               "python docs": [path.read_bytes() for path in pages]}
    cfg = config.load(environ={})
    print(f"\ntext sink, TextSink.write per page ({len(pages)} pages each):")
    print(f"  {'pages':14s} {'encoding':9s} {'CPU-ms/page':>12s} {'WET bytes/page':>15s}")
    for name, bodies in corpora.items():
        for coding in ("identity", "gzip"):
            with tempfile.TemporaryDirectory() as directory:
                sink = build(SinkContext(cfg, "00", Path(directory)))
                headers = [("Content-Type", "text/html; charset=utf-8")]
                if coding == "gzip":
                    headers.append(("Content-Encoding", "gzip"))
                exchanges = [Exchange(
                    f"http://bench.test/{n}", "127.0.0.1", b"GET / HTTP/1.1\r\n\r\n", 200,
                    "HTTP/1.1 200 OK", headers,
                    gzip.compress(body, 6) if coding == "gzip" else body, body, None, 0.0, 0.0,
                    headers[0][1], "", "L") for n, body in enumerate(bodies)]
                sink.write(exchanges[0])  # imports and the detector's model left out
                start = time.process_time()
                for exchange in exchanges:
                    sink.write(exchange)
                cpu = time.process_time() - start
                sink.close()
                size = sum(p.stat().st_size for p in Path(directory).glob("*.wet.gz"))
            print(f"  {name:14s} {coding:9s} {cpu / len(bodies) * 1000:12.2f} "
                  f"{size // (len(bodies) + 1):15,d}")


def sink_run(pages: list[Path], count: int) -> None:
    """``TextSink.write`` on a first page, then on ``count`` gzip-encoded pages, printing
    nothing: run under callgrind with ``count`` and with 0, the difference over
    ``count`` is the sink's instructions per page."""
    from hive import config
    from hive.fetch.sinks import Exchange, SinkContext
    from hive.fetch.text_sink import build

    headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip")]
    exchanges = [Exchange(
        f"http://bench.test/{n}", "127.0.0.1", b"GET / HTTP/1.1\r\n\r\n", 200,
        "HTTP/1.1 200 OK", headers, gzip.compress(path.read_bytes(), 6), path.read_bytes(),
        None, 0.0, 0.0, headers[0][1], "", "L") for n, path in enumerate(pages[: count + 1])]
    with tempfile.TemporaryDirectory() as directory:
        sink = build(SinkContext(config.load(environ={}), "00", Path(directory)))
        for exchange in exchanges:
            sink.write(exchange)
        sink.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=120, help="Python documentation pages")
    parser.add_argument("--chapters", type=int, default=30, help="chapters per language")
    parser.add_argument("--sink", action="store_true", help="measure the text sink instead")
    parser.add_argument("--sink-run", type=int, metavar="N",
                        help="only write N gzip pages through the sink (under callgrind)")
    args = parser.parse_args()
    if args.sink_run is not None:
        sink_run(sorted(PYDOC.glob("*.html")), args.sink_run)
        return
    if args.sink:
        judge_sink(sorted(PYDOC.glob("*.html"))[: args.pages])
        return
    judge_extractors(sorted(PYDOC.glob("*.html"))[: args.pages])
    judge_detectors(args.chapters)


if __name__ == "__main__":
    main()
