"""Plans that know which functions are warm before their first stage (the probe's, or those
the stages already run left idle before a re-plan): that stage's first wave starts on them
without a cold start where they are enough, as the run's own stage estimate prices it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from faasml.planners._space import searchable_space
from faasml.planners.pareto import pareto_indices
from faasml.planners.tuning import build_problem, plan_tuning
from faasml.runtime.record.records import StageRecord
from faasml.runtime.runs.stage_pricing import partition_write_s, stage_estimates
from faasml.types import Constraint, TunePlan

from .fixed_machine import SHA, machine, workload


def _stages(plan: TunePlan) -> list[StageRecord]:
    return [
        StageRecord(s.index, s.trials, s.epochs, s.allocation, 0.0, 0.0, 0.0, 0.0)
        for s in plan.stages
    ]


@pytest.mark.parametrize("delivered", [None, 1.0])
def test_first_stage_on_warm_functions_pays_no_cold_start(delivered: float | None) -> None:
    catalog = machine(delivered)
    table = searchable_space(workload(), catalog)
    warm = {1728: 4, 640: 1}
    cold = build_problem(table, catalog, SHA, Constraint(budget_usd=1e9))
    hot = build_problem(table, catalog, SHA, Constraint(budget_usd=1e9), warm=warm)
    # The candidate tables differ (rows on warm sizes are all kept): compare by allocation.
    by_allocation = {cold.table.allocation(i): i for i in range(len(cold.table))}
    discounted = 0
    for row in range(len(hot.table)):
        allocation = hot.table.allocation(row)
        if allocation not in by_allocation:
            continue
        other = by_allocation[allocation]
        t_hot, c_hot, _ = hot.stage_totals(0, np.array([row]))
        t_cold, c_cold, _ = cold.stage_totals(0, np.array([other]))
        first = min(SHA.trial_counts[0], int(hot.trials_per_wave[row])) * allocation.n
        if warm.get(allocation.memory_mb, 0) >= first:
            assert t_hot[0] < t_cold[0] and c_hot[0] < c_cold[0]
            discounted += 1
        else:
            assert (t_hot[0], c_hot[0]) == (t_cold[0], c_cold[0])
        for stage in range(1, len(SHA.trial_counts)):  # later stages: as before
            t_a, c_a, _ = hot.stage_totals(stage, np.array([row]))
            t_b, c_b, _ = cold.stage_totals(stage, np.array([other]))
            assert (t_a[0], c_a[0]) == pytest.approx((t_b[0], c_b[0]), rel=1e-12)
    assert discounted > 0


@pytest.mark.parametrize("constraint", [Constraint(budget_usd=1.0), Constraint(deadline_s=15000)])
def test_a_plan_with_warm_functions_is_priced_as_the_run_predicts_it(
    constraint: Constraint,
) -> None:
    catalog = machine(1.0)
    warm = {1728: 2, 896: 1}
    plan = plan_tuning(workload(), catalog, constraint, SHA, warm=warm)
    # Priced apart, as the planner prices stages: without what the next stage's functions,
    # started beside a stage's last wave on this 1-vCPU machine, cost it and themselves.
    estimates = stage_estimates(workload(), catalog, _stages(plan), warm, beside=False)
    beside = stage_estimates(workload(), catalog, _stages(plan), warm)
    for (t_beside, c_beside), (t_apart, c_apart) in zip(beside, estimates, strict=True):
        assert t_beside >= t_apart and c_beside >= c_apart
    for stage, (time_s, cost_usd) in zip(plan.stages, estimates, strict=True):
        if stage.index == 1:  # the planner knows the first stage's pool exactly
            # The run also waits for its partitions to be written before it (time, not bill).
            write = partition_write_s(workload(), catalog, stage.allocation.n)
            assert (stage.time_s + write, stage.cost_usd) == pytest.approx(
                (time_s, cost_usd), rel=1e-9
            )
        else:  # later stages: a cold start priced, which a stage on the same size may skip
            assert stage.time_s >= time_s * (1 - 1e-9) and stage.cost_usd >= cost_usd * (1 - 1e-9)
    plain = plan_tuning(workload(), catalog, constraint, SHA)
    if constraint.budget_usd is not None:
        assert plan.time_s <= plain.time_s * (1 + 1e-12)
    else:
        assert plan.cost_usd <= plain.cost_usd * (1 + 1e-12)


def test_pruning_keeps_every_stage_front_with_warm_functions() -> None:
    catalog = machine(2.5)
    full = searchable_space(workload(), catalog)
    warm = {1728: 2, 896: 1}
    pruned = build_problem(full, catalog, SHA, Constraint(budget_usd=1e9), warm=warm)
    assert len(pruned.table) < len(full)
    everything = dataclasses.replace(
        pruned,
        table=full,
        trials_per_wave=np.maximum(1, catalog.platform.max_concurrent(full.memory_mb) // full.n),
        trial_vcpus=full.n * catalog.platform.vcpus(full.memory_mb),
        warm=np.array([warm.get(int(m), 0) for m in full.memory_mb], dtype=np.int64),
    )
    for index, stage in enumerate(pruned.stages):
        time, cost, _ = everything.stage_totals(index, np.arange(len(full)))
        front = pareto_indices(cost, time)
        want = sorted(zip(cost[front].round(15), time[front].round(9), strict=True))
        got = sorted(zip(stage.cost_usd.round(15), stage.time_s.round(9), strict=True))
        assert got == want
