"""Scoring: the user's page scorer (``priority.scorer``), called on each fetched HTML page.

A scorer is any callable ``(page: Page) -> float | None`` named by a dotted path
(hive.plugins): it reads the page (URL, status, headers, body, its decoded text)
and says how good it is, in [0, 1], or None for "no opinion". The score goes
with the page's capture (its crawl-log line, ``score``; the Parquet index's
``score`` column, hive.export) and travels on its out-links' records to their
owners (``UrlRecord.score``), where the best score of a page linking to a URL
moves it (hive.frontier.evidence: Craw4LLM's propagation).

**A bad scorer never stops the crawl.** It runs on a helper thread that the fetch
thread waits on for at most ``priority.scorer_timeout`` seconds: one that raises
(``priority/scorer/error``), answers something that is not a number in [0, 1]
or None (``bad_value``), or takes longer (``timeout``) costs that page its
score, counted and said in its crawl-log line (``scorer``), and the page goes
on. Python cannot stop a thread, so a helper that timed out is left to finish
(a daemon, it never holds the process up) and a new one takes its place; past
``MAX_HUNG`` helpers still busy at once the scorer is switched off for the
worker's life (``priority/scorer/off``, logged once), so a scorer that hangs on
every page costs a bounded number of threads, not one a page.

**The example scorer** (``text_quality``) needs no model file: a page's visible
text outside links, and its link density (the share of that text inside links),
as boilerplate and link-farm detectors read them. Plugging a trained classifier
instead (fastText's quality models, as Craw4LLM and DCLM use) is a module of the
user's own::

    import fasttext
    from hive.fetch.scoring import Page, visible_text

    MODEL = fasttext.load_model("/models/quality.bin")  # once, at import

    def quality(page: Page) -> float | None:
        text = visible_text(page)
        if not text:
            return None
        labels, probs = MODEL.predict(text[:20000].replace("\\n", " "))
        return float(probs[0]) if labels[0] == "__label__hq" else 1.0 - float(probs[0])

named as ``[priority] scorer = "mypackage.quality:quality"``; the config loads it
before any process starts (so a missing model fails ``hive start``, not a page).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from hive.config import Config
from hive.fetch.parse import media_type, page_encoding
from hive.plugins import load_object

log = logging.getLogger(__name__)

# Helpers left busy by timed-out calls at once before the scorer is switched off.
MAX_HUNG = 8
# The example scorer's scale: this much text outside links is a full page.
FULL_TEXT = 2000


@dataclass(slots=True)
class Page:
    """What a scorer is given: the fetched page as the fetcher read it (``body`` is the
    content-decoded body, ``links`` how many links the page yielded)."""

    url: str
    status: int
    headers: list[tuple[str, str]]
    content_type: str
    body: bytes
    links: int = 0
    _text: str | None = field(default=None, repr=False)

    @property
    def html(self) -> str:
        """The body decoded as the link parser decodes it (hive.fetch.parse)."""
        if self._text is None:
            charset = media_type(self.content_type)[1]
            self._text = self.body.decode(page_encoding(self.body, charset), "replace")
        return self._text


def visible_text(page: Page) -> str:
    """A page's text as a reader sees it (scripts and styles left out)."""
    tree = LexborHTMLParser(page.html)
    for node in tree.css("script, style, noscript"):
        node.decompose()
    root = tree.body or tree.root
    return root.text(separator=" ", strip=True) if root is not None else ""


def text_quality(page: Page) -> float | None:
    """The example scorer: text outside links (up to ``FULL_TEXT`` characters counts)
    times the share of the text not in links. None for a page with no text."""
    tree = LexborHTMLParser(page.html)
    for node in tree.css("script, style, noscript"):
        node.decompose()
    root = tree.body or tree.root
    if root is None:
        return None
    total = len(root.text(separator=" ", strip=True))
    if not total:
        return None
    linked = sum(len(a.text(strip=True)) for a in root.css("a"))
    outside = max(total - linked, 0)
    return min(outside / FULL_TEXT, 1.0) * (outside / total)


