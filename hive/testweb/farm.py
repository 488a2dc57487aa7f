"""A link farm: ``farm`` tiny hosts of one registered domain, each linking to the next.

Hosts ``s0.<farm domain>`` … ``s<farm-1>.<farm domain>`` (``example.com`` by default:
a domain of the Public Suffix List, so they are subdomains of one registered domain,
as a real farm's are; a crawler reaches them by resolving ``*.<farm domain>`` to the
server). Host ``s<n>``'s ``/`` links to the roots of ``s<FANOUT*n+1>`` …
``s<FANOUT*n+FANOUT>``, so a crawl from ``s0`` meets every host within a few hops and
each page is a few KB; every host's robots.txt is missing (404: allow all), and it
has no other page. What a crawler may fetch of it is what its cap on hosts per
domain allows: the request log names the hosts it reached.
"""

from __future__ import annotations

FANOUT = 100


def host(n: int, domain: str) -> str:
    return f"s{n}.{domain}"


def index(name: str, domain: str, size: int) -> int | None:
    """The farm host number of ``name``, or None if it is not one of the farm's."""
    label, dot, rest = name.partition(".")
    if not dot or rest != domain or not label.startswith("s") or not label[1:].isdigit():
        return None
    n = int(label[1:])
    return n if n < size and label == f"s{n}" else None


def page(n: int, domain: str, size: int, port: int) -> bytes:
    """Host ``s<n>``'s ``/``: links to its children's roots, on ``port``."""
    suffix = "" if port == 80 else f":{port}"
    names = [host(k, domain) for k in range(FANOUT * n + 1, min(FANOUT * (n + 1), size - 1) + 1)]
    links = "".join(f'<a href="http://{name}{suffix}/">{name}</a>\n' for name in names)
    return f"<!doctype html>\n<title>{host(n, domain)}</title>\n{links}".encode()
