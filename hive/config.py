"""Configuration: frozen dataclasses loaded from conf/default.toml and overrides.

Merge order (later wins): the default file < a user file < ``HIVE_SECTION__KEY``
environment variables < ``-s/--set section.key=value`` flags. Defaults live only
in ``conf/default.toml``; this module holds the shapes and the checks. Every
error names the offending key.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import ipaddress
import os
import re
import ssl
import tomllib
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from hive.errors import ConfigError
from hive.netspec import Proxy, networks, parse_override
from hive.outcome import parse_kinds
from hive.plugins import load_object


def _default_file() -> Traversable:
    """conf/default.toml: inside the package where a wheel puts it (``hive/conf/``, mapped
    from conf/ by pyproject.toml), else beside the package in a source checkout (run from
    it, or installed editable)."""
    packaged = importlib.resources.files("hive") / "conf" / "default.toml"
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / "conf" / "default.toml"


DEFAULT_FILE = _default_file()

# The compression levels of ISA-L, which writes the WARC files' gzip members.
GZIP_LEVELS = range(4)
# The most worker processes a hive starts (--procs and hive.procs alike).
MAX_WORKERS = 256
# Hosts a worker reports for `hive status --hosts` (hive/procs/hoststatus.py), at most.
MAX_STATUS_HOSTS = 100


@dataclass(frozen=True, slots=True)
class FrontierConfig:
    levels: int
    level_ratio: float
    prioritizer: str
    max_bound_hosts: int
    min_bound_hosts: int
    draw_batch: int
    park_horizon: float
    aging: float
    max_depth: int
    max_urls_per_host: int
    refusals_logged_per_host: int
    max_retries: int
    retry_outcomes: list[str]
    txn_max_ops: int
    map_size_mb: int
    sync_interval: float


@dataclass(frozen=True, slots=True)
class PriorityConfig:
    inlink_levels: float
    scorer: str
    scorer_timeout: float
    score_levels: float


@dataclass(frozen=True, slots=True)
class PolitenessConfig:
    delay_factor: float
    min_delay: float
    max_delay: float
    crawl_delay_cap: float
    crawl_delay_over_cap: str
    backoff_base: float
    backoff_max: float
    retry_after_cap: float
    host_failure_outcomes: list[str]
    ip_concurrency: int
    ip_min_delay: float
    ip_grant_hold: float


@dataclass(frozen=True, slots=True)
class FetchConfig:
    threads: int
    user_agent: str
    connect_timeout: float
    connect_attempts: int
    read_timeout: float
    total_timeout: float
    max_body_bytes: int
    max_decoded_bytes: int
    max_redirect_hops: int
    pool_connections: int
    ca_file: str
    ca_dir: str
    verify_tls: bool
    headers: list[str]
    cookies: bool
    max_cookie_bytes: int
    max_cookie_header_bytes: int
    max_cookies_per_host: int
    cookie_jar_mb: float
    proxy: str
    no_proxy: list[str]
    proxy_allow_nets: list[str]


@dataclass(frozen=True, slots=True)
class DnsConfig:
    min_ttl: float
    max_ttl: float
    default_ttl: float
    negative_ttl: float
    cache_size: int
    timeout: float
    resolve: list[str]
    allow_private: bool
    allow_nets: list[str]


@dataclass(frozen=True, slots=True)
class RobotsConfig:
    enabled: bool
    cache_ttl: float
    max_bytes: int
    max_redirects: int
    tries: int
    retry_delay: float
    unreachable_retry: float
    max_stale: float
    cache_mb: float


@dataclass(frozen=True, slots=True)
class ScopeConfig:
    mode: str
    allow: list[str]
    deny: list[str]
    max_url_length: int
    max_path_depth: int
    max_segment_repeat: int
    honour_nofollow: bool
    session_ids: list[str]
    embeds: str
    max_embed_hops: int
    max_hosts_per_domain: int
    max_pages_per_domain: int


@dataclass(frozen=True, slots=True)
class ParseConfig:
    max_links_per_page: int
    max_embeds_per_page: int
    max_css_bytes: int


@dataclass(frozen=True, slots=True)
class SitemapsConfig:
    mode: str
    max_index_depth: int
    max_files_per_host: int
    base_level: int
    priority_levels: int
    fresh_days: float
    fresh_levels: int
    changefreq_levels: int
    max_adjust: int


@dataclass(frozen=True, slots=True)
class WarcConfig:
    enabled: bool
    max_file_bytes: int
    gzip_level: int
    revisits: bool
    revisit_min_bytes: int
    dedup_from: str
    metadata_records: bool


@dataclass(frozen=True, slots=True)
class RecrawlConfig:
    plan: str
    order: str


@dataclass(frozen=True, slots=True)
class OutputsConfig:
    sinks: list[str]


@dataclass(frozen=True, slots=True)
class TextConfig:
    max_chars: int


@dataclass(frozen=True, slots=True)
class LogConfig:
    level: str
    crawl_log_max_bytes: int


@dataclass(frozen=True, slots=True)
class HiveConfig:
    procs: int
    vnodes: int
    ring_seed: int
    ring_key: str
    resend_after: float
    max_tries: int
    recent_links_mb: float
    outbox_window: float
    overflow: int
    overflow_mb: float
    stats_interval: float
    status_hosts: int
    metrics_port: int
    metrics_bind: str
    metrics_allow_remote: bool
    hung_after: float
    restart_backoff: float
    max_restarts: int
    restart_window: float
    transport: str
    tcp_host: str
    tcp_port: int
    curve: str


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    lease: float
    renew: float
    port: int
    node_data: str


@dataclass(frozen=True, slots=True)
class Config:
    frontier: FrontierConfig
    priority: PriorityConfig
    politeness: PolitenessConfig
    fetch: FetchConfig
    dns: DnsConfig
    robots: RobotsConfig
    scope: ScopeConfig
    parse: ParseConfig
    sitemaps: SitemapsConfig
    warc: WarcConfig
    recrawl: RecrawlConfig
    outputs: OutputsConfig
    text: TextConfig
    log: LogConfig
    hive: HiveConfig
    cluster: ClusterConfig

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The config as plain data (for hive.json and child processes)."""
        return dataclasses.asdict(self)

    def replace(self, **sections: dict[str, Any]) -> Config:
        """A copy with some keys changed: ``cfg.replace(fetch={"threads": 4})``."""
        return from_dict(_merge(self.to_dict(), sections, "override"))


