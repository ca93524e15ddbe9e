"""The platform conformance suite: every Platform implementation must pass these tests.

Use from a test module with a ``platform`` fixture that yields an open Platform::

    from faasml.testing.platform_conformance import *  # noqa: F403

    @pytest.fixture(params=["local"])
    def platform(request): ...

Tests go through the public contract only (invoke, result, done, cancel, billed, enforcement).
"""

from __future__ import annotations

import time

import pytest

from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import FunctionError, Platform

FN = "faasml.testing.functions"

__all__ = [
    "test_cancel_stops_the_function",
    "test_cold_then_warm",
    "test_error_is_delivered_and_billed",
    "test_instance_crash_is_reported",
    "test_memory_is_enforced",
    "test_memory_outside_the_catalog_is_refused",
    "test_result_and_bill",
    "test_timeout_is_enforced",
]


def _small(platform: Platform) -> int:
    low = platform.catalog.platform.memory_min_mb
    return max(low, 256)


def test_result_and_bill(platform: Platform) -> None:
    memory = _small(platform)
    invocation = platform.invoke(f"{FN}:echo", {"x": [1, 2, 3]}, memory)
    assert invocation.result(timeout=60) == {"x": [1, 2, 3]}
    assert invocation.done()
    billed = invocation.billed
    assert billed is not None and billed.ok
    assert billed.memory_mb == memory
    assert billed.duration_s >= 0


def test_cold_then_warm(platform: Platform) -> None:
    memory = _small(platform) + platform.catalog.platform.memory_step_mb
    first = platform.invoke(f"{FN}:pid", None, memory)
    pid_first = first.result(timeout=60)
    second = platform.invoke(f"{FN}:pid", None, memory)
    assert second.result(timeout=60) == pid_first
    assert first.billed is not None and first.billed.cold
    assert second.billed is not None and not second.billed.cold
    assert first.billed.init_s > 0
    assert platform.cold_starts >= 1


def test_error_is_delivered_and_billed(platform: Platform) -> None:
    invocation = platform.invoke(f"{FN}:fail", "boom", _small(platform))
    with pytest.raises(FunctionError) as caught:
        invocation.result(timeout=60)
    assert caught.value.kind == "error"
    assert "boom" in str(caught.value)
    assert invocation.billed is not None and not invocation.billed.ok


def test_timeout_is_enforced(platform: Platform) -> None:
    start = time.monotonic()
    invocation = platform.invoke(f"{FN}:sleep", 30.0, _small(platform), timeout_s=1.0)
    with pytest.raises(FunctionError) as caught:
        invocation.result(timeout=60)
    assert caught.value.kind == "timeout"
    assert time.monotonic() - start < 10
    assert invocation.billed is not None and invocation.billed.duration_s >= 1.0


def test_memory_is_enforced(platform: Platform) -> None:
    memory = _small(platform)
    invocation = platform.invoke(f"{FN}:allocate", memory * 2, memory)
    with pytest.raises(FunctionError) as caught:
        invocation.result(timeout=60)
    assert caught.value.kind == "out-of-memory"
    within = platform.invoke(f"{FN}:allocate", memory // 4, memory)
    assert within.result(timeout=60) == memory // 4


def test_cancel_stops_the_function(platform: Platform) -> None:
    invocation = platform.invoke(f"{FN}:sleep", 30.0, _small(platform))
    time.sleep(0.2)
    invocation.cancel()
    with pytest.raises(FunctionError) as caught:
        invocation.result(timeout=10)
    assert caught.value.kind == "cancelled"


def test_instance_crash_is_reported(platform: Platform) -> None:
    invocation = platform.invoke(f"{FN}:exit_process", 3, _small(platform))
    with pytest.raises(FunctionError) as caught:
        invocation.result(timeout=60)
    assert caught.value.kind in ("killed", "error")
    after = platform.invoke(f"{FN}:echo", 7, _small(platform))
    assert after.result(timeout=60) == 7


def test_memory_outside_the_catalog_is_refused(platform: Platform) -> None:
    too_big = platform.catalog.platform.memory_max_mb + 1
    with pytest.raises(ConfigError, match="memory_mb"):
        platform.invoke(f"{FN}:echo", 1, too_big)
