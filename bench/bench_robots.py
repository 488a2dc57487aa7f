"""robots.txt checks: CPU per URL and memory per file for big robots.txt files.

A 512 KB robots.txt of 25,000 rules (RFC 9309's floor of 500 KiB allows it), with and
without wildcards, checked against 2,000 URLs (half matching some rule, half none):
hive's compiled rules (hive.fetch.robots_rules.AgentRules) against protego's own matcher, which
hive used before. Also the time to compile the file, to load its compiled rules from
the store, and the memory each holds (tracemalloc)::

    python bench/bench_robots.py [--rules 25000]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable

from protego import Protego

from hive.fetch.robots_policy import RobotsPolicy
from hive.fetch.robots_rules import AgentRules


def big_file(rules: int, wildcards: bool) -> bytes:
    """A robots.txt of ``rules`` rules near 512 KB: distinct directories, every fifth an
    Allow, with wildcards (``/dN/*.ext$``, ``/*?sN=``) or without (tests/io/test_robots.py
    uses it too)."""
    lines = ["User-agent: *"]
    for i in range(rules):
        verb = "Allow" if i % 5 == 0 else "Disallow"
        if wildcards:
            lines.append(f"{verb}: /d{i}/*.e{i % 7}$" if i % 2 else f"{verb}: /*?s{i}=")
        else:
            lines.append(f"{verb}: /d{i}/p{i % 13}/")
    return ("\n".join(lines) + "\n").encode()


def urls(rules: int) -> list[str]:
    step = max(1, rules // 1000)
    out = [f"https://a.test/d{i}/p{i % 13}/x.e{i % 7}?s{i}=1" for i in range(0, rules, step)]
    return out + [f"https://a.test/nothing/{i}/here.html" for i in range(len(out))]


def per_call(check: Callable[[str], object], targets: list[str]) -> float:
    started = time.process_time()
    for url in targets:
        check(url)
    return (time.process_time() - started) / len(targets)


def held(build: Callable[[], object]) -> tuple[object, int, float]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.process_time()
    value = build()
    seconds = time.process_time() - started
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return value, size, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=25_000)
    args = parser.parse_args()
    print(f"{'file':<22}{'bytes':>9}{'hive us/url':>13}{'protego us/url':>16}"
          f"{'compile ms':>12}{'load ms':>9}{'hive MiB':>10}{'protego MiB':>13}")
    for wildcards in (False, True):
        body = big_file(args.rules, wildcards)
        policy = RobotsPolicy(agent="hive", cache_ttl=1.0, max_bytes=len(body),
                              max_redirects=5, tries=3, retry_delay=1.0)
        rules, hive_bytes, compile_s = held(
            lambda body=body, policy=policy: policy.from_fetch(200, body, 0.0, 1).rules)
        assert rules.compiled is not None  # type: ignore[attr-defined]
        encoded = rules.compiled.encode()  # type: ignore[attr-defined]
        started = time.process_time()
        AgentRules.decode(encoded)
        load_s = time.process_time() - started
        text = body.decode()
        parsed, protego_bytes, _ = held(lambda text=text: Protego.parse(text))
        targets = urls(args.rules)
        hive_us = per_call(rules.check, targets) * 1e6  # type: ignore[attr-defined]
        few = targets[:: max(1, len(targets) // 100)]
        protego_us = per_call(lambda u, p=parsed: p.can_fetch(u, "hive"), few) * 1e6  # type: ignore[attr-defined]
        name = f"{args.rules} rules" + (", wildcards" if wildcards else "")
        print(f"{name:<22}{len(body):>9}{hive_us:>13.1f}{protego_us:>16.0f}"
              f"{compile_s * 1e3:>12.0f}{load_s * 1e3:>9.0f}{hive_bytes / 2**20:>10.1f}"
              f"{protego_bytes / 2**20:>13.1f}")


if __name__ == "__main__":
    main()