SECTIONS: dict[str, type[Any]] = {
    f.name: typing.get_type_hints(Config)[f.name] for f in dataclasses.fields(Config)
}

# Values outside these sets or below these minima are refused, naming the key.
CHOICES: dict[str, tuple[str, ...]] = {
    "politeness.crawl_delay_over_cap": ("cap", "skip"),
    "scope.mode": ("host", "domain", "any"),
    "scope.embeds": ("any", "same_domain", "off"),
    "sitemaps.mode": ("robots", "robots+default", "off"),
    "log.level": ("debug", "info", "warning", "error"),
    "hive.transport": ("ipc", "tcp"),
    "hive.curve": ("auto", "always"),
    "hive.ring_key": ("domain", "host"),
    "recrawl.order": ("change_rate", "plain"),
}
MINIMUM_ONE = {
    "frontier.levels", "frontier.max_bound_hosts", "frontier.min_bound_hosts",
    "frontier.draw_batch", "frontier.txn_max_ops", "frontier.map_size_mb",
    "fetch.threads", "fetch.max_body_bytes", "fetch.max_decoded_bytes", "dns.cache_size",
    "fetch.connect_attempts",
    "robots.tries", "robots.max_bytes", "scope.max_url_length", "scope.max_segment_repeat",
    "warc.max_file_bytes", "fetch.pool_connections", "hive.procs", "hive.vnodes",
    "warc.revisit_min_bytes", "hive.max_tries", "hive.overflow", "hive.tcp_port",
    "parse.max_links_per_page", "parse.max_embeds_per_page", "parse.max_css_bytes",
    "sitemaps.max_files_per_host", "sitemaps.base_level", "fetch.max_cookie_bytes",
    "fetch.max_cookie_header_bytes", "fetch.max_cookies_per_host", "text.max_chars",
}


