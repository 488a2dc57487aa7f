"""A real web server for the suite: Debian's nginx, started by the test on 127.0.0.3.

Four virtual hosts under ``nginx.test`` (one registered domain, so hive's
default ``domain`` scope follows links between them), two on an http port and
two, with certificates from a CA made here, on an https port (chosen by SNI).
gzip is on. They serve real documentation, subtrees of python3-doc's HTML,
plus a few edge pages written below: a robots.txt disallowing a directory that
pages link into, a directory linked without its slash (nginx's 301), a dead
link, links spelled as real pages spell them (non-ASCII, spaces, escapes, dot
segments, no scheme, upper case, a query on a static file), and a page linking
to the other hosts. One host closes every third connection, one closes idle
connections before hive's next request is due. nginx runs in the foreground as
the current user, with its prefix, config, pid, logs and temp files under the
test's directory, and logs each request as a JSON line whose times are nginx's
own: a request ended at ``$msec`` and started ``$request_time`` before.

Under ``CI=true`` a missing nginx or python3-doc fails the test (``.ci/run``
installs both); elsewhere it skips.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import NoReturn

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hive.testweb import Request
from tests.conftest import wait_for
from tests.real.reachable import Vhost

ADDRESS = "127.0.0.3"
DOMAIN = "nginx.test"
PACKAGES = "nginx python3-doc"
# Each request as a JSON line (nginx escapes the strings).
LOG_FORMAT = (
    '{"msec": $msec, "request_time": $request_time, "scheme": "$scheme", "host": "$host", '
    '"http_host": "$http_host", "port": $server_port, "request": "$request", '
    '"status": $status, "encoding": "$sent_http_content_encoding", "client": "$remote_addr", '
    '"connection": $connection, "connection_requests": $connection_requests}'
)
# Each host: its scheme, the docs subtrees it serves, and nginx directives of its own.
HOSTS = {
    "www": ("http", ("tutorial", "reference"), ""),
    "lib": ("http", ("library",), "keepalive_requests 3;"),  # a connection serves three
    # Idle connections close before the next request is due: each pooled one is stale.
    "howto": ("https", ("howto",), "keepalive_timeout 40ms;"),
    "capi": ("https", ("c-api",), ""),
}
# The robots.txt of each host that has one, what its rules ask of hive, its Crawl-delay.
ROBOTS = {
    "www": (
        "User-agent: *\nDisallow: /private/\nDisallow: /library/\nCrawl-delay: 0.15\n",
        ((False, "/private/"), (False, "/library/")), 0.15,
    ),
    # Prefixes that are not directories, and an Allow more specific than a Disallow.
    "lib": (
        "User-agent: *\n"
        + "".join(f"Disallow: /library/{letter}\n" for letter in "aceimst")
        + "Allow: /library/string.html\n",
        (*((False, f"/library/{letter}") for letter in "aceimst"),
         (True, "/library/string.html")), None,
    ),
    # hive's own group, not the catch-all.
    "capi": (
        "User-agent: *\nDisallow: /\n\nUser-agent: hive\nDisallow: /c-api/init\n"
        "Disallow: /c-api/memory.html\n",
        ((False, "/c-api/init"), (False, "/c-api/memory.html")), None,
    ),
}


def unavailable(what: str) -> NoReturn:
    """Skip for want of ``what``, or fail under CI, where it must have been installed."""
    message = f"{what} is not installed (apt-get install {PACKAGES})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}: under CI=true the real-server test must run", pytrace=False)
    pytest.skip(message)


def docs_html() -> Path | None:
    """python3-doc's HTML directory, found through dpkg's file list (it is a symlink to the
    versioned package's directory)."""
    if shutil.which("dpkg") is None:
        return None
    listing = subprocess.run(["dpkg", "-L", "python3-doc"], capture_output=True, text=True)
    for line in listing.stdout.splitlines():
        if line.endswith("/html") and (Path(line) / "index.html").is_file():
            return Path(line).resolve()
    return None


@dataclass(frozen=True)
class Hit:
    """One line of nginx's access log."""

    scheme: str
    host: str
    http_host: str
    port: int
    method: str
    target: str
    status: int
    start: float
    end: float
    encoding: str
    client: str
    connection: int
    connection_requests: int

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    def request(self) -> Request:
        """This hit as hive.testweb logs a request, for its politeness check."""
        return Request(self.http_host, self.target, self.method, self.status, self.start,
                       self.end, self.client)

    @classmethod
    def from_json(cls, line: str) -> Hit:
        entry = json.loads(line)
        method, target, _ = (entry["request"].split(" ") + ["", ""])[:3]
        end = float(entry["msec"])
        return cls(entry["scheme"], entry["host"], entry["http_host"], int(entry["port"]),
                   method, target, int(entry["status"]), end - float(entry["request_time"]),
                   end, entry["encoding"], entry["client"], int(entry["connection"]),
                   int(entry["connection_requests"]))


class Authority:
    """A certificate authority made for one run, and the server certificates it signs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hive real-server CA")])
        usage = dict.fromkeys(
            ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
             "key_agreement", "encipher_only", "decipher_only"), False)
        cert = (
            self._builder(self.name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(key_cert_sign=True, crl_sign=True, **usage),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()),
                           critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self.path = folder / "ca.pem"
        self.path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, host: str) -> tuple[Path, Path]:
        """A server certificate for ``host``: (certificate file, key file)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
        cert = (
            self._builder(subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False)
            .sign(self.key, hashes.SHA256())
        )
        cert_path, key_path = self.folder / f"{host}.pem", self.folder / f"{host}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        return cert_path, key_path

    def _builder(self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey
                 ) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
        )


