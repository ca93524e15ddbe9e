"""What a run reports while it prepares, before its first stage: each call of the job's probe
as it starts and ends, then that the planner runs. A console shows them (the probe can take a
minute); nothing else depends on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProbeStep:
    """A call of the job's probe (``probe_calls.ProbeCalls``), as it starts and as it ends."""

    index: int
    """The probe's calls so far, this one included (1 for the first)."""
    what: str
    """What the call measures: 'footprint and compute', 'synchronised round', ..."""
    functions: int
    memory_mb: int
    done: bool
    """False as the call starts, True as it ends (failed or not)."""
    elapsed_s: float
    """Seconds since the measurement began."""
    spent_usd: float
    """What the probe's calls have been billed so far."""


@dataclass(frozen=True)
class Planning:
    """The job's profile is known (measured, or from the cache): the planner runs now."""

    cached: bool


Preparing = ProbeStep | Planning
PrepareHook = Callable[[Preparing], None]
