"""URL canonical form, politeness keys and fingerprints (pure functions).

This module owns what "the same URL" and "the same server" mean in hive.
Whoever discovers a link canonicalizes it here before hashing or sending it,
so two spellings of one resource share a fingerprint and two spellings of one
server share a back queue.

Policy of :func:`canonicalize` (parsing follows the WHATWG URL standard for the
special schemes http and https; normalization follows RFC 3986 section 6):

- Only http and https are crawled; every other scheme is refused (``scheme``).
- Leading and trailing C0 controls and spaces are stripped, and tabs, CR and
  LF are removed wherever they occur. Backslashes count as slashes. The forms
  ``http:host``, ``http:/host`` and ``http:\\\\host`` name a host, except that
  against a base of the same scheme ``http:foo`` is relative (as WHATWG).
- Userinfo (``user:pass@``) is dropped: a crawler following public links must
  never send credentials it found in a page.
- Scheme and host are lowercased. The host goes through UTS-46 as browsers
  apply it (WHATWG's domain to ASCII: non-transitional, no STD3 or hyphen
  rules, with the joiner and bidi checks), so ``faß.de`` becomes
  ``xn--fa-hia.de``, not ``fass.de``, and a host of symbols or emoji is
  accepted or refused the same whether written in Unicode or punycode:
  ``☃.com`` and ``xn--n3h.com`` are one host, and an ``xn--`` label is
  decoded and must hold a valid label (a bogus one is refused). Label (63)
  and host (253) length limits apply to the ASCII form. ASCII labels must be
  made of letters, digits, ``-`` and ``_`` (real hosts carry underscores): the
  other characters WHATWG tolerates name no host that resolves. One trailing
  dot is dropped, so ``a.com.`` and ``a.com`` share a queue. Every IPv4
  spelling WHATWG accepts is written as dotted decimal (``0x7f.1`` is
  ``127.0.0.1``); IPv6 is compressed and lowercased, IPv4-mapped addresses in
  hex as WHATWG does. A host ending in a number that is not a valid IPv4
  address is refused.
- The default port (80 for http, 443 for https) and an empty port are dropped.
- Dot segments are removed (RFC 3986 5.2.4; ``%2e`` counts as a dot); an
  empty path becomes ``/``.
- Percent-escapes are uppercased; escapes of unreserved characters
  (``A-Z a-z 0-9 - . _ ~``) are decoded. A ``%`` without two hex digits is
  kept as written, as browsers and Heritrix send it (``%25`` would ask the
  server for another URL); in a path or query holding one, escapes of hex
  digits stay escaped, so that decoding never makes a new escape. Every
  character that RFC 3986 or WHATWG would escape in the path or query (space,
  controls, ``"<>[]^`{|}``, a backslash in the query, ``'`` in the query) is
  escaped; non-ASCII as UTF-8, except in the query of a link found on a page
  in a legacy encoding (``encoding``), which is escaped in that encoding as
  browsers do (WHATWG's encoding override: ``?q=é`` on a windows-1252 page is
  ``?q=%E9``; a character it cannot encode is written ``&#N;``, escaped). The
  query keeps its order and an empty query keeps its ``?`` (RFC 3986 6.2.3).
- The fragment is dropped. The result is at most ``max_length`` characters.

Refusals raise :class:`hive.errors.URLError` with ``reason`` one of
``scheme``, ``no_host``, ``bad_host``, ``too_long`` or ``malformed``; no
other exception escapes, whatever the input. A base that is itself refused
refuses the reference with the base's reason. The canonical form is a fixed
point: ``canonicalize(canonicalize(u)) == canonicalize(u)``.

Session ids (:class:`SessionIds`) are left in the canonical URL, which is what
is fetched (a server may need them), and stripped from the seen set's
:func:`fingerprint` only, so one page reached under many sessions is fetched
once. A parameter is taken for a session id when its name is listed
(``scope.session_ids``; a trailing ``*`` matches any ending, as in
``aspsessionid*``) and its value is a token of at least 8 characters
(letters, digits, ``_.,-``), as session managers make them: ``sid=42`` or
``sid=05/01/01/1234`` are content, not sessions. Path parameters
(``;jsessionid=...``) of a listed name go whatever their value. A query left
empty by stripping goes with its ``?``.

A crawler canonicalizes every link of every page, so already-canonical
absolute URLs and the common relative forms against a canonical base take a
fast path of a few regular-expression checks; hosts and bases are cached.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import mmh3

from hive.core.hostname import Refusal, canonical_host
from hive.errors import URLError

__all__ = ["SessionIds", "canonicalize", "fingerprint", "host_hash", "host_key"]

_DEFAULT_PORT = {"http": "80", "https": "443"}
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE = {0x09: None, 0x0A: None, 0x0D: None}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX_BYTE = [f"%{i:02X}" for i in range(256)]
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_UNRESERVED_NOT_HEX = _UNRESERVED - _HEX_DIGITS
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_DIGITS = "0123456789"

# What may stand unescaped: RFC 3986 pchar (and "/") in the path; in the query
# also "?", but not "'", which WHATWG escapes in the query of special URLs.
_PATH_CHARS = r"A-Za-z0-9\-._~!$&'()*+,;=:@/"
_QUERY_CHARS = r"A-Za-z0-9\-._~!$&()*+,;=:@/?"
_PATH_FIX = re.compile(rf"%[0-9A-Fa-f]{{2}}|%|[^{_PATH_CHARS}%]+")
_QUERY_FIX = re.compile(rf"%[0-9A-Fa-f]{{2}}|%|[^{_QUERY_CHARS}%]+")


# A host spelled in more characters than this cannot shrink to 253 by any sane
# mapping or escaping; refusing it early also keeps the host cache small.
_MAX_RAW_HOST = 1024

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_AUTHORITY_END = re.compile(r"[/\\?]")
_LONG_LABEL = re.compile(r"[^.]{64}")
_QUERY = rf"(\?[{_QUERY_CHARS}]*)?"

# Fast path: shapes that are canonical as they stand, once hosts with empty or
# long labels, that might be an IPv4 number or hold punycode to check, and
# paths holding "/." (maybe a dot segment) are excluded.
_FAST_ORIGIN_TEXT = r"(https?)://([A-Za-z0-9_.-]+)(?::([1-9][0-9]{0,4}))?"
_FAST_ORIGIN = re.compile(_FAST_ORIGIN_TEXT)
_FAST_ABSOLUTE = re.compile(rf"({_FAST_ORIGIN_TEXT})(/[{_PATH_CHARS}]*)?{_QUERY}")
_FAST_ABSOLUTE_PATH = re.compile(rf"(/(?!/)[{_PATH_CHARS}]*){_QUERY}")
_FAST_QUERY = re.compile(_QUERY)
_FAST_RELATIVE_PATH = re.compile(rf"((?!\.)[{_PATH_CHARS.replace(':', '')}]+){_QUERY}")


class _Base(NamedTuple):
    """A canonical base URL cut into the pieces relative references reuse."""

    url: str
    scheme: str
    origin: str
    path: str
    directory: str


def canonicalize(
    url: str, base: str | None = None, max_length: int = 2048, encoding: str = "utf-8"
) -> str:
    """Return the canonical form of ``url``, resolved against ``base`` if given.

    ``encoding`` (a Python codec name) is the encoding of the page the link
    was found on: the query's non-ASCII characters are escaped in it.
    Raises :class:`URLError` (and nothing else) when the URL is refused.
    """
    try:
        return _fast(url, base, max_length) or _slow(url, base, max_length, encoding)
    except Refusal as exc:
        raise URLError(exc.reason, url, exc.detail) from None


def host_key(url: str) -> str:
    """Return the politeness key of a canonical URL: its host, and its port if not default.

    The scheme is not part of the key, so http and https of one server share it.
    """
    start = url.find("://") + 3
    if start < 3:
        raise URLError("malformed", url, "not a canonical URL")
    end = url.find("/", start)
    return url[start:end] if end >= 0 else url[start:]


def host_hash(host_key: str) -> int:
    """Return the unsigned 64-bit hash of a host key (mmh3 x64 128, first half, seed 0).

    Hashed as bytes: mmh3 5.3 crashes the interpreter on a str with a lone surrogate.
    """
    value: int = mmh3.hash64(host_key.encode("utf-8", "surrogatepass"), signed=False)[0]
    return value


class SessionIds:
    """The session-id parameters a fingerprint leaves out (see the module policy)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        alternatives = "|".join(
            re.escape(name[:-1]) + "[A-Za-z0-9_]*" if name.endswith("*") else re.escape(name)
            for name in names
        )
        self._any = re.compile(rf"[;?&](?:{alternatives})=", re.IGNORECASE) if names else None
        self._path = re.compile(rf";(?:{alternatives})=[^;/]*", re.IGNORECASE)
        self._query = re.compile(rf"(?:{alternatives})=[A-Za-z0-9_.,\-]{{8,}}", re.IGNORECASE)

    def strip(self, url: str) -> str:
        """The canonical url without its session ids (itself when it has none)."""
        if self._any is None or "=" not in url or self._any.search(url) is None:
            return url
        head, mark, query = url.partition("?")
        if ";" in head:
            head = self._path.sub("", head)
        if not mark:
            return head
        kept = [part for part in query.split("&") if self._query.fullmatch(part) is None]
        return f"{head}?{'&'.join(kept)}" if kept else head


