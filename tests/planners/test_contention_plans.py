"""Plans priced with the vCPUs a shared machine delivers (the job probe's contention figure).

The planners stay pure: the delivered vCPUs come in with the catalog
(``FunctionPlatform.delivered_vcpus``); a crowded wave runs ``contention`` times slower. The
planner's stage totals must equal the run's own stage estimate (``runtime.stage_pricing``, a
separate loop over waves), and pruning the candidates must keep every stage's optimum.
"""

from __future__ import annotations

import numpy as np
import pytest

from faasml.planners._space import searchable_space
from faasml.planners.pareto import pareto_indices
from faasml.planners.training import plan_training, run_totals
from faasml.planners.tuning import (
    build_problem,
    plan_tuning,
    tuning_problem,
)
from faasml.planners.tuning._problem import StageOptions, TuningProblem, trial_vcpus
from faasml.planners.tuning._problem import trials_per_wave as per_wave
from faasml.runtime.runs.stage_pricing import stage_estimate
from faasml.types import Constraint

from .fixed_machine import SHA, machine, workload


@pytest.mark.parametrize("delivered", [1.0, 2.5])
def test_stage_totals_equal_the_runs_own_stage_estimate(delivered: float) -> None:
    catalog = machine(delivered)
    problem = tuning_problem(workload(), catalog, Constraint(budget_usd=1e9), SHA).problem
    crowded = 0
    for index, stage in enumerate(problem.stages):
        rows = np.arange(len(problem.table))
        time, cost, _ = problem.stage_totals(index, rows)
        for row in rows[:: max(1, len(rows) // 60)]:
            allocation = problem.table.allocation(int(row))
            want = stage_estimate(workload(), catalog, allocation, stage.trials, stage.epochs)
            assert time[row] == pytest.approx(want[0], rel=1e-9)
            assert cost[row] == pytest.approx(want[1], rel=1e-9)
            demand = min(stage.trials, int(problem.trials_per_wave[row])) * float(
                problem.table.n[row] * catalog.platform.vcpus(allocation.memory_mb)
            )
            crowded += demand > delivered
    assert crowded > 0  # the check covered waves that the machine slows


@pytest.mark.parametrize("delivered", [1.0, 2.5])
def test_pruning_keeps_every_stage_front_under_contention(delivered: float) -> None:
    catalog = machine(delivered)
    constraint = Constraint(budget_usd=1e9)
    full = searchable_space(workload(), catalog)
    pruned = build_problem(full, catalog, SHA, constraint)
    if delivered > 2:  # rows no wave of which is crowded are pruned as on a public FaaS
        assert len(pruned.table) < len(full)
    shell = TuningProblem(
        constraint,
        full,
        per_wave(full, catalog),
        tuple(
            StageOptions(
                q, r, np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
            )
            for q, r in zip(SHA.trial_counts, SHA.epochs, strict=True)
        ),
        platform=catalog.platform,
        trial_vcpus=trial_vcpus(full, catalog),
    )
    for index, stage in enumerate(pruned.stages):
        time, cost, _ = shell.stage_totals(index, np.arange(len(full)))
        front = pareto_indices(cost, time)
        want = sorted(zip(cost[front].round(15), time[front].round(9), strict=True))
        got = sorted(zip(stage.cost_usd.round(15), stage.time_s.round(9), strict=True))
        assert got == want


def test_a_budget_plan_holds_when_priced_with_what_the_machine_delivers() -> None:
    budget = Constraint(budget_usd=1.0)
    honest = machine(1.0)
    plan = plan_tuning(workload(), honest, budget, SHA)
    priced = [
        stage_estimate(workload(), honest, s.allocation, s.trials, s.epochs) for s in plan.stages
    ]
    assert plan.cost_usd <= 1.0
    assert sum(c for _, c in priced) == pytest.approx(plan.cost_usd, rel=1e-9)
    assert sum(t for t, _ in priced) == pytest.approx(plan.time_s, rel=1e-9)
    # Planned as if every function had its share, the same budget buys waves the machine
    # cannot run at that speed: priced as it runs, that plan costs more than the budget.
    blind = plan_tuning(workload(), machine(None), budget, SHA)
    blind_cost = sum(
        stage_estimate(workload(), honest, s.allocation, s.trials, s.epochs)[1]
        for s in blind.stages
    )
    assert blind.cost_usd <= 1.0 < blind_cost


def test_a_machine_that_delivers_its_capacity_plans_as_before() -> None:
    for constraint in (Constraint(budget_usd=1.5), Constraint(deadline_s=15000.0)):
        ample = plan_tuning(workload(), machine(4.0), constraint, SHA)
        unknown = plan_tuning(workload(), machine(None), constraint, SHA)
        assert (ample.stages, ample.time_s, ample.cost_usd) == (
            unknown.stages,
            unknown.time_s,
            unknown.cost_usd,
        )


def test_training_totals_and_plan_price_contention() -> None:
    catalog = machine(1.0)
    space = searchable_space(workload(), catalog)
    time, cost = run_totals(space, 5, catalog.platform)
    plain_time, plain_cost = run_totals(space, 5)
    for row in range(0, len(space), max(1, len(space) // 60)):
        want = stage_estimate(workload(), catalog, space.allocation(row), 1, 5)
        assert (time[row], cost[row]) == pytest.approx(want, rel=1e-9)
    slowed = space.n * catalog.platform.vcpus(space.memory_mb) > 1.0
    assert slowed.any()
    assert np.all(time[slowed] > plain_time[slowed])
    np.testing.assert_allclose(cost[~slowed], plain_cost[~slowed], rtol=1e-12)
    plan = plan_training(workload(), catalog, Constraint(deadline_s=3000.0), epochs=5)
    row = int(
        np.flatnonzero(
            (space.n == plan.choice.allocation.n)
            & (space.memory_mb == plan.choice.allocation.memory_mb)
            & (
                space.option
                == space.options.index(
                    (plan.choice.allocation.storage, plan.choice.allocation.scheme)
                )
            )
        )[0]
    )
    assert plan.time_s == pytest.approx(time[row], rel=1e-9)
    assert plan.cost_usd == pytest.approx(cost[row], rel=1e-9)
