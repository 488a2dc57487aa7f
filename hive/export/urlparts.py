"""A URL split into the ``url_*`` columns of Common Crawl's columnar index.

cc-index-table's definitions (its ``cc-index-schema-flat.json``): the host name, its
last five labels (``url_host_tld``, ``url_host_2nd_last_part`` ...), its registry
suffix and the registered domain one label below it (the ICANN section of the Public
Suffix List), the same with the list's private section (``url_host_private_suffix``,
``url_host_private_domain``: ``blogspot.com``), the host reversed (``com.example.www``;
none for an IP address, nor are suffixes and domains), the scheme, the port when the
URL names one, the path and the query. The suffix lists are the ``publicsuffixlist``
package's, as hive.fetch.parse reads them. A host's parts are kept for the next URL of
that host, up to ``HOST_CACHE`` hosts.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import NamedTuple
from urllib.parse import urlsplit

from publicsuffixlist import PublicSuffixList

HOST_CACHE = 4096
# accept_unknown: a TLD the list lacks is a suffix itself, the list's own default rule
# ("*"), as hive.fetch.parse reads it: ``a.test``'s registered domain is ``a.test``.
_ICANN = PublicSuffixList(only_icann=True, accept_unknown=True)
_ALL = PublicSuffixList(only_icann=False, accept_unknown=True)


class HostParts(NamedTuple):
    """The host columns of one host name."""

    name: str
    tld: str | None
    second: str | None
    third: str | None
    fourth: str | None
    fifth: str | None
    registry_suffix: str | None
    registered_domain: str | None
    private_suffix: str | None
    private_domain: str | None
    reversed: str | None


class UrlParts(NamedTuple):
    """A URL's columns: its host's, and its scheme, explicit port, path and query."""

    host: HostParts
    protocol: str
    port: int | None
    path: str
    query: str | None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=HOST_CACHE)
def host_parts(name: str) -> HostParts:
    """The host columns of a (lowercased) host name or IP address."""
    if not name or _is_ip(name):
        return HostParts(name, *([None] * 10))
    labels = name.rstrip(".").split(".")
    tld, second, third, fourth, fifth = (labels[-i] if len(labels) >= i else None
                                         for i in range(1, 6))
    return HostParts(
        name, tld, second, third, fourth, fifth,
        _ICANN.publicsuffix(name), _ICANN.privatesuffix(name),
        _ALL.publicsuffix(name), _ALL.privatesuffix(name),
        ".".join(reversed(labels)),
    )


def url_parts(url: str) -> UrlParts:
    """The columns of url; a URL that does not split has only its path (the URL itself)."""
    try:
        split = urlsplit(url)
        port = split.port
    except ValueError:
        return UrlParts(host_parts(""), "", None, url, None)
    host = (split.hostname or "").lower()
    return UrlParts(host_parts(host), split.scheme, port, split.path,
                    split.query if split.query or url.endswith("?") else None)