NO_SESSION_IDS = SessionIds(())


def fingerprint(url: str, session_ids: SessionIds = NO_SESSION_IDS) -> int:
    """Return the unsigned 64-bit fingerprint of a canonical URL (as :func:`host_hash`),
    with the ``session_ids`` it carries left out."""
    url = session_ids.strip(url)
    value: int = mmh3.hash64(url.encode("utf-8", "surrogatepass"), signed=False)[0]
    return value


def _fast(url: str, base: str | None, max_length: int) -> str | None:
    """Return the canonical form of the common already-clean shapes, else None.

    Beside canonical absolute URLs these are an upper-case host, and against a
    base: ``//host/path``, ``/path``, ``?query``, ``path``, ``./path`` and
    ``../`` (repeated) ``path``.

    Shapes are told apart by their first character, with operators rather than
    str methods: at a few characters a method call costs more than the work.
    """
    head = url.partition("#")[0] if "#" in url else url
    out: str | None = None
    first = head[0] if head else ""
    scheme_relative = False
    match = None
    if first == "/" and base is not None and len(head) > 1 and head[1] == "/":
        scheme_relative = True
        head = _base(base, max_length).scheme + ":" + head
        match = _FAST_ABSOLUTE.fullmatch(head)
    elif first == "h":  # only a lower-case "http" can match
        match = _FAST_ABSOLUTE.fullmatch(head)
    if match is not None:
        written, path = match.group(1, 5)
        origin = (
            _remembered_origin(written) if len(written) <= _REMEMBERED_ORIGIN_CHARS
            else _fast_origin(written)
        )
        if origin is None:
            return None
        if path is None:
            out = f"{origin}/{match[6] or ''}"
        elif "/." not in path:
            out = origin + head[len(written) :]
    elif base is not None and not scheme_relative:
        if not head:
            out = _base(base, max_length).url
        elif first == "/":
            match = _FAST_ABSOLUTE_PATH.fullmatch(head)
            if match is not None and "/." not in match[1]:
                out = _base(base, max_length).origin + head
        elif first == "?":
            if _FAST_QUERY.fullmatch(head) is not None:
                parts = _base(base, max_length)
                out = parts.origin + parts.path + head
        else:
            parts = _base(base, max_length)
            directory = parts.directory
            if first == ".":
                while head.startswith("../"):
                    head = head[3:]
                    if directory != "/":
                        directory = directory[: directory.rfind("/", 0, -1) + 1]
                if head.startswith("./"):
                    head = head[2:]
            if not head:
                out = parts.origin + directory
            else:
                match = _FAST_RELATIVE_PATH.fullmatch(head)
                if match is not None and "/." not in match[1]:
                    out = parts.origin + directory + head
    if out is not None and len(out) > max_length:
        raise Refusal("too_long", f"longer than {max_length}")
    return out


