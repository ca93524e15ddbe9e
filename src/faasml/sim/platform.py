"""A simulated platform on a virtual clock: the ``Platform`` contract with nothing run for real.

Each function named to the platform has a model (``SimFunction``) that says what it returns and
how long it runs; the platform adds what a FaaS platform adds: warm and cold instances (a cold
start from the catalog, with log-normal noise), the concurrency limit, the duration limit, the
machine's contention, cancellation and bills with AWS Lambda semantics. Time is the platform's
``clock`` (``SimClock``): waiting on an invocation, or a run's coordinator sleeping between its
polls, moves the clock instead of the machine's time, so a run of hours takes a fraction of a
second. Invocations of functions without a model are refused (nothing runs for real here).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import (
    Billed,
    CapacityError,
    Enforcement,
    FunctionError,
    FunctionRef,
    Invocation,
    Platform,
    function_ref,
)

STEP_S = 0.5
"""Most virtual seconds one sleep of the run's coordinator moves the clock past the time it
asked for, to the next invocation's end: nothing happens between two ends, but a coordinator
that acts before an end (starting the next stage's functions) still gets its turn."""


@dataclass(frozen=True)
class SimOutcome:
    """What one simulated invocation does: its result or its failure, and how long it runs."""

    seconds: float
    """Seconds the function runs (before the platform's contention and duration limit)."""
    result: Any = None
    failure: str | None = None
    """A ``FunctionError`` kind where the function fails (``error``, ``out-of-memory``, ...)."""
    message: str = ""
    cpu_bound: bool = False
    """Its time stretches with the machine's contention (a training segment's does)."""


class SimFunction(Protocol):
    """The model of a function: its outcome for ``payload`` on an instance of ``memory_mb``
    (``instance`` numbers the platform's instances: a warm start reuses one)."""

    def __call__(self, payload: Any, memory_mb: int, instance: int) -> SimOutcome: ...


class SimClock:
    """The virtual time of a simulated run (a ``RunClock``): sleeping moves it, instantly."""

    def __init__(self, step_s: float = STEP_S) -> None:
        self._now = 0.0
        self.step_s = step_s
        self._ends: list[float] = []

    def monotonic(self) -> float:
        return self._now

    def advance_to(self, when: float) -> None:
        self._now = max(self._now, when)

    def sleep(self, seconds: float) -> None:
        """Move ``seconds`` on, or on to the next invocation's end where it is near
        (``STEP_S``): a poll that would find nothing new is skipped."""
        target = self._now + max(seconds, 0.0)
        self._ends = [end for end in self._ends if end > self._now]
        upcoming = min(self._ends, default=math.inf)
        if upcoming > target:
            target = min(upcoming, target + self.step_s)
        self.advance_to(target)

    def expect(self, when: float) -> None:
        """Note an invocation ending at ``when`` (where a sleep may move on to)."""
        self._ends.append(when)


@dataclass
class _Instance:
    number: int
    memory_mb: int
    free_at: float
    """When its current invocation (or its start) ends."""
    lost: bool = False
    starting: bool = False
    """Prewarmed and not invoked yet: the next invocation of its size takes it."""


class SimulatedInvocation(Invocation):
    """An invocation whose end is known from the start: it is done once the clock reaches it."""

    def __init__(
        self, clock: SimClock, instance: _Instance, outcome: SimOutcome, timing: tuple[float, ...]
    ) -> None:
        started, init_s, run_s, limit_s, bills_cold = timing
        self._clock, self._instance = clock, instance
        self._started, self._init_s, self._bills_cold = started, init_s, bool(bills_cold)
        self._outcome = outcome
        if outcome.failure is None and run_s > limit_s:
            self._outcome = SimOutcome(limit_s, failure="timeout", message=f"over {limit_s:g} s")
        self._run_s = min(run_s, limit_s)
        self.end = started + init_s + self._run_s
        instance.free_at, instance.starting = self.end, False
        instance.lost = self._outcome.failure in ("killed", "out-of-memory")
        clock.expect(self.end)

    def done(self) -> bool:
        return self._clock.monotonic() >= self.end

    def result(self, timeout: float | None = None) -> Any:
        now = self._clock.monotonic()
        if timeout is not None and self.end - now > timeout:
            self._clock.advance_to(now + timeout)
            raise TimeoutError(f"the invocation did not end within {timeout:g} s")
        self._clock.advance_to(self.end)
        if self._outcome.failure is not None:
            raise FunctionError(self._outcome.failure, self._outcome.message)
        return self._outcome.result

    def cancel(self) -> None:
        now = self._clock.monotonic()
        if now >= self.end:
            return
        self._outcome = SimOutcome(0.0, failure="cancelled", message="cancelled")
        self._run_s = max(now - self._started - self._init_s, 0.0)
        self.end = now
        self._instance.free_at = now

    @property
    def billed(self) -> Billed | None:
        if not self.done():
            return None
        cold = self._init_s > 0
        duration = self._run_s + (self._init_s if self._bills_cold else 0.0)
        memory = self._instance.memory_mb
        return Billed(duration, memory, cold, self._init_s, self._outcome.failure is None)


class SimulatedPlatform(Platform):
    """The catalog's platform simulated on a virtual clock (see the module docstring)."""

    name = "simulated"

    def __init__(
        self,
        catalog: Catalog,
        functions: Mapping[str, SimFunction],
        *,
        cold_start_noise: float = 0.3,
        seed: int = 0,
        clock: SimClock | None = None,
    ) -> None:
        """``functions`` maps ``"module:function"`` references to their models;
        ``cold_start_noise`` is the coefficient of variation of each cold start."""
        super().__init__(catalog)
        if not math.isfinite(cold_start_noise) or cold_start_noise < 0:
            raise ConfigError(
                f"the value of cold_start_noise is {cold_start_noise}, but must be a finite "
                "number >= 0"
            )
        self.functions = dict(functions)
        self.clock = clock or SimClock()
        self._cold_noise = cold_start_noise
        self._rng = np.random.default_rng(seed)
        self._instances: list[_Instance] = []
        self._numbers = itertools.count()
        self._standalone: list[Billed] = []
        self._cold_starts = 0
        self._closed = False
        self._peak = 0

    @property
    def enforcement(self) -> Enforcement:
        return Enforcement(memory="simulated", cpu="simulated", duration="simulated")

    @property
    def cold_starts(self) -> int:
        return self._cold_starts

    def invoke(
        self, fn: FunctionRef, payload: Any, memory_mb: int, timeout_s: float | None = None
    ) -> Invocation:
        model, limit = self._checked(fn, memory_mb, timeout_s)
        now = self.clock.monotonic()
        if self._running(now) >= self.max_concurrency:
            raise CapacityError(f"{self.catalog.name} runs {self.max_concurrency} at once")
        instance = self._idle(memory_mb, now)
        started, init_s = now, 0.0
        if instance is None:
            instance, init_s = self._start(memory_mb, now), self._cold_start(memory_mb)
        else:
            started = max(now, instance.free_at)  # a prewarmed one still starting
        outcome = model(payload, memory_mb, instance.number)
        seconds = outcome.seconds
        if outcome.cpu_bound:
            seconds *= self._contention(now, memory_mb)
        bills_cold = float(self.catalog.platform.bills_cold_start)
        invocation = SimulatedInvocation(
            self.clock, instance, outcome, (started, init_s, seconds, limit, bills_cold)
        )
        self._peak = max(self._peak, self._running(now))
        return invocation

    def prewarm(self, memory_mb: int, count: int) -> int:
        """Start ``count`` instances now: each is ready after its cold start (billed then)."""
        now = self.clock.monotonic()
        for _ in range(count):
            instance = self._start(memory_mb, now)
            init_s = self._cold_start(memory_mb)
            instance.free_at, instance.starting = now + init_s, True
            self.clock.expect(instance.free_at)
            billed = init_s if self.catalog.platform.bills_cold_start else 0.0
            self._standalone.append(Billed(billed, memory_mb, True, init_s, True))
        self._peak = max(self._peak, self._running(now))
        return count

    def take_peak(self) -> int:
        """Most functions running at once since last asked (never above the concurrency
        limit); the count starts again from those running now."""
        peak, self._peak = self._peak, self._running(self.clock.monotonic())
        return peak

    def warm_instances(self) -> dict[int, int] | None:
        now = self.clock.monotonic()
        idle: dict[int, int] = {}
        for instance in self._instances:
            if not instance.lost and instance.free_at <= now:
                idle[instance.memory_mb] = idle.get(instance.memory_mb, 0) + 1
        return idle

    def take_standalone_bills(self) -> list[Billed]:
        bills, self._standalone = self._standalone, []
        return bills

    def close(self) -> None:
        self._closed = True
        self._instances.clear()

    def _checked(
        self, fn: FunctionRef, memory_mb: int, timeout_s: float | None
    ) -> tuple[SimFunction, float]:
        """The model of ``fn`` and the invocation's duration limit, the arguments checked."""
        if self._closed:
            raise ConfigError("the platform is closed")
        ref = fn if isinstance(fn, str) else function_ref(fn)
        platform = self.catalog.platform
        low, high = platform.memory_min_mb, platform.memory_max_mb
        if not low <= memory_mb <= high:
            raise ConfigError(
                f"the value of memory_mb is {memory_mb}, but {platform.name} offers "
                f"{low}..{high} MB"
            )
        if ref not in self.functions:
            known = ", ".join(sorted(self.functions)) or "none"
            raise ConfigError(f"the simulated platform has no model of {ref} (it has: {known})")
        limit = platform.max_duration_s
        if timeout_s is not None:
            if timeout_s <= 0:
                raise ConfigError(f"the value of timeout_s is {timeout_s}, but must be > 0")
            limit = min(limit, timeout_s)
        return self.functions[ref], limit

    def _running(self, now: float) -> int:
        return sum(1 for i in self._instances if not i.lost and i.free_at > now)

    def _idle(self, memory_mb: int, now: float) -> _Instance | None:
        """A warm instance of ``memory_mb`` (a free one first, else one still starting)."""
        ready = [i for i in self._instances if i.memory_mb == memory_mb and not i.lost]
        free = [i for i in ready if i.free_at <= now or i.starting]
        return min(free, key=lambda i: i.free_at, default=None)

    def _start(self, memory_mb: int, now: float) -> _Instance:
        self._instances = [i for i in self._instances if not i.lost]
        instance = _Instance(next(self._numbers), memory_mb, now)
        self._instances.append(instance)
        self._cold_starts += 1
        return instance

    def _cold_start(self, memory_mb: int) -> float:
        """The catalog's cold start of ``memory_mb`` times mean-one log-normal noise."""
        base = float(self.catalog.platform.cold_start_time(memory_mb))
        if self._cold_noise == 0:
            return base
        sigma = math.sqrt(math.log1p(self._cold_noise**2))
        return base * float(self._rng.lognormal(-sigma * sigma / 2, sigma))

    def _contention(self, now: float, memory_mb: int) -> float:
        """How much slower a function starting now runs: the machine's contention at the
        vCPUs of every function running with it (1 on a platform without a bound)."""
        platform = self.catalog.platform
        running = [i.memory_mb for i in self._instances if not i.lost and i.free_at > now]
        demand = sum(float(platform.vcpus(m)) for m in [*running, memory_mb])
        return float(platform.contention(demand))