def edge_pages(http_port: int, https_port: int) -> dict[str, str]:
    """The pages written for www, by path: the cases real sites have that the docs do not."""

    def page(title: str, *links: str) -> str:
        items = "".join(f'  <li><a href="{escape(href)}">{escape(href)}</a></li>\n'
                        for href in links)
        return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
                f"</head>\n<body><h1>{title}</h1>\n<ul>\n{items}</ul></body></html>\n")

    return {
        "index.html": page(
            "hive's real-server test", "/tutorial/", "reference/index.html", "/dir",
            "/missing.html", "/private/", "private/notes.html", "/hosts.html",
            "/spellings.html",
        ),
        "dir/index.html": page("A directory", "page.html", "../index.html#top"),
        "dir/page.html": page("A page in a directory", "./"),
        "private/index.html": page("Disallowed", "notes.html"),
        "private/notes.html": page("Disallowed too"),
        "spellings.html": page(
            "Links spelled as pages do", "caf\u00e9.html", "two words.html", "dash%2Descaped.html",
            f"//www.{DOMAIN}:{http_port}/relative-scheme.html",
            f"HTTP://WWW.{DOMAIN.upper()}:{http_port}/upper-case-host.html",
            "a/../../dot-segments.html", "query.html?x=1&y=%C3%A9", "/tutorial",
        ),
        **{name: page(name) for name in (
            "caf\u00e9.html", "two words.html", "dash-escaped.html", "relative-scheme.html",
            "upper-case-host.html", "dot-segments.html", "query.html")},
        "hosts.html": page(
            "The other hosts", f"https://howto.{DOMAIN}:{https_port}/howto/",
            f"https://capi.{DOMAIN}:{https_port}/c-api/",
            f"http://lib.{DOMAIN}:{http_port}/library/",
        ),
    }