def _fast_origin(written: str) -> str | None:
    """The canonical ``scheme://host[:port]`` of an origin as the fast pattern matched it,
    or None if its host or port needs the full parse: an empty or long label, a default
    or out-of-range port, a host that might be an IPv4 number or holds punycode to check."""
    match = _FAST_ORIGIN.fullmatch(written)
    if match is None:
        return None
    scheme, host, port = match.groups()
    host = host.lower()
    if (
        (port is not None and (port == _DEFAULT_PORT[scheme] or int(port) > 65535))
        or host[-1] == "."
        or host[0] == "."
        or ".." in host
        or host[host.rfind(".") + 1] in _DIGITS
        or "xn--" in host
        or (len(host) > 63 and (len(host) > 253 or _LONG_LABEL.search(host)))
    ):
        return None
    # Scheme and port are lower-case already: lowering the whole lowers the host.
    return written.lower()


# Pages repeat their origins, so each spelling is judged once: the last 4,096 spellings
# up to the longest a valid origin has ("https://", a 253-character host, ":65535") are
# remembered, about 2 MiB at most; a longer one, which a page may send, is judged anew.
_REMEMBERED_ORIGIN_CHARS = 8 + 253 + 6
_remembered_origin = functools.lru_cache(maxsize=4096)(_fast_origin)