def _check_value(key: str, kind: Any, value: Any) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    if typing.get_origin(kind) is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
        return list(value)
    raise ConfigError(f"{key}: unsupported type {kind!r}")


def _check_range(key: str, value: Any) -> None:
    if key in CHOICES and value not in CHOICES[key]:
        raise ConfigError(f"{key}: must be one of {', '.join(CHOICES[key])}, got {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ConfigError(f"{key}: must not be negative, got {value!r}")
        if key in MINIMUM_ONE and value < 1:
            raise ConfigError(f"{key}: must be at least 1, got {value!r}")

# A URL's hop path keeps its last 16 letters (hive.core.record.MAX_PATH_LETTERS): a longer
# chain of embeds could not be counted.
MAX_EMBED_HOPS = 16

# Request headers the fetcher writes itself (fetch.headers may not repeat them).
FETCHER_HEADERS = frozenset({
    "host", "user-agent", "accept-encoding", "cookie", "connection", "content-length",
    "transfer-encoding", "te", "upgrade", "proxy-authorization",
})
_HEADER_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([\x20-\x7e\x80-\xff]*)")


def _check_fetch(cfg: FetchConfig) -> None:
    for line in cfg.headers:
        match = _HEADER_LINE.fullmatch(line)
        if match is None:
            raise ConfigError(f"fetch.headers: expected 'Name: value' on one line, got {line!r}")
        if match.group(1).lower() in FETCHER_HEADERS:
            raise ConfigError(f"fetch.headers: {match.group(1)} is set by the fetcher")
    if cfg.max_cookie_bytes > cfg.max_cookie_header_bytes:
        raise ConfigError(
            f"fetch.max_cookie_bytes: must not exceed fetch.max_cookie_header_bytes "
            f"({cfg.max_cookie_header_bytes}), or a cookie kept could not be sent, "
            f"got {cfg.max_cookie_bytes}")
    if cfg.cookie_jar_mb <= 0:
        raise ConfigError(f"fetch.cookie_jar_mb: must be positive, got {cfg.cookie_jar_mb}")
    if cfg.ca_file and not Path(cfg.ca_file).is_file():
        raise ConfigError(f"fetch.ca_file: no such file: {cfg.ca_file}")
    if cfg.ca_dir and not Path(cfg.ca_dir).is_dir():
        raise ConfigError(f"fetch.ca_dir: no such directory: {cfg.ca_dir}")
    Proxy.parse(cfg.proxy, cfg.no_proxy)
    networks("fetch.proxy_allow_nets", cfg.proxy_allow_nets)
    if cfg.ca_file:
        try:
            ssl.create_default_context(cafile=cfg.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"fetch.ca_file: no CA certificate in {cfg.ca_file}: {exc}") from exc


def _check_cluster(cfg: ClusterConfig) -> None:
    if not 0 < cfg.renew <= cfg.lease / 2:
        raise ConfigError(f"cluster.renew: must be more than 0 and at most half of cluster.lease "
                          f"({cfg.lease:g}), got {cfg.renew:g}")
    if not 1024 <= cfg.port <= 65535 - CLUSTER_PORTS * 16:
        raise ConfigError(f"cluster.port: must be in 1024..{65535 - CLUSTER_PORTS * 16}, "
                          f"got {cfg.port}")
    if "{node}" not in cfg.node_data:
        raise ConfigError("cluster.node_data: must name {node} (one data directory per "
                          f"machine), got {cfg.node_data!r}")
    try:
        cfg.node_data.format(data="d", node="n")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"cluster.node_data: only {{data}} and {{node}} may be named, got "
                          f"{cfg.node_data!r}") from exc


# The ports one machine of a cluster takes from its base (cluster.port + its index x this):
# its splitter, supervisor and control, and its workers' inboxes (hive.procs.cluster_plan).
CLUSTER_PORTS = 100


