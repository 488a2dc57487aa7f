"""A URL's host in canonical form (part of hive.core.urls' policy, which states it):
a domain through UTS-46 as browsers apply it (idna), with the label, joiner and bidi
checks; every IPv4 spelling WHATWG accepts as dotted decimal; IPv6 compressed.
Pure functions; a refusal raises :class:`Refusal`, which hive.core.urls turns into a
URLError naming the URL."""

from __future__ import annotations

import functools
import re
import unicodedata

import idna

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_DIGITS = "0123456789"
_RADIX_DIGITS = {8: frozenset("01234567"), 10: frozenset(_DIGITS), 16: _HEX_DIGITS}
_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_JOINERS = frozenset("\u200c\u200d")
_RTL_CLASSES = frozenset({"R", "AL", "AN"})


class Refusal(Exception):
    """Why a URL or its host is refused, before the public error names the URL."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


@functools.lru_cache(maxsize=4096)
def canonical_host(raw: str) -> str:
    """Return the canonical form of a host (domain, IPv4 or bracketed IPv6)."""
    if raw[0] == "[":
        if raw[-1] != "]":
            raise Refusal("bad_host", "unclosed [")
        return f"[{_ipv6(raw[1:-1])}]"
    if "%" in raw:
        try:
            raw = _percent_decode(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise Refusal("bad_host", "escapes are not UTF-8") from None
    if raw.isascii():
        host = raw.lower()
    else:
        try:
            host = idna.uts46_remap(raw, std3_rules=False, transitional=False)
        except UnicodeError as exc:
            raise Refusal("bad_host", f"IDNA: {exc}") from None
    if host.endswith("."):
        host = host[:-1]
    labels = host.split(".")
    last = labels[-1]
    if last.isascii() and (last.isdigit() or (last[:2] == "0x" and _is_hex(last[2:]))):
        return _ipv4(labels)
    unicode_labels = []
    for i, label in enumerate(labels):
        if label.isascii():
            if _LABEL.fullmatch(label) is None:
                raise Refusal("bad_host", f"bad label {label[:70]!r}")
            if not label.startswith("xn--"):
                unicode_labels.append(label)
                continue
            label = _decode_alabel(label)
        _check_label(label)
        unicode_labels.append(label)
        labels[i] = "xn--" + label.encode("punycode").decode("ascii")
        if len(labels[i]) > 63:
            raise Refusal("bad_host", f"label {labels[i][:70]!r} longer than 63")
        if _LABEL.fullmatch(labels[i]) is None:  # ASCII beside non-ASCII, such as a space
            raise Refusal("bad_host", f"bad label {label[:70]!r}")
    if any(_is_rtl(label) for label in unicode_labels):
        for label in unicode_labels:
            try:
                idna.check_bidi(label, check_ltr=True)
            except idna.IDNAError as exc:
                raise Refusal("bad_host", f"IDNA: {exc}") from None
    host = ".".join(labels)
    if len(host) > 253:
        raise Refusal("bad_host", "host longer than 253")
    return host


def _decode_alabel(label: str) -> str:
    """The Unicode label an ``xn--`` label stands for; refused unless it holds non-ASCII."""
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except UnicodeError:
        raise Refusal("bad_host", f"bad punycode in {label!r}") from None
    if decoded.isascii():
        raise Refusal("bad_host", f"{label!r} does not stand for a Unicode label")
    return decoded


def _check_label(label: str) -> None:
    """UTS-46's validity criteria for a non-ASCII label, as WHATWG applies them.

    Its characters are valid and already mapped (UTS-46 mapping leaves it
    unchanged, NFC included), it does not start with a combining mark, and
    zero-width joiners stand where RFC 5892 (CONTEXTJ) allows them. Hyphen
    positions are not checked (CheckHyphens is off in browsers).
    """
    try:
        if idna.uts46_remap(label, std3_rules=False, transitional=False) != label:
            raise Refusal("bad_host", f"label {label[:70]!r} is not in mapped form")
        idna.check_initial_combiner(label)
        for pos, char in enumerate(label):
            if char in _JOINERS and not idna.valid_contextj(label, pos):
                raise Refusal("bad_host", f"joiner out of context in {label[:70]!r}")
    except (UnicodeError, idna.IDNAError) as exc:
        raise Refusal("bad_host", f"IDNA: {exc}") from None


def _is_rtl(label: str) -> bool:
    """Whether a label holds a right-to-left character (a bidi domain's mark, RFC 5893)."""
    return not label.isascii() and any(
        unicodedata.bidirectional(char) in _RTL_CLASSES for char in label
    )


def _percent_decode(text: str) -> bytes:
    """Decode ``%XX`` escapes to bytes, leaving a lone ``%`` as it is."""
    pieces = text.split("%")
    out = bytearray(pieces[0].encode("utf-8"))
    for piece in pieces[1:]:
        if len(piece) >= 2 and _is_hex(piece[:2]):
            out.append(int(piece[:2], 16))
            out += piece[2:].encode("utf-8")
        else:
            out += b"%" + piece.encode("utf-8")
    return bytes(out)


def _is_hex(text: str) -> bool:
    return all(char in _HEX_DIGITS for char in text)


def _ipv4(parts: list[str]) -> str:
    """Parse a host that ends in a number as WHATWG's IPv4 parser does."""
    if len(parts) > 4:
        raise Refusal("bad_host", "more than four IPv4 parts")
    numbers = [_ipv4_number(part) for part in parts]
    if any(number > 255 for number in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise Refusal("bad_host", "IPv4 part out of range")
    address = numbers[-1]
    for i, number in enumerate(numbers[:-1]):
        address += number << (8 * (3 - i))
    return ".".join(str((address >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def _ipv4_number(part: str) -> int:
    """One IPv4 part: decimal, ``0x`` hex or ``0`` octal (WHATWG IPv4 number parser)."""
    radix, digits = 10, part
    if part[:2] in ("0x", "0X"):
        radix, digits = 16, part[2:]
    elif len(part) >= 2 and part[0] == "0":
        radix, digits = 8, part[1:]
    digits = digits.lstrip("0")
    # Twelve significant digits exceed 2**32 in any of the radixes, and keep int() cheap.
    if not part or len(digits) > 12 or not all(c in _RADIX_DIGITS[radix] for c in digits):
        raise Refusal("bad_host", f"bad IPv4 part {part[:20]!r}")
    return int(digits or "0", radix)


def _ipv6(text: str) -> str:
    """Parse and serialize an IPv6 address as WHATWG does (compressed, lowercase hex)."""
    pieces = _parse_ipv6(text)
    if pieces is None:
        raise Refusal("bad_host", "bad IPv6 address")
    best, best_len, run, run_len = -1, 1, -1, 0
    for i, piece in enumerate(pieces):
        if piece == 0:
            if run_len == 0:
                run = i
            run_len += 1
            if run_len > best_len:
                best, best_len = run, run_len
        else:
            run_len = 0
    if best < 0:
        return ":".join(f"{piece:x}" for piece in pieces)
    head = ":".join(f"{piece:x}" for piece in pieces[:best])
    tail = ":".join(f"{piece:x}" for piece in pieces[best + best_len :])
    return f"{head}::{tail}"


def _parse_ipv6(text: str) -> list[int] | None:
    """WHATWG's IPv6 parser: eight 16-bit pieces, or None on failure."""
    address = [0] * 8
    piece, compress, i, n = 0, -1, 0, len(text)
    if text.startswith(":"):
        if not text.startswith("::"):
            return None
        i, piece, compress = 2, 1, 1
    while i < n:
        if piece == 8:
            return None
        if text[i] == ":":
            if compress >= 0:
                return None
            i += 1
            piece += 1
            compress = piece
            continue
        value = length = 0
        while length < 4 and i < n and text[i] in _HEX_DIGITS:
            value = value * 16 + int(text[i], 16)
            i += 1
            length += 1
        if i < n and text[i] == ".":
            if length == 0 or piece > 6:
                return None
            return _embedded_ipv4(text[i - length :], address, piece, compress)
        if i < n and text[i] == ":":
            i += 1
            if i == n:
                return None
        elif i < n:
            return None
        address[piece] = value
        piece += 1
    return _expand(address, piece, compress)


def _embedded_ipv4(text: str, address: list[int], piece: int, compress: int) -> list[int] | None:
    """The dotted-decimal tail of an IPv6 address: exactly four decimal parts, no leading 0."""
    parts = text.split(".")
    if len(parts) != 4:
        return None
    for k, part in enumerate(parts):
        if not part or not (part.isascii() and part.isdigit()) or len(part) > 3:
            return None
        if (part[0] == "0" and len(part) > 1) or int(part) > 255:
            return None
        address[piece] = address[piece] * 0x100 + int(part)
        if k % 2:
            piece += 1
    return _expand(address, piece, compress)


def _expand(address: list[int], piece: int, compress: int) -> list[int] | None:
    """Move the pieces after a ``::`` to the end of the address."""
    if compress < 0:
        return address if piece == 8 else None
    swaps = piece - compress
    piece = 7
    while piece != 0 and swaps > 0:
        other = compress + swaps - 1
        address[piece], address[other] = address[other], address[piece]
        piece -= 1
        swaps -= 1
    return address