def _slow(url: str, base: str | None, max_length: int, encoding: str = "utf-8") -> str:
    """Canonicalize any input by the full WHATWG-style parse."""
    text = url.strip(_C0_OR_SPACE)
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.translate(_TAB_OR_NEWLINE)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise Refusal("malformed", "lone surrogate") from None
    cut = text.find("#")
    if cut >= 0:
        text = text[:cut]
    match = _SCHEME.match(text)
    scheme = ""
    rest = text
    if match is not None:
        scheme = text[: match.end() - 1].lower()
        if scheme not in _DEFAULT_PORT:
            raise Refusal("scheme", scheme)
        rest = text[match.end() :]
    slashes = len(rest) - len(rest.lstrip("/\\"))
    relative = not scheme or (
        slashes < 2 and base is not None and _base(base, max_length).scheme == scheme
    )
    if not relative:
        origin, tail = _authority(scheme, rest[slashes:])
        path, query = _split_query(tail)
    elif base is None:
        raise Refusal("malformed", "relative reference without a base")
    else:
        parts = _base(base, max_length)
        if slashes >= 2:
            origin, tail = _authority(parts.scheme, rest[slashes:])
            path, query = _split_query(tail)
        elif not rest:
            return parts.url
        else:
            origin = parts.origin
            path, query = _split_query(rest)
            if rest[0] == "?":
                path = parts.path
            elif slashes == 0:
                path = parts.directory + path
    out = origin + _path(path)
    if query is not None:
        out += "?" + _query(query, encoding)
    if len(out) > max_length:
        raise Refusal("too_long", f"longer than {max_length}")
    return out


@functools.lru_cache(maxsize=256)
def _base(base: str, max_length: int) -> _Base:
    """Canonicalize a base URL once and cut it into its reusable pieces."""
    try:
        url = _fast(base, None, max_length) or _slow(base, None, max_length)
    except Refusal as exc:
        raise Refusal(exc.reason, f"base {base[:80]!r}: {exc.detail}") from None
    scheme = url[: url.index(":")]
    path_start = url.index("/", len(scheme) + 3)
    query_start = url.find("?", path_start)
    path = url[path_start:query_start] if query_start >= 0 else url[path_start:]
    return _Base(url, scheme, url[:path_start], path, path[: path.rfind("/") + 1])