def _check_whole(cfg: Config) -> None:
    _check_fetch(cfg.fetch)
    if not 0 < cfg.frontier.level_ratio <= 1:
        ratio = cfg.frontier.level_ratio
        raise ConfigError(f"frontier.level_ratio: must be in (0, 1], got {ratio}")
    if ":" not in cfg.frontier.prioritizer:
        raise ConfigError(
            f"frontier.prioritizer: expected 'module:function', got {cfg.frontier.prioritizer!r}"
        )
    if cfg.politeness.min_delay > cfg.politeness.max_delay:
        raise ConfigError("politeness.min_delay: must not exceed politeness.max_delay")
    if cfg.politeness.ip_concurrency and cfg.politeness.ip_grant_hold <= 0:
        raise ConfigError("politeness.ip_grant_hold: must be above 0 while "
                          f"politeness.ip_concurrency is on, got {cfg.politeness.ip_grant_hold}")
    if cfg.hive.hung_after < 4 * cfg.hive.stats_interval:
        raise ConfigError("hive.hung_after: must be at least 4 x hive.stats_interval (a worker "
                          f"reports every {cfg.hive.stats_interval:g}s)")
    _check_metrics(cfg.hive)
    _check_cluster(cfg.cluster)
    if cfg.dns.min_ttl > cfg.dns.max_ttl:
        raise ConfigError("dns.min_ttl: must not exceed dns.max_ttl")
    if cfg.hive.procs > MAX_WORKERS:
        raise ConfigError(f"hive.procs: must be at most {MAX_WORKERS}, got {cfg.hive.procs}")
    for key, kinds in (("frontier.retry_outcomes", cfg.frontier.retry_outcomes),
                       ("politeness.host_failure_outcomes", cfg.politeness.host_failure_outcomes)):
        try:
            parse_kinds(key, kinds)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    _check_dns(cfg.dns)
    if cfg.scope.max_embed_hops > MAX_EMBED_HOPS:
        raise ConfigError(f"scope.max_embed_hops: must be at most {MAX_EMBED_HOPS} (the letters "
                          f"a hop path keeps), got {cfg.scope.max_embed_hops}")
    if cfg.sitemaps.base_level > cfg.frontier.levels:
        raise ConfigError(f"sitemaps.base_level: must be at most frontier.levels "
                          f"({cfg.frontier.levels}), got {cfg.sitemaps.base_level}")
    load_object("frontier.prioritizer", cfg.frontier.prioritizer)
    _check_priority(cfg.priority)
    if cfg.warc.gzip_level not in GZIP_LEVELS:
        raise ConfigError(
            f"warc.gzip_level: must be 0..{GZIP_LEVELS[-1]} (ISA-L's levels), "
            f"got {cfg.warc.gzip_level}"
        )
    if cfg.warc.dedup_from and not Path(cfg.warc.dedup_from).is_file():
        raise ConfigError(f"warc.dedup_from: no such file: {cfg.warc.dedup_from}")
    if cfg.recrawl.plan and not Path(cfg.recrawl.plan).is_file():
        raise ConfigError(f"recrawl.plan: no such file: {cfg.recrawl.plan}")
    _check_sinks(cfg.outputs.sinks)


def _check_priority(cfg: PriorityConfig) -> None:
    """The scorer loads before any process starts; its time limit is positive."""
    if cfg.scorer:
        if ":" not in cfg.scorer:
            raise ConfigError(f"priority.scorer: expected 'module:function', got {cfg.scorer!r}")
        load_object("priority.scorer", cfg.scorer)
    if cfg.scorer_timeout <= 0:
        raise ConfigError(f"priority.scorer_timeout: must be positive, got {cfg.scorer_timeout}")


def _check_sinks(sinks: list[str]) -> None:
    """Each sink is named once, by a ``module:function`` path that loads (hive.fetch.sinks)."""
    for i, path in enumerate(sinks):
        if ":" not in path:
            raise ConfigError(f"outputs.sinks: expected 'module:function', got {path!r}")
        if path in sinks[:i]:
            raise ConfigError(f"outputs.sinks: {path!r} is named twice")
        load_object("outputs.sinks", path)


