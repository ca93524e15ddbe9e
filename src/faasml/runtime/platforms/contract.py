"""The Platform contract: invoke a function with a memory size, get an Invocation (MISSION C7).

Invariants every implementation keeps (checked by ``faasml.testing.platform_conformance``):
- ``invoke`` never blocks on the function; ``Invocation.result(timeout)`` waits for it.
- A function's result or its failure is delivered once; a failure is a ``FunctionError`` whose
  ``kind`` says why (``error``, ``out-of-memory``, ``timeout``, ``killed``, ``cancelled``).
- Every invocation that started is billed, failed ones included: ``Invocation.billed`` is set
  when it ends and holds the billed duration, memory and whether it was a cold start.
- The function is named by reference (``"module:attr"`` or a module-level callable) and takes
  one picklable payload; it returns a picklable value.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import FaasmlError
from faasml.exceptions import FunctionError as FunctionError  # re-exported: it lives below
from faasml.registry import Registry

FunctionRef = str | Callable[[Any], Any]
"""A function by reference: ``"package.module:function"`` or a module-level callable."""

FAILURE_KINDS = ("error", "out-of-memory", "timeout", "killed", "cancelled")


class CapacityError(FaasmlError):
    """The platform cannot start another function of this size now (FaaS throttling)."""


@dataclass(frozen=True)
class Billed:
    """What one invocation is billed for (AWS Lambda semantics: duration × memory + request)."""

    duration_s: float
    """Billed duration: from dispatch to the end of the function, cold start included when the
    platform bills it (``FunctionPlatform.bills_cold_start``)."""
    memory_mb: int
    cold: bool
    """True when a new function instance had to start (a cold start)."""
    init_s: float
    """Seconds of the cold start (0 for a warm start)."""
    ok: bool
    """False when the invocation failed (it is billed all the same)."""


class Invocation(ABC):
    """A running or finished function invocation."""

    @abstractmethod
    def result(self, timeout: float | None = None) -> Any:
        """The function's return value; raises FunctionError on failure and TimeoutError when
        ``timeout`` seconds pass first (the invocation keeps running)."""

    @abstractmethod
    def done(self) -> bool:
        """True once the result or the failure is known (never blocks)."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop the function now; its result becomes FunctionError('cancelled'). Idempotent."""

    @property
    @abstractmethod
    def billed(self) -> Billed | None:
        """The bill of this invocation once it has ended; None while it runs."""


@dataclass(frozen=True)
class Enforcement:
    """What a platform enforces on a function and how (reported to the user, never assumed)."""

    memory: str
    """How memory is capped: 'rlimit-as', 'none'..."""
    cpu: str
    """How the CPU share is applied: 'cgroup', 'duty-cycle', 'none'."""
    duration: str
    """How the maximum duration is applied: 'kill', 'none'."""


class Platform(ABC):
    """A FaaS-like platform described by a catalog (prices, memory range, limits)."""

    name: str = ""
    speed_drifts: bool = False
    """Whether the speed a function gets can drift between runs (a machine shared with other
    work): a cached job profile is then re-checked before a run plans from it."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    @abstractmethod
    def invoke(
        self, fn: FunctionRef, payload: Any, memory_mb: int, timeout_s: float | None = None
    ) -> Invocation:
        """Start ``fn(payload)`` in a function of ``memory_mb`` MB, stopped after ``timeout_s``
        (at most the platform's maximum duration). Raises ConfigError for a memory size the
        catalog does not offer and CapacityError when the platform is full."""

    def ready(self) -> None:  # noqa: B027 - optional hook
        """Return once the platform can start functions (the local platform's template has
        imported the runtime): a run's clock starts after it. The default is ready at once."""

    def prewarm(self, memory_mb: int, count: int) -> int:
        """Start ``count`` instances of this size ahead of use (delayed restart, CE-scaling
        §III-D); returns how many were started. The default starts none."""
        return 0

    def warm_instances(self) -> dict[int, int] | None:
        """Memory MB -> idle instances ready to serve an invocation without a cold start;
        None where the platform cannot tell (the default)."""
        return None

    def take_standalone_bills(self) -> list[Billed]:
        """Bills not tied to an invocation (prewarmed instances' cold starts) since last asked."""
        return []

    @property
    @abstractmethod
    def enforcement(self) -> Enforcement:
        """What this platform enforces."""

    @property
    def cold_starts(self) -> int:
        """Cold starts so far."""
        return 0

    @property
    def max_concurrency(self) -> int:
        """Most functions that really run at once: the catalog's concurrency limit, or less
        where the back-end runs fewer (functions beyond it wait in a queue, so a plan of more
        synchronised functions than this could never meet at its first round)."""
        return self.catalog.platform.concurrency_limit

    def close(self) -> None:  # noqa: B027 - optional hook
        """Stop every instance and release resources."""

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def resolve_function(fn: FunctionRef) -> Callable[[Any], Any]:
    """The callable a FunctionRef names."""
    if callable(fn):
        return fn
    module_name, sep, attribute = fn.partition(":")
    if not sep or not module_name or not attribute:
        raise FaasmlError(f"the function reference {fn!r} must look like 'package.module:function'")
    target: Callable[[Any], Any] = getattr(importlib.import_module(module_name), attribute)
    return target


def function_ref(fn: FunctionRef) -> str:
    """The ``"module:attr"`` string of a module-level callable (how it crosses processes)."""
    if isinstance(fn, str):
        resolve_function(fn)  # fail early on a bad reference
        return fn
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module or "<" in qualname or module == "__main__":
        raise FaasmlError(
            f"the function {fn!r} must be defined at module level of an importable module"
        )
    return f"{module}:{qualname}"


PLATFORMS: Registry[type[Platform]] = Registry("platform")
"""Platform name -> class ("module:Class" strings until first use)."""
PLATFORMS.register("local", "faasml.runtime.platforms.local:LocalPlatform")


def open_platform(name: str, catalog: Catalog, **options: Any) -> Platform:
    """Open the platform ``name`` priced and bounded by ``catalog``."""
    cls = PLATFORMS.get(name)
    return cls(catalog, **options)


PLATFORMS.register("ray", "faasml.runtime.platforms.ray:RayPlatform")
PLATFORMS.register("lithops", "faasml.runtime.platforms.lithops:LithopsPlatform")
