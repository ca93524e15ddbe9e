"""Checking a cached job profile against the machine of the moment (pure).

A profile records what the machine gave when it was measured. A run that takes it from the
cache checks it with its own first epochs, at no extra cost: the run's calibration corrects
the plan from them, and where their computation per sample is off the profile's by more than
``STALE_THRESHOLD`` the cached profile is rescaled to them, or beyond ``RESCALE_LIMIT`` marked
stale, so that the next run measures the job again (``job_profile.epochs_checked``).

Asked for (``RECHECK_ENV``, ``measure_job(recheck=True)``), a run first runs the job's probe
once more, briefly, at one memory size the profile measured. This module compares that
measurement with the cached figures at that size: computation per sample, the cold start
(taken back to one function alone, as the profile's) and, where the probe ran a group side by
side, the vCPUs the machine delivered. Within ``DRIFT_THRESHOLD`` of the cached figures the
profile is kept as it is; beyond it, every machine-dependent figure is rescaled by the
measured ratios (computation and evaluation at every memory size) or replaced by the fresh
measurement (cold start, vCPUs delivered, checkpoint time); beyond ``RESCALE_LIMIT`` the job
is measured again from scratch (too far to trust a ratio).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.contention import cold_start_alone, delivered_vcpus
from faasml.runtime.profile.record import JobProfile, ProfileCheck

__all__ = [
    "DRIFT_THRESHOLD",
    "LOAD_ENV",
    "RECHECK_ENV",
    "RECHECK_MEASURE_S",
    "RESCALE_LIMIT",
    "STALE_THRESHOLD",
    "checked_profile",
    "drift_action",
    "epochs_line",
    "load_average",
    "rechecks",
]

DRIFT_THRESHOLD = 0.15
"""A measured/cached ratio beyond 1.15 (or below 1/1.15) is drift: the profile is rescaled."""
RESCALE_LIMIT = 20.0
"""A ratio beyond 20x either way is not load: the job is measured again from scratch."""
RECHECK_MEASURE_S = 0.3
"""Seconds of computation the re-check's measurement covers at least (half the probe's)."""
RECHECK_ENV = "FAASML_PROFILE_RECHECK"
"""Set to 1 to re-check a cached profile with a short probe before every run's plan."""
LOAD_ENV = "FAASML_LOAD_AVERAGE"
"""A 1-minute load average to take as the machine's instead of reading it (a number >= 0)."""
STALE_THRESHOLD = 0.5
"""A run whose own epochs' training computation per sample is more than 1.5x (or under 1/1.5)
its cached profile's corrects the cached profile: rescaled to the epochs, or, beyond
``RESCALE_LIMIT``, marked stale. Wider than ``DRIFT_THRESHOLD``: the run's trials are other
configurations than the probe's and share the machine otherwise, and a profile that is roughly
right is worth keeping; the run itself is corrected by its calibration either way."""


def rechecks(asked: bool | None = None) -> bool:
    """Whether a cached profile is re-checked before the plan: as ``asked``, else as
    ``RECHECK_ENV`` says, else not. The run's own first epochs check it at no extra cost
    (``job_profile.epochs_checked``): a probe before every run cost more than a short job,
    and the load average that once triggered it says little of the speed the job gets."""
    if asked is not None:
        return asked
    return os.environ.get(RECHECK_ENV, "").strip() == "1"


