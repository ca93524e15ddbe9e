"""Between two stages of a tuning run: the catalog corrected by what the run measured, and a
re-plan of the stages left that the budget guard would not refuse.

``TuneRun`` re-calibrates after each stage; where the re-prediction of the rest moved by more
than δ it re-plans them (``Replan``) within what is left of the budget and deadline, prices
the planner's choice with the guard's own pricing and takes it only where the guard would
run it; the plan's own figures stay as planned beside the re-plan's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from faasml.catalog import Catalog
from faasml.exceptions import InfeasibleConstraintError
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.coordinator.estimates import BUDGET_MARGIN, coordinator_seconds
from faasml.runtime.record.records import Estimate, StageRecord
from faasml.runtime.runs.stage_pricing import keep_warm, warm_after
from faasml.types import Allocation, Constraint, StagePlan
from faasml.workload import Workload

if TYPE_CHECKING:
    from faasml.planners.tuning import Stages

REPLAN_TRIES = 3
"""Plans a re-plan asks for (each within less budget) before the plan stands: one the budget
guard would refuse is never taken."""

Refusal = Callable[[list[tuple[Allocation, int, int]]], str | None]
"""The budget guard's word on stages (allocation, trials, epochs): why it would refuse them,
or None (``Coordinator.guard_refusal`` for the trials kept)."""


def stage_record(stage: StagePlan) -> StageRecord:
    """A planner's stage as the run's plan holds it (its prediction set by the run)."""
    return StageRecord(
        index=stage.index,
        trials=stage.trials,
        epochs=stage.epochs,
        allocation=stage.allocation,
        epoch_time_s=stage.epoch.time_s,
        epoch_cost_usd=stage.epoch.cost_usd,
        time_s=stage.time_s,
        cost_usd=stage.cost_usd,
    )


def run_estimate(stages: Sequence[StageRecord]) -> tuple[float, float]:
    """The run's prediction of ``stages`` (time, cost) as last (re-)planned: a re-calibration's
    reference."""
    time_s = cost_usd = 0.0
    for stage in stages:
        estimate = stage.run_estimate()
        time_s += stage.time_s if estimate is None else estimate.time_s
        cost_usd += stage.cost_usd if estimate is None else estimate.cost_usd
    return time_s, cost_usd


def grown(workload: Workload, trials: Sequence[TrialState]) -> Workload:
    """``workload`` with the footprint a function that ran out of memory needed (the trials
    keep the memory they were moved to in the record, so a resumed run too)."""
    needed = max((t.memory_mb for t in trials), default=0)
    if needed > workload.memory_needed_mb(1):
        extra = needed - float(workload.memory_needed_mb(1))
        return dataclasses.replace(workload, runtime_mb=workload.runtime_mb + extra)
    return workload


def measured_catalog(
    catalog: Catalog,
    workload: Workload,
    coordinator: Coordinator,
    allocation: Allocation,
    trials: int,
) -> tuple[Catalog, float]:
    """``catalog`` with what this run's coordinator measured on a stage of ``trials`` trials
    on ``allocation``: the cold starts, and its own seconds between a trial's invocations
    (returned too, for the record)."""
    cold = coordinator.estimator.cold_start_at_one_vcpu()
    if cold is not None:  # the cold starts this run measured, as the catalog states them
        # (they started side by side with the stage's first wave: taken back to one alone)
        functions = warm_after(catalog, workload, allocation, trials)
        demand = functions * float(catalog.platform.vcpus(allocation.memory_mb))
        cold /= catalog.platform.contention(demand)
        platform = dataclasses.replace(catalog.platform, cold_start_s=cold)
        catalog = dataclasses.replace(catalog, platform=platform)
    # The coordinator's own time between a trial's invocations, as this run measured it.
    between = coordinator_seconds(
        coordinator.commits_s, coordinator.launches_s, coordinator.options.poll_s
    )
    platform = dataclasses.replace(catalog.platform, coordinator_s=between)
    return dataclasses.replace(catalog, platform=platform), between


@dataclass(frozen=True)
class Replan:
    """A re-plan of stages ``start``… of ``stages``, with what the run plans with now."""

    workload: Workload
    plan_catalog: Catalog
    """What the run predicts with (``keep_warm`` keeps stages on warm functions by it)."""
    planner_catalog: Catalog
    planner: str
    probe_warm: dict[int, int]
    """Functions the job's probe left warm."""
    stages: list[StageRecord]
    start: int

    def guarded(
        self,
        constraint: Constraint,
        rest: tuple[Stages, dict[int, int]],
        refusal: Refusal,
        event: Callable[[str], None],
    ) -> list[StageRecord] | None:
        """The planner's stages ``start``… for ``rest`` (the stages' shape, the warm pool)
        within ``constraint``, priced by the budget guard's own pricing before they are
        taken (``refusal``): a choice the guard would refuse is planned again within
        BUDGET_MARGIN less budget, REPLAN_TRIES times at most; None (an event says why) where
        the planner or the guard refuses them all, and the plan stands."""
        from faasml.planners.tuning import plan_tuning

        stages, start = self.stages, self.start
        job, warm = rest
        refused = ""
        for _ in range(REPLAN_TRIES):
            try:
                plan = plan_tuning(
                    self.workload, self.planner_catalog, constraint, job, self.planner, warm=warm
                )
            except InfeasibleConstraintError as err:
                event(f"re-plan: {err}; the plan stands (the budget guard still holds)")
                return None
            fresh = keep_warm(
                self.workload,
                self.plan_catalog,
                [*stages[:start], *(stage_record(new) for new in plan.stages)],
                plan.constraint,
                self.probe_warm,
                start,
            )[start:]
            reason = refusal([(s.allocation, s.trials, s.epochs) for s in fresh])
            if reason is None:
                return fresh
            onto = ", ".join(
                f"stage {o.index} on {n.allocation}"
                for o, n in zip(stages[start:], fresh, strict=True)
            )
            refused = f"{onto}: {reason}"
            if constraint.budget_usd is None:
                break
            constraint = dataclasses.replace(
                constraint, budget_usd=constraint.budget_usd / BUDGET_MARGIN
            )
        event(f"re-plan refused by the budget guard's pricing ({refused}); the plan stands")
        return None

    def adopt(
        self,
        fresh: Sequence[StageRecord],
        estimates: Sequence[tuple[float, float]],
        event: Callable[[str], None],
    ) -> None:
        """The re-plan's stages in place of stages ``start``… (the same trials, stage by
        stage): their allocations taken, the plan's figures and what was billed or measured
        kept, the re-plan's prediction beside them."""
        stages, start = self.stages, self.start
        for offset, (old, new, estimate) in enumerate(
            zip(stages[start:], fresh, estimates, strict=True)
        ):
            if new.allocation != old.allocation:
                event(f"stage {old.index} re-planned: {old.allocation} -> {new.allocation}")
            stages[start + offset] = dataclasses.replace(
                new,  # the re-plan's allocation; the plan's figures stay as planned
                index=old.index,
                time_s=old.time_s,
                cost_usd=old.cost_usd,
                planned_allocation=old.planned_allocation or old.allocation,
                predicted=old.predicted,  # the prediction before the run stands
                replanned=Estimate(*estimate),
                repredicted=Estimate(*estimate),
                prewarm_usd=old.prewarm_usd,  # already billed
                trial_factors=old.trial_factors,  # already measured
            )