class Nginx:
    """nginx serving the vhosts below from files under ``folder``, until ``stop``."""

    def __init__(self, folder: Path, docs: Path) -> None:
        self.folder = folder
        self.docs = docs
        self.access_log = folder / "logs" / "access.jsonl"
        self.error_log = folder / "logs" / "error.log"
        self.ca = Authority(folder)
        self.process: subprocess.Popen[bytes] | None = None
        self.vhosts: dict[str, Vhost] = {}

    @property
    def resolve(self) -> str:
        """The ``dns.resolve`` entry sending every vhost here."""
        return f"*.{DOMAIN}={ADDRESS}"

    def seeds(self) -> list[str]:
        return [f"{self.vhosts['www'].origin}/"]

    def hits(self) -> list[Hit]:
        return [Hit.from_json(line) for line in self.access_log.read_text().splitlines()]

    def start(self, tries: int = 3) -> None:
        """Start on two free ports; another process may take one between our probe and
        nginx's bind, so a start that loses that race is retried on new ports."""
        errors = ""
        for _ in range(tries):
            ports = free_ports(2)
            self._layout(*ports)
            conf = self._write_conf()
            self.error_log.write_text("")
            self.process = subprocess.Popen(
                [nginx_binary(), "-p", str(self.folder), "-c", str(conf), "-e",
                 str(self.error_log)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            if wait_for(functools.partial(self._started, ports), timeout=20) == "listening":
                return
            errors = self.error_log.read_text()
            if "Address already in use" not in errors:
                break
        raise AssertionError(f"nginx did not start:\n{errors}")

    def _started(self, ports: list[int]) -> str | None:
        """Whether nginx has exited ("exited") or listens on all ``ports`` ("listening");
        None while neither."""
        assert self.process is not None
        if self.process.poll() is not None:
            return "exited"
        return "listening" if all(listening(port) for port in ports) else None

    def stop(self) -> None:
        """Stop nginx and its worker (a process group of their own)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def _layout(self, http_port: int, https_port: int) -> None:
        """Document roots: a subtree of the docs per host (a symlink, as sites have) and
        the edge pages on www."""
        self.vhosts = {}
        for short, (scheme, dirs, _) in HOSTS.items():
            port = http_port if scheme == "http" else https_port
            root = self.folder / "sites" / short
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            for name in dirs:
                (root / name).symlink_to(self.docs / name, target_is_directory=True)
            robots, rules, crawl_delay = ROBOTS.get(short, (None, (), None))
            if robots is not None:
                (root / "robots.txt").write_text(robots)
            self.vhosts[short] = Vhost(f"{short}.{DOMAIN}", scheme, port, root, rules,
                                       crawl_delay)
        for path, text in edge_pages(http_port, https_port).items():
            target = self.folder / "sites" / "www" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def _write_conf(self) -> Path:
        user = ""
        if os.geteuid() == 0:
            # As root nginx would hand its workers to "nobody", who cannot read tmp_path.
            user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n"
        temp = self.folder / "temp"
        servers = []
        for short, vhost in self.vhosts.items():
            tls = ""
            if vhost.scheme == "https":
                cert, key = self.ca.issue(vhost.name)
                tls = f" ssl;\n        ssl_certificate {cert};\n        ssl_certificate_key {key}"
            servers.append(
                f"    server {{\n        listen {ADDRESS}:{vhost.port}{tls};\n"
                f"        server_name {vhost.name};\n        root {vhost.root};\n"
                f"        {HOSTS[short][2]}\n    }}\n"
            )
        (self.folder / "logs").mkdir(exist_ok=True)
        temp.mkdir(exist_ok=True)
        conf = self.folder / "nginx.conf"
        conf.write_text(
            f"{user}worker_processes 1;\ndaemon off;\npid {self.folder / 'nginx.pid'};\n"
            f"error_log {self.error_log} info;\n"
            "events { worker_connections 256; }\n"
            "http {\n"
            "    types { text/html html; text/plain txt; text/css css; "
            "application/javascript js; image/png png; image/svg+xml svg; }\n"
            "    default_type application/octet-stream;\n"
            + "".join(f"    {kind}_temp_path {temp / kind};\n"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + f"    log_format hive escape=json '{LOG_FORMAT}';\n"
            f"    access_log {self.access_log} hive;\n"
            "    sendfile on;\n"
            "    gzip on;\n    gzip_vary on;\n"
            "    gzip_types text/plain text/css application/javascript image/svg+xml;\n"
            + "".join(servers)
            + "}\n"
        )
        return conf


def nginx_binary() -> str:
    # Debian installs it in /usr/sbin, which a user's PATH may lack.
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if found is None:
        unavailable("nginx")
    return found


def free_ports(count: int) -> list[int]:
    """Ports free on ADDRESS a moment ago (all probed at once, so they differ)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((ADDRESS, 0))
        return [probe.getsockname()[1] for probe in probes]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((ADDRESS, port)) == 0


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    """nginx on 127.0.0.3 serving the vhosts, for the module's tests."""
    nginx_binary()
    docs = docs_html()
    if docs is None:
        unavailable("python3-doc")
    server = Nginx(tmp_path_factory.mktemp("nginx"), docs)
    try:
        server.start()
        yield server
    finally:
        server.stop()