def _check_metrics(cfg: HiveConfig) -> None:
    """hive.status_hosts is bounded (it is sent in every report); /metrics stays on loopback
    unless allowed beyond it."""
    if cfg.status_hosts > MAX_STATUS_HOSTS:
        raise ConfigError(f"hive.status_hosts: must be at most {MAX_STATUS_HOSTS}, "
                          f"got {cfg.status_hosts}")
    if cfg.metrics_port > 65535:
        raise ConfigError(f"hive.metrics_port: must be at most 65535, got {cfg.metrics_port}")
    try:
        address = ipaddress.ip_address(cfg.metrics_bind)
    except ValueError as exc:
        raise ConfigError(
            f"hive.metrics_bind: expected an IP address, got {cfg.metrics_bind!r}") from exc
    if not address.is_loopback and not cfg.metrics_allow_remote:
        raise ConfigError(
            f"hive.metrics_bind: {cfg.metrics_bind} is not a loopback address; /metrics has no "
            "authentication, so set hive.metrics_allow_remote = true to serve it beyond this "
            "machine")


def _check_dns(dns_cfg: DnsConfig) -> None:
    """dns.resolve and dns.allow_nets parse as the workers will parse them, before any starts."""
    for entry in dns_cfg.resolve:
        parse_override(entry)
    networks("dns.allow_nets", dns_cfg.allow_nets)


def from_dict(data: Mapping[str, Any]) -> Config:
    """Build and validate a Config from complete plain data."""
    unknown = set(data) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"unknown config section: {sorted(unknown)[0]}")
    sections: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        raw = data.get(name)
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{name}: missing section")
        hints = typing.get_type_hints(cls)
        extra = set(raw) - set(hints)
        if extra:
            raise ConfigError(f"unknown config key: {name}.{sorted(extra)[0]}")
        values = {}
        for field, kind in hints.items():
            key = f"{name}.{field}"
            if field not in raw:
                raise ConfigError(f"{key}: missing")
            values[field] = _check_value(key, kind, raw[field])
            _check_range(key, values[field])
        sections[name] = cls(**values)
    cfg = Config(**sections)
    _check_whole(cfg)
    return cfg


def _merge(base: dict[str, Any], over: Mapping[str, Any], origin: str) -> dict[str, Any]:
    merged = {k: dict(v) for k, v in base.items()}
    for section, values in over.items():
        if section not in merged:
            raise ConfigError(f"unknown config section: {section} (in {origin})")
        if not isinstance(values, Mapping):
            raise ConfigError(f"{section}: expected a table (in {origin})")
        for key, value in values.items():
            if key not in merged[section]:
                raise ConfigError(f"unknown config key: {section}.{key} (in {origin})")
            merged[section][key] = value
    return merged


def _parse_scalar(text: str) -> Any:
    """A TOML value if the text is one (8, 0.5, true, ["a"]), else the text as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_overrides(items: Iterable[str], origin: str = "--set") -> dict[str, dict[str, Any]]:
    """Turn ``section.key=value`` strings into a nested override mapping."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        section, dot, key = name.strip().partition(".")
        if not sep or not dot or not section or not key:
            raise ConfigError(f"{origin}: expected section.key=value, got {item!r}")
        out.setdefault(section, {})[key] = _parse_scalar(value.strip())
    return out


def env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``HIVE_FETCH__THREADS=8`` -> {"fetch": {"threads": 8}}."""
    items = [
        f"{name[5:].lower().replace('__', '.', 1)}={value}"
        for name, value in environ.items()
        if name.startswith("HIVE_") and "__" in name
    ]
    return parse_overrides(items, origin="environment")


def read_toml(path: Traversable) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def load(
    user_file: Path | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load the config: default file < user file < HIVE_* environment < overrides."""
    data = read_toml(DEFAULT_FILE)
    if user_file is not None:
        data = _merge(data, read_toml(user_file), str(user_file))
    data = _merge(data, env_overrides(os.environ if environ is None else environ), "environment")
    data = _merge(data, parse_overrides(overrides), "--set")
    return from_dict(data)
