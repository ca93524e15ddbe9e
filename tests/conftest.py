"""Servers the service-backed tests share: started on loopback per module, stopped after; a test
that needs one is skipped, saying how to install it, where its executable is missing."""

from __future__ import annotations

import os
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from faasml.testing.servers import LocalServer, MemcachedServer, RedisServer

# Measured job profiles are cached per test session (a job measured once serves every test that
# runs it), never in the user's own cache.
os.environ.setdefault("FAASML_CACHE", tempfile.mkdtemp(prefix="faasml-test-cache-"))
# A cached profile is re-checked against the machine only in the tests of the re-check
# (tests/runtime/test_profile_check.py): elsewhere a profile measured in this session serves.
os.environ.setdefault("FAASML_PROFILE_RECHECK", "0")

# No test reads the machine's load average: faasml takes it from FAASML_LOAD_AVERAGE (a test that
# wants another sets its own), and a read of the real one by faasml or test code fails the test
# (``_no_machine_load``). Functions and subprocesses inherit the setting.
os.environ["FAASML_LOAD_AVERAGE"] = "0.5"
# The key that signs pickled training functions (faasml._signing): the session's own, never
# the user's.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="faasml-test-config-")

# Property tests draw the same examples on every run of ``make test`` ("ci"): a run that fails
# fails again, on any machine. ``make explore`` draws new ones ("explore"): a search for bugs,
# not a gate; a failure it finds becomes an ``@example`` or a regression test.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def started(server: LocalServer) -> Iterator[LocalServer]:
    if not server.available():
        pytest.skip(f"'{server.program}' is not installed ({server.package_hint})")
    with server:
        yield server


@pytest.fixture(scope="module")
def redis_server() -> Iterator[LocalServer]:
    yield from started(RedisServer())


@pytest.fixture(scope="module")
def memcached_server() -> Iterator[LocalServer]:
    yield from started(MemcachedServer())


@pytest.fixture(scope="module")
def small_item_memcached() -> Iterator[LocalServer]:
    """Memcached with 1 MB items: larger values are chunked."""
    yield from started(MemcachedServer(item_size_mb=1, memory_mb=256))


_OURS = (str(Path(__file__).resolve().parent), f"{os.sep}faasml{os.sep}")


@pytest.fixture(autouse=True)
def _no_machine_load(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail a test in which faasml or test code read the machine's load average (a library's
    own read, such as Ray's, is let through with a fixed figure)."""
    reads: list[str] = []

    def guarded() -> tuple[float, float, float]:
        stack = traceback.extract_stack()[:-1]
        if any(part in stack[-1].filename for part in _OURS):  # who called it
            reads.append("".join(traceback.format_list(stack[-4:])))
        return (0.5, 0.5, 0.5)

    monkeypatch.setattr(os, "getloadavg", guarded)
    yield
    assert not reads, (
        "a test read the machine's load average (set FAASML_LOAD_AVERAGE):\n" + reads[0]
    )
