"""Servers the service-backed tests share: started on loopback per module, stopped after; a test
that needs one is skipped, saying how to install it, where its executable is missing."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

from faasml.testing.servers import LocalServer, MemcachedServer, RedisServer

# Measured job profiles are cached per test session (a job measured once serves every test that
# runs it), never in the user's own cache.
os.environ.setdefault("FAASML_CACHE", tempfile.mkdtemp(prefix="faasml-test-cache-"))
# A cached profile is re-checked against the machine only in the tests of the re-check
# (tests/runtime/test_profile_check.py): elsewhere a profile measured in this session serves.
os.environ.setdefault("FAASML_PROFILE_RECHECK", "0")

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
