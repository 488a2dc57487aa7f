"""The HTTP client's declared table from exceptions to outcome kinds (hive.fetch.client)."""

from __future__ import annotations

import http.client
import ssl

import pytest

from hive.fetch.client import (
    CONNECT_EXCEPTION_KINDS,
    DEFAULT_KIND,
    EXCEPTION_KINDS,
    ProxyRefused,
    exception_kind,
)
from hive.fetch.response import TotalTimeout
from hive.outcome import Kind


@pytest.mark.parametrize("cls, kind", [
    (TotalTimeout, Kind.TIMEOUT),
    (TimeoutError, Kind.TIMEOUT),
    (ssl.SSLError, Kind.TLS),
    (ConnectionError, Kind.CONNECT),
    (http.client.HTTPException, Kind.PROTOCOL),
])
def test_every_row_maps_as_stated(cls: type[Exception], kind: Kind) -> None:
    assert EXCEPTION_KINDS[cls] is kind
    assert exception_kind(cls("boom")) is kind
    assert exception_kind(cls("boom"), CONNECT_EXCEPTION_KINDS) is kind


def test_the_table_is_the_rows_above() -> None:
    """A row added or dropped shows here, so its test above is written with it."""
    assert set(EXCEPTION_KINDS) == {
        TotalTimeout, TimeoutError, ssl.SSLError, ConnectionError, http.client.HTTPException}
    connecting = {**EXCEPTION_KINDS, OSError: Kind.CONNECT}
    assert connecting == CONNECT_EXCEPTION_KINDS


@pytest.mark.parametrize("exc, kind", [
    (ssl.SSLWantReadError("want read"), Kind.TLS),
    (ssl.SSLCertVerificationError("bad certificate"), Kind.TLS),
    (ssl.SSLEOFError("eof"), Kind.TLS),
    (ConnectionRefusedError(111, "refused"), Kind.CONNECT),
    (BrokenPipeError(32, "broken pipe"), Kind.CONNECT),
    (ProxyRefused("403 from the proxy"), Kind.CONNECT),
    # A ConnectionResetError and a BadStatusLine: its MRO names the connection first.
    (http.client.RemoteDisconnected("closed"), Kind.CONNECT),
    (http.client.IncompleteRead(b"abc", 10), Kind.PROTOCOL),
    (http.client.LineTooLong("header line"), Kind.PROTOCOL),
])
def test_subclasses_take_their_nearest_row(exc: Exception, kind: Kind) -> None:
    assert exception_kind(exc) is kind


def test_the_nearest_class_of_the_mro_wins_whatever_the_table_order() -> None:
    class ProtocolFirst(http.client.HTTPException, ConnectionError):
        pass

    class ConnectionFirst(ConnectionError, http.client.HTTPException):
        pass

    assert exception_kind(ProtocolFirst()) is Kind.PROTOCOL
    assert exception_kind(ConnectionFirst()) is Kind.CONNECT


def test_another_os_error_is_a_connect_failure_only_while_connecting() -> None:
    unreachable = OSError(113, "No route to host")
    assert exception_kind(unreachable, CONNECT_EXCEPTION_KINDS) is Kind.CONNECT
    assert exception_kind(unreachable) is DEFAULT_KIND


@pytest.mark.parametrize("exc", [ValueError("x"), KeyError("k"), RuntimeError(), MemoryError()])
def test_an_unknown_exception_is_the_stated_default(exc: BaseException) -> None:
    assert DEFAULT_KIND is Kind.ERROR
    assert exception_kind(exc) is DEFAULT_KIND
    assert exception_kind(exc, CONNECT_EXCEPTION_KINDS) is DEFAULT_KIND
