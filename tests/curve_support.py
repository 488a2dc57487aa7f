"""Helpers for the CURVE tests: the machine's own address, free ports, handshake outcomes."""

from __future__ import annotations

import contextlib
import ipaddress
import random
import socket
import time
from typing import Any

import psutil
import zmq
from zmq.utils.monitor import recv_monitor_message

HANDSHAKE_OUTCOMES = {
    zmq.EVENT_HANDSHAKE_SUCCEEDED: "succeeded",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "failed",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "failed",
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "failed",
}


def own_address() -> str | None:
    """An IPv4 address of this machine beyond loopback that can be bound, or None."""
    stats = psutil.net_if_stats()
    for name, addresses in sorted(psutil.net_if_addrs().items()):
        if name not in stats or not stats[name].isup:
            continue
        for address in addresses:
            if address.family != socket.AF_INET:
                continue
            ip = ipaddress.ip_address(address.address)
            if ip.is_loopback or ip.is_link_local or ip.is_unspecified:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind((address.address, 0))
                except OSError:
                    continue
            return address.address
    return None


def free_base_port(host: str, count: int) -> int:
    """A port p such that p .. p+count-1 are free on ``host`` right now."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 60000 - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    probe.bind((host, port))
            except OSError:
                continue
        return base
    raise AssertionError(f"no {count} consecutive free ports on {host}")


def handshake(monitor: zmq.Socket[Any], timeout: float = 20.0,
              unanswered: str | None = None) -> str:
    """Wait for the first handshake outcome a socket monitor reports: succeeded or failed.

    A socket whose server is not listening yet keeps retrying its connection
    and reports no outcome; the error names the events it saw instead, unless
    ``unanswered`` is given: it is returned then.
    """
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        if monitor.poll(int(left * 1000)):
            event = recv_monitor_message(monitor)["event"]
            if event in HANDSHAKE_OUTCOMES:
                return HANDSHAKE_OUTCOMES[event]
            seen.append(zmq.Event(event).name)
    if unanswered is not None:
        return unanswered
    raise AssertionError(f"no handshake outcome within {timeout}s; saw {seen[-10:]}")
