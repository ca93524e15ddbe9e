"""What a run plans with once its job is measured: the cost of the configuration it trains
against the profile's mean, the coordinator's own seconds, the functions the probe left warm,
the constraint left after measuring, and the check of a cached profile against the run.

Module functions over a run's parts (``run_base.BaseRun`` calls them), so each takes what
it reads and returns what it finds.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError, InfeasibleConstraintError
from faasml.job import JobSpec
from faasml.models.calibration import compute_ratio
from faasml.models.config_cost import factor
from faasml.runtime.coordinator.estimates import coordinator_seconds
from faasml.runtime.coordinator.meter import refused_after_profiling
from faasml.runtime.platforms.contract import Platform
from faasml.runtime.profile.measure import MAX_GROUP, JobProfile, epochs_checked
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.runs.deadline_check import refused_after_profiling_s
from faasml.types import Constraint


def config_factor(job: JobSpec, profile: JobProfile) -> float:
    """The training cost of the configuration ``job`` trains, its own, over the profile's
    mean of the search space's (``config_cost``; 1 without one)."""
    own: dict[str, Any] = {"batch_size": job.batch_size}
    for text, _ in profile.config_costs:
        for key in json.loads(text):
            if key.startswith("model."):
                own[key] = job.model.options.get(key.split(".", 1)[1])
    return factor(own, profile.config_costs)


def compute_note(profile: JobProfile, cost: float, trained_what: str) -> str | None:
    """What the configurations a run trains (``trained_what``) cost against the profile's
    mean, where the probe timed several and ``cost`` is not the mean."""
    if not profile.config_costs or abs(cost - 1.0) < 0.005:
        return None
    return f"the {trained_what} at {cost:.2f}x the probed configurations' mean cost per sample"


def coordinator_write_s(run_dir: RunDir, record: RunRecord, poll_s: float) -> float:
    """The coordinator's seconds between segments, from a lazy write of ``record`` timed now."""
    began = time.monotonic()
    # A lazy write of the record, as after a segment: of the order of a commit (which
    # updates the trial's history and deletes the segment's keys), a little more.
    run_dir.write_record(record, durable=False)
    return coordinator_seconds([time.monotonic() - began], [], poll_s)


def profile_check_line(
    profile: JobProfile | None,
    profiled: Catalog | None,
    record: RunRecord,
    histories: list[list[dict[str, Any]]],
    epochs: range,
) -> str | None:
    """The correction of a cached profile the run's own ``epochs`` disagree with, for the
    next run (``job_profile.epochs_checked``); None where there is none to make."""
    if profiled is None or profile is None or not record.profile_cached:
        return None
    measured = compute_ratio(
        histories, epochs, profile.compute_points, profile.train_samples, profiled
    )
    cost = record.compute_factor or 1.0  # the trials' cost, as priced
    return None if measured is None else epochs_checked(profile, measured / max(cost, 1e-9))


def probe_warm(
    profile: JobProfile | None,
    record: RunRecord,
    platform: Platform | None,
    plan_catalog: Catalog,
) -> dict[int, int]:
    """Functions the job's probe left warm on the run's platform (none from a cache): as the
    platform counts its idle instances when first asked, before the first stage (a bounded
    machine may have stopped some of the probe's to start the next), kept in ``record``;
    where the platform cannot tell, as the probe started them."""
    if profile is None:
        return {}
    cached = record.profile_cached is not False
    if cached and profile.check is None:
        return {}  # a re-check's functions are warm as a probe's are
    if record.probe_warm is None:
        counted = None if platform is None else platform.warm_instances()
        check = profile.check
        if counted is None and check is not None and cached:
            counted = {check.memory_mb: check.functions}  # what the re-check started
        if counted is None:
            counted = {memory: 1 for memory, _ in profile.compute_points}
            if profile.side_by_side_ratio > 0:  # a group at the largest size
                largest = max(counted)
                fill = int(plan_catalog.platform.max_concurrent(largest))
                counted[largest] = max(1, min(MAX_GROUP, fill))
        record.probe_warm = {int(m): int(c) for m, c in counted.items()}
    return dict(record.probe_warm)


def planner_catalog(plan_catalog: Catalog, contention: bool) -> Catalog:
    """What the planners price with: ``plan_catalog``, or (``contention`` off, as the
    benchmark compares) the same as if every function had its share of the machine."""
    if contention:
        return plan_catalog
    platform = dataclasses.replace(plan_catalog.platform, delivered_vcpus=None)
    return dataclasses.replace(plan_catalog, platform=platform)


def profiling_s(profile: JobProfile | None, record: RunRecord) -> float:
    """Seconds of the deadline measuring the job took (none from the cache)."""
    spent_s = 0.0
    if profile is not None and record.profile_cached is False:
        spent_s = profile.profiling_s
    if profile is not None and profile.check is not None:
        spent_s += profile.check.seconds  # re-checking a cached profile
    return spent_s


def refused(
    err: InfeasibleConstraintError, constraint: Constraint, spent_s: float, spent_usd: float
) -> InfeasibleConstraintError:
    """The planner's refusal ``err`` saying what measuring the job took of the budget
    (``billing.refused_after_profiling``) or of the deadline (``deadline_check``)."""
    if err.least_budget_usd is None:
        return refused_after_profiling_s(err, constraint.deadline_s, spent_s)
    return refused_after_profiling(err, constraint.budget_usd, spent_usd)


def planning_constraint(
    job_name: str, constraint: Constraint, spent_usd: float, spent_s: float
) -> Constraint:
    """``constraint`` less what measuring the job took (money, and time when measured now)."""
    c = constraint
    budget = None if c.budget_usd is None else c.budget_usd - spent_usd
    deadline = None if c.deadline_s is None else c.deadline_s - spent_s
    if (budget is not None and budget <= 0) or (deadline is not None and deadline <= 0):
        cached = " (its profile is cached now: a run that finds it there spends none)"
        raise ConfigError(
            f"measuring job {job_name} used {spent_usd:.6f} USD and "
            f"{spent_s:.1f} s, leaving nothing of the constraint to run it; give more"
            + (cached if deadline is not None and deadline <= 0 else "")
        )
    return Constraint(budget, deadline, c.objective)