def _authority(scheme: str, text: str) -> tuple[str, str]:
    """Split ``host[:port]`` off ``text``; return (``scheme://host[:port]``, the rest)."""
    match = _AUTHORITY_END.search(text)
    end = match.start() if match is not None else len(text)
    authority = text[:end].rpartition("@")[2]
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise Refusal("bad_host", "unclosed [")
        raw_host, after = authority[: close + 1], authority[close + 1 :]
        if after and after[0] != ":":
            raise Refusal("bad_host", "text after ]")
        port = after[1:]
    else:
        raw_host, _, port = authority.partition(":")
    if not raw_host:
        raise Refusal("no_host", "empty host")
    if len(raw_host) > _MAX_RAW_HOST:
        raise Refusal("bad_host", "host longer than 253")
    origin = f"{scheme}://{canonical_host(raw_host)}"
    if port:
        if not (port.isascii() and port.isdigit()):
            raise Refusal("bad_host", "port is not a number")
        port = port.lstrip("0") or "0"
        if len(port) > 5 or int(port) > 65535:
            raise Refusal("bad_host", "port out of range")
        if port != _DEFAULT_PORT[scheme]:
            origin += ":" + port
    return origin, text[end:]


def _split_query(text: str) -> tuple[str, str | None]:
    """Split a path-and-query at its first ``?``."""
    mark = text.find("?")
    return (text, None) if mark < 0 else (text[:mark], text[mark + 1 :])


def _path(path: str) -> str:
    """Normalize a path: slashes, percent-escapes, then dot segments."""
    if "\\" in path:
        path = path.replace("\\", "/")
    path = _PATH_FIX.sub(_escape_fixer(path, "utf-8"), path)
    if "/." in path:
        path = _remove_dot_segments(path)
    return path or "/"


def _remove_dot_segments(path: str) -> str:
    """Remove "." and ".." segments from an absolute path (RFC 3986 5.2.4)."""
    segments = path[1:].split("/")
    last = len(segments) - 1
    out: list[str] = []
    for i, segment in enumerate(segments):
        if segment == "..":
            if out:
                out.pop()
            if i == last:
                out.append("")
        elif segment == ".":
            if i == last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


def _query(query: str, encoding: str) -> str:
    """Normalize a query's escapes, escaping non-ASCII in ``encoding``."""
    if encoding != "utf-8" and query.isascii():
        encoding = "utf-8"
    return _QUERY_FIX.sub(_escape_fixer(query, encoding), query)


def _escape_fixer(component: str, encoding: str) -> Callable[[re.Match[str]], str]:
    """The substitution that normalizes the escapes of one path or query.

    A component with a lone ``%`` keeps the escapes of hex digits: decoding
    ``%4%31`` to ``%41`` would make an escape that the next pass decodes.
    """
    if "%" in component and _LONE_PERCENT.search(component):
        return _fix_escape_keeping_hex if encoding == "utf-8" else functools.partial(
            _fix_escape, decode=_UNRESERVED_NOT_HEX, encoding=encoding)
    return _fix_escape if encoding == "utf-8" else functools.partial(
        _fix_escape, encoding=encoding)


def _fix_escape(
    match: re.Match[str], decode: frozenset[str] = _UNRESERVED, encoding: str = "utf-8"
) -> str:
    """Normalize one percent-escape, or escape a run of characters that need it."""
    text = match[0]
    if text[0] == "%":
        if len(text) == 1:
            return "%"
        char = chr(int(text[1:], 16))
        return char if char in decode else text.upper()
    if encoding == "utf-8":
        return "".join([_HEX_BYTE[byte] for byte in text.encode("utf-8")])
    return "".join([_escape_in(char, encoding) for char in text])


def _fix_escape_keeping_hex(match: re.Match[str]) -> str:
    return _fix_escape(match, _UNRESERVED_NOT_HEX)


def _escape_in(char: str, encoding: str) -> str:
    """One character escaped in a legacy encoding; one it cannot encode as ``&#N;`` (WHATWG)."""
    try:
        data = char.encode(encoding)
    except UnicodeEncodeError:
        return f"%26%23{ord(char)}%3B"
    return "".join([_HEX_BYTE[byte] for byte in data])
