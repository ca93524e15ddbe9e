"""What the local, Ray and Lithops platforms share (MISSION C7).

The checks every ``invoke`` makes before it starts anything (memory size within the catalog's
range, a positive timeout capped at the maximum duration, an open platform), the memory
enforcement they report, ``SettledInvocation`` (an invocation whose outcome and bill are set
once, by whichever thread learns them first) and ``PooledPlatform``, the base of the platforms
that keep function instances warm.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from faasml.catalog import Catalog, FunctionPlatform
from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import (
    Billed,
    FunctionError,
    FunctionRef,
    Invocation,
    Platform,
    function_ref,
)

CPU_MODES = ("auto", "cgroup", "duty-cycle", "none")
"""How a function's CPU share may be applied: ``auto`` picks the best the machine allows."""


def check_cpu_mode(cpu: str) -> None:
    """Reject a CPU mode that is not one of CPU_MODES."""
    if cpu not in CPU_MODES:
        raise ConfigError(f"the value of cpu is {cpu!r}, but must be one of: {CPU_MODES}")


def check_memory(platform: FunctionPlatform, memory_mb: int) -> None:
    """Reject a memory size outside the catalog's range."""
    low, high = platform.memory_min_mb, platform.memory_max_mb
    if not low <= memory_mb <= high:
        raise ConfigError(
            f"the value of memory_mb is {memory_mb}, but {platform.name} offers {low}..{high} MB"
        )


def check_open(closed: bool) -> None:
    """Refuse new work on a closed platform."""
    if closed:
        raise ConfigError("the platform is closed")


def invocation_args(
    platform: FunctionPlatform, fn: FunctionRef, memory_mb: int, timeout_s: float | None
) -> tuple[str, float]:
    """The ``"module:attr"`` reference of ``fn`` and the duration limit of one invocation
    (``timeout_s``, at most the platform's maximum duration), after checking both arguments."""
    ref = function_ref(fn)
    check_memory(platform, memory_mb)
    limit = platform.max_duration_s
    if timeout_s is not None:
        if timeout_s <= 0:
            raise ConfigError(f"the value of timeout_s is {timeout_s}, but must be > 0")
        limit = min(limit, timeout_s)
    return ref, limit


def memory_enforcement(address_space_limit: bool, memory_check: bool) -> str:
    """How memory is capped: 'rlimit-as', 'rss', both joined by '+', or 'none'."""
    parts = (["rlimit-as"] if address_space_limit else []) + (["rss"] if memory_check else [])
    return "+".join(parts) or "none"


class PooledPlatform(Platform):
    """A platform that keeps function instances warm for reuse (local processes, Ray actors):
    it counts their cold starts, gives a function memory / mb_per_vcpu vCPUs, and serialises
    its changes under one lock."""

    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog)
        self.platform = catalog.platform
        self._lock = threading.Lock()
        self._cold_starts = 0
        self._closed = False

    @property
    def cold_starts(self) -> int:
        return self._cold_starts

    def vcpus(self, memory_mb: int) -> float:
        """vCPUs of a function: memory / mb_per_vcpu (CE-scaling's Lambda CPU share)."""
        return float(self.platform.vcpus(memory_mb))

    @contextmanager
    def _open(self) -> Iterator[None]:
        """Hold the platform's lock; raise ConfigError when the platform is closed."""
        with self._lock:
            check_open(self._closed)
            yield


class SettledInvocation(Invocation):
    """An invocation of ``memory_mb`` dispatched at ``dispatched`` (monotonic seconds) whose
    value or failure and bill are set once by ``_finish``; later calls are ignored."""

    def __init__(self, memory_mb: int, dispatched: float) -> None:
        self.memory_mb = memory_mb
        self.dispatched = dispatched
        self._event = threading.Event()
        self._value: Any = None
        self._error: FunctionError | None = None
        self._billed: Billed | None = None

    def _finish(self, value: Any, error: FunctionError | None, billed: Billed) -> None:
        if self._event.is_set():
            return
        self._value, self._error, self._billed = value, error, billed
        self._event.set()

    def _fail(
        self, kind: str, message: str, *, cold: bool, duration_s: float | None = None
    ) -> None:
        """Fail as ``kind``, billed for ``duration_s`` (default: the time since dispatch)."""
        elapsed = time.monotonic() - self.dispatched if duration_s is None else duration_s
        error = FunctionError(kind, message)
        self._finish(None, error, Billed(elapsed, self.memory_mb, cold, 0.0, ok=False))

    def result(self, timeout: float | None = None) -> Any:
        if not self._event.wait(timeout):
            raise TimeoutError(f"the invocation did not finish within {timeout:g} s")
        if self._error is not None:
            raise self._error
        return self._value

    def done(self) -> bool:
        return self._event.is_set()

    @property
    def billed(self) -> Billed | None:
        return self._billed
