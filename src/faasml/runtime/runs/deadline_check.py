"""A deadline against the time measuring the job takes: refused before the job is measured
where the measurement alone is expected to use it up, and refused after it with what the
measurement took and what the shortest plan needs more (issue 34: advice that can be followed).
"""

from __future__ import annotations

from faasml.catalog import Catalog
from faasml.exceptions import InfeasibleConstraintError
from faasml.runtime.profile.cache import quickest_profiling_s
from faasml.units import format_duration

PROBE_MEASURE_S = 0.6
"""Seconds of computation the probe times at least (``job_profile.MEASURE_S``), besides its
cold start: the probe's own least time where the cache holds no measurement."""


def expected_profiling_s(catalog: Catalog) -> tuple[float, str]:
    """Seconds measuring a job is expected to take at least, and where that comes from: the
    quickest measurement the profile cache holds, else the probe's own least (one cold start
    at one vCPU and its timed computation)."""
    quickest = quickest_profiling_s()
    if quickest is not None:
        return quickest, "the quickest job measured on this machine"
    return catalog.platform.cold_start_s + PROBE_MEASURE_S, "a cold start and the probe's timing"


def refuse_before_profiling(job: str, deadline_s: float, catalog: Catalog) -> None:
    """Raise InfeasibleConstraintError, before anything is paid, where measuring ``job``
    (not in the profile cache) is expected to take the whole deadline."""
    expected, source = expected_profiling_s(catalog)
    if deadline_s > expected:
        return
    raise InfeasibleConstraintError(
        f"the deadline of {format_duration(deadline_s)} would be spent measuring job {job} "
        f"before it runs: measuring takes at least {format_duration(expected)} ({source}); "
        f"give more than {format_duration(expected)} plus the run's time, or measure the job "
        "first with `faasml profile JOB` (a run that finds its profile cached spends none "
        "of its deadline measuring)",
        least_deadline_s=expected,
    )


def refused_after_profiling_s(
    err: InfeasibleConstraintError, deadline_s: float | None, profiling_s: float
) -> InfeasibleConstraintError:
    """The planner's refusal ``err`` of the deadline measuring the job left, saying what the
    measuring took of it and what the shortest plan needs more; ``err`` where no deadline
    was refused or nothing was measured."""
    least = err.least_deadline_s
    if deadline_s is None or least is None or err.least_budget_usd is not None:
        return err  # not the deadline's refusal alone (the budget's says what profiling cost)
    if profiling_s <= 0:
        return err
    refused = str(err).split("; the shortest deadline that works")[0]
    total = profiling_s + least
    return InfeasibleConstraintError(
        f"{refused}: profiling took {format_duration(profiling_s)} of the "
        f"{format_duration(deadline_s)} deadline; the shortest plan needs "
        f"{format_duration(least)} more (a deadline of {format_duration(total)} in all; the "
        f"profile is cached now, so a run that finds it there needs {format_duration(least)})",
        least_budget_usd=err.least_budget_usd,
        least_deadline_s=total,
    )