def epochs_line(ratio: float, action: str) -> str:
    """The event of a cached profile a run's epochs found off by ``ratio`` (``action``:
    'rescaled' or 're-profiled', as ``drift_action`` decides with ``STALE_THRESHOLD``)."""
    then = (
        "rescaled to them in the cache"
        if action == "rescaled"
        else "marked stale (the next run measures the job again)"
    )
    return (
        f"the run's epochs computed at {ratio:.2f}x the cached profile's time per sample: "
        f"the plan follows the epochs, and the cached profile is {then}"
    )


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the system has none), or the one
    ``LOAD_ENV`` gives instead (what the tests set: none reads the machine's)."""
    given = os.environ.get(LOAD_ENV, "").strip()
    if given:
        try:
            value = float(given)
        except ValueError:
            value = -1.0
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"the value of {LOAD_ENV} is {given!r}, but must be a number >= 0")
        return round(value, 2)
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _fold(ratio: float) -> float:
    """How far a ratio is from 1, either way (2 for 2x and for 0.5x)."""
    if ratio <= 0 or not math.isfinite(ratio):
        return math.inf
    return max(ratio, 1.0 / ratio)


def drift_action(ratios: tuple[float, ...], threshold: float = DRIFT_THRESHOLD) -> str:
    """'kept' when every ratio is within ``threshold`` of 1, 're-profiled' when one is
    beyond ``RESCALE_LIMIT``, else 'rescaled'."""
    drift = max((_fold(r) for r in ratios), default=1.0)
    if drift <= 1.0 + threshold:
        return "kept"
    return "rescaled" if drift <= RESCALE_LIMIT else "re-profiled"


def checked_profile(
    profile: JobProfile,
    memory_mb: int,
    results: list[dict[str, Any]],
    colds: list[tuple[float, float]],
    catalog: Catalog,
    *,
    usd: float,
    seconds: float,
    load_now: float | None,
    threshold: float = DRIFT_THRESHOLD,
) -> JobProfile:
    """``profile`` with its re-check (``check``): kept as it is, rescaled, or marked to be
    measured again ('re-profiled'), from the probe's ``results`` at ``memory_mb`` (one
    function's, or a group's side by side) and the cold starts they paid (``colds``, as
    ``ProbeCalls.colds``)."""
    first = results[0]
    compute_now = float(first["compute_s_per_sample"])
    compute_ratio = _ratio(compute_now, dict(profile.compute_points)[memory_mb])
    evals = dict(profile.eval_points)
    eval_ratio = _ratio(float(first["eval_s_per_sample"]), evals.get(memory_mb, 0.0))
    if eval_ratio == 1.0:  # no test set, or too fast to time: as the computation moved
        eval_ratio = compute_ratio
    delivered, side = delivered_vcpus(results, float(catalog.platform.vcpus(memory_mb)), catalog)
    vcpus_ratio = _ratio(delivered, profile.delivered_vcpus)
    cold = profile.cold_start_s
    if colds:  # the functions started cold: taken back to one alone, as the profile's
        cold = cold_start_alone(colds, delivered or profile.delivered_vcpus, catalog)
    cold_ratio = _ratio(cold, profile.cold_start_s)
    action = drift_action((compute_ratio, cold_ratio, vcpus_ratio), threshold)
    check = ProfileCheck(
        memory_mb=memory_mb,
        compute_ratio=compute_ratio,
        cold_start_ratio=cold_ratio,
        vcpus_ratio=vcpus_ratio,
        load_then=profile.load_avg,
        load_now=load_now,
        action=action,
        usd=usd,
        seconds=round(seconds, 3),
        functions=len(results),
    )
    if action != "rescaled":
        return dataclasses.replace(profile, check=check)
    return dataclasses.replace(
        profile,
        compute_points=tuple((m, s * compute_ratio) for m, s in profile.compute_points),
        eval_points=tuple((m, s * eval_ratio) for m, s in profile.eval_points),
        checkpoint_s=float(first.get("checkpoint_s", profile.checkpoint_s)),
        cold_start_s=cold,
        delivered_vcpus=delivered or profile.delivered_vcpus,
        side_by_side_ratio=side or profile.side_by_side_ratio,
        load_avg=load_now,
        check=check,
    )


def _ratio(now: float, then: float) -> float:
    """now / then, 1 where either was not measured (0)."""
    if now <= 0 or then <= 0:
        return 1.0
    return now / then
