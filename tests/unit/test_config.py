"""The config file, the dataclasses and the merge order agree; bad keys name themselves."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from hive import config
from hive.errors import ConfigError


def test_default_file_keys_equal_dataclass_fields() -> None:
    data = config.read_toml(config.DEFAULT_FILE)
    assert set(data) == set(config.SECTIONS)
    for name, cls in config.SECTIONS.items():
        assert set(data[name]) == {f.name for f in dataclasses.fields(cls)}, name


def test_every_default_key_has_a_comment() -> None:
    lines = config.DEFAULT_FILE.read_text().splitlines()
    for i, line in enumerate(lines):
        if "=" in line and not line.startswith("#"):
            assert lines[i - 1].startswith("#"), f"no comment above: {line}"


def test_named_keys_exist_with_sane_defaults() -> None:
    cfg = config.load(environ={})
    assert cfg.politeness.delay_factor == 10.0
    assert cfg.politeness.min_delay <= cfg.politeness.max_delay
    assert cfg.politeness.crawl_delay_cap > 0
    assert cfg.fetch.threads == 32
    assert "hive" in cfg.fetch.user_agent
    assert cfg.frontier.levels == 8


def test_merge_order(tmp_path: Path) -> None:
    user = tmp_path / "u.toml"
    user.write_text("[fetch]\nthreads = 4\nconnect_timeout = 3\n")
    env = {"HIVE_FETCH__THREADS": "6", "HIVE_DNS__RESOLVE": '["a.test=127.0.0.2"]'}
    cfg = config.load(user, ["fetch.threads=8"], environ=env)
    assert cfg.fetch.threads == 8
    assert cfg.fetch.connect_timeout == 3.0
    assert cfg.dns.resolve == ["a.test=127.0.0.2"]
    assert config.load(user, environ=env).fetch.threads == 6


def test_string_override_without_quotes() -> None:
    cfg = config.load(overrides=["fetch.user_agent=mybot/1.0 (+https://x.test/)"], environ={})
    assert cfg.fetch.user_agent == "mybot/1.0 (+https://x.test/)"


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("fetch.threadz=3", "fetch.threadz"),
        ("fetchx.threads=3", "fetchx"),
        ("fetch.threads=many", "fetch.threads"),
        ("fetch.threads=0", "fetch.threads"),
        ("fetch.threads=true", "fetch.threads"),
        ("politeness.min_delay=-1", "politeness.min_delay"),
        ("scope.mode=everything", "scope.mode"),
        ("scope.embeds=some", "scope.embeds"),
        ("scope.max_embed_hops=17", "scope.max_embed_hops"),
        ("scope.max_embed_hops=-1", "scope.max_embed_hops"),
        ("frontier.level_ratio=2", "frontier.level_ratio"),
        ("warc.gzip_level=4", "warc.gzip_level"),
        ("dns.resolve=[1, 2]", "dns.resolve"),
        ("politeness.min_delay=100", "politeness.min_delay"),
        ("nodot=1", "nodot"),
    ],
)
def test_bad_values_name_the_key(override: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        config.load(overrides=[override], environ={})


def test_bad_user_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[fetch\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(bad, environ={})
    with pytest.raises(ConfigError, match="cannot read"):
        config.load(tmp_path / "missing.toml", environ={})


def test_replace_and_roundtrip() -> None:
    cfg = config.load(environ={})
    small = cfg.replace(fetch={"threads": 2})
    assert small.fetch.threads == 2 and cfg.fetch.threads == 32
    assert config.from_dict(small.to_dict()) == small
    with pytest.raises(ConfigError, match="fetch.nope"):
        cfg.replace(fetch={"nope": 1})


def test_config_is_frozen() -> None:
    cfg = config.load(environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.fetch.threads = 1  # type: ignore[misc]
    assert typing.get_type_hints(config.FetchConfig)["threads"] is int


@pytest.mark.parametrize("environ, overrides, message", [
    ({"HIVE_HIVE__PROCS": "500"}, (), "hive.procs: must be at most 256, got 500"),
    ({}, ("hive.procs=257",), "hive.procs: must be at most 256, got 257"),
    ({}, ("dns.resolve=['a.test=1.2.3']",), "dns.resolve: bad address '1.2.3'"),
    ({"HIVE_DNS__RESOLVE": "['nonsense']"}, (), "dns.resolve: expected HOST=IP"),
    ({}, ("dns.allow_nets=['fe80::/200']",), "dns.allow_nets: bad network 'fe80::/200'"),
    ({}, ("frontier.prioritizer=hive.core.urls:nothing",), "frontier.prioritizer: cannot load"),
])
def test_every_source_is_checked_before_a_start(environ: dict[str, str],
                                                overrides: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        config.load(overrides=overrides, environ=environ)
    assert config.load(overrides=("hive.procs=256",), environ={}).hive.procs == 256


@pytest.mark.parametrize("override, key, bad", [
    ("frontier.retry_outcomes=['timout']", "frontier.retry_outcomes", "timout"),
    ("frontier.retry_outcomes=['timeout', 'http_5xx']", "frontier.retry_outcomes", "http_5xx"),
    ("politeness.host_failure_outcomes=['conect']", "politeness.host_failure_outcomes", "conect"),
    ("frontier.retry_outcomes=['ok']", "frontier.retry_outcomes", "ok"),
])
def test_an_unknown_outcome_kind_is_refused_with_the_valid_ones(
    override: str, key: str, bad: str
) -> None:
    """A misspelt kind would load silently and turn retries (or host back-off) off."""
    with pytest.raises(ConfigError) as caught:
        config.load(overrides=[override], environ={})
    message = str(caught.value)
    assert message.startswith(f"{key}: {bad!r} is not")
    assert "valid kinds: dns, connect, timeout," in message and "http_<status>" in message
    cfg = config.load(overrides=["frontier.retry_outcomes=['timeout', 'http_418']"], environ={})
    assert cfg.frontier.retry_outcomes == ["timeout", "http_418"]