class Scorer:
    """Calls the scorer under its time limit on the fetch threads (module docstring)."""

    def __init__(self, func: Callable[[Page], object], timeout: float) -> None:
        self.func = func
        self.timeout = timeout
        self.counts: Counter[str] = Counter()
        self.hung = 0
        self.off = False
        self._local = threading.local()
        self._lock = threading.Lock()
        self._helpers: list[_Helper] = []

    @classmethod
    def from_config(cls, cfg: Config) -> Scorer | None:
        if not cfg.priority.scorer:
            return None
        return cls(load_object("priority.scorer", cfg.priority.scorer), cfg.priority.scorer_timeout)

    def score(self, page: Page) -> tuple[float | None, str]:
        """(score, what went wrong or ""): the page's score, or None with the failure."""
        if self.off:
            return None, "off"
        helper: _Helper | None = getattr(self._local, "helper", None)
        if helper is None:
            helper = self._local.helper = _Helper(self._done)
            with self._lock:
                self._helpers = [h for h in self._helpers if h.alive] + [helper]
        call = helper.call(self.func, page)
        if not call.finished.wait(self.timeout) and call.abandon():
            self._local.helper = None  # it finishes on its own and ends; a new one next time
            with self._lock:
                self.hung += 1
                if self.hung >= MAX_HUNG and not self.off:
                    self.off = True
                    self.counts["priority/scorer/off"] += 1
                    log.error("priority.scorer: %d calls still running past %gs; the scorer is "
                              "off for this worker", self.hung, self.timeout)
            return self._fail("timeout")
        if call.error is not None:
            if not self.counts["priority/scorer/error"]:
                log.warning("priority.scorer raised on %s: %s: %s", page.url,
                            type(call.error).__name__, call.error)
            return self._fail("error")
        value = call.value
        if value is None:
            self._count("none")
            return None, ""
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or not 0.0 <= value <= 1.0):
            return self._fail("bad_value")
        self._count("scored")
        return float(value), ""

    def _count(self, result: str) -> None:
        """Count a page's result (the fetch threads share the counts)."""
        with self._lock:
            self.counts[f"priority/scorer/{result}"] += 1

    def _fail(self, why: str) -> tuple[None, str]:
        self._count(why)
        return None, why

    def _done(self) -> None:
        """A helper that timed out has finished after all."""
        with self._lock:
            self.hung -= 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def close(self) -> None:
        """End the idle helpers (one still running a hung call ends when it returns)."""
        with self._lock:
            for helper in self._helpers:
                helper.stop()
            self._helpers.clear()


class _Call:
    """One scorer call, handed from a fetch thread to its helper."""

    __slots__ = ("page", "func", "finished", "value", "error", "_lock", "_done", "_abandoned")

    def __init__(self, func: Callable[[Page], object], page: Page) -> None:
        self.func, self.page = func, page
        self.finished = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._done = self._abandoned = False

    def abandon(self) -> bool:
        """The fetch thread gives up waiting: True unless the call finished meanwhile."""
        with self._lock:
            self._abandoned = not self._done
            return self._abandoned

    def finish(self) -> bool:
        """The helper is done with it: True if it was abandoned."""
        with self._lock:
            self._done = True
            self.finished.set()
            return self._abandoned


class _Helper:
    """A daemon thread that runs one fetch thread's scorer calls, one at a time; it ends
    after a call its fetch thread abandoned (another took its place)."""

    def __init__(self, late: Callable[[], None]) -> None:
        self._jobs: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._late = late
        self._thread = threading.Thread(target=self._run, name="scorer", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def call(self, func: Callable[[Page], object], page: Page) -> _Call:
        call = _Call(func, page)
        self._jobs.put(call)
        return call

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while (call := self._jobs.get()) is not None:
            try:
                call.value = call.func(call.page)
            except Exception as exc:  # the user's code: any failure is the page's
                call.error = exc
            if call.finish():
                self._late()
                return
