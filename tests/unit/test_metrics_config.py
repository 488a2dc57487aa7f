"""The metrics and hosts keys: /metrics stays on loopback unless allowed, reports stay bounded."""

from __future__ import annotations

import pytest

from hive import config
from hive.errors import ConfigError


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["hive.metrics_bind='0.0.0.0'"], "not a loopback address"),
        (["hive.metrics_bind='192.0.2.7'", "hive.metrics_port=9108"], "metrics_allow_remote"),
        (["hive.metrics_bind='localhost'"], "expected an IP address"),
        (["hive.metrics_port=70000"], "at most 65535"),
        (["hive.status_hosts=101"], "at most 100"),
        (["hive.status_hosts=-1"], "must not be negative"),
    ],
)
def test_bad_metrics_and_hosts_settings_are_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config.load(overrides=overrides, environ={})


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.5", "::1"])
def test_loopback_binds_need_no_permission(bind: str) -> None:
    cfg = config.load(overrides=[f"hive.metrics_bind='{bind}'"], environ={})
    assert cfg.hive.metrics_bind == bind and not cfg.hive.metrics_allow_remote


def test_a_remote_bind_is_taken_when_allowed_explicitly() -> None:
    cfg = config.load(overrides=["hive.metrics_bind='0.0.0.0'", "hive.metrics_allow_remote=true"],
                      environ={})
    assert cfg.hive.metrics_bind == "0.0.0.0"


def test_metrics_are_off_by_default() -> None:
    assert config.load(environ={}).hive.metrics_port == 0
