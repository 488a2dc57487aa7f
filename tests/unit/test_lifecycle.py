"""Process settings a worker applies to itself: open files, malloc arenas."""

from __future__ import annotations

import platform
import resource
import subprocess
import sys

import pytest

from hive.lifecycle import raise_open_files


def test_open_files_rise_to_the_hard_limit() -> None:
    soft = raise_open_files()
    assert soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 1024


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_malloc_arenas_are_capped_under_glibc() -> None:
    # In a child: mallopt changes the process it runs in, and threads must not exist yet.
    code = "from hive.lifecycle import limit_malloc_arenas; print(limit_malloc_arenas())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=30, check=True)
    assert result.stdout.strip() == "True"
