"""A constraint whose objective has no limit of its own: `--budget B --minimise cost` (the
cheapest plan, if it fits B) and `--deadline T --minimise time` (the fastest, if within T)."""

from __future__ import annotations

import pytest

from faasml.catalog import load_catalog
from faasml.planners.tuning import SuccessiveHalving, plan_from, tuning_problem
from faasml.types import Constraint, Objective
from faasml.workload import load_workload

SHA = SuccessiveHalving(1024, 2)
SPLITTING = ("exact", "greedy", "fixed", "even-trials")


@pytest.mark.parametrize("planner", SPLITTING)
def test_least_cost_within_a_budget_alone(planner: str) -> None:
    setup = tuning_problem(
        load_workload("lr-higgs"),
        load_catalog("aws-lambda"),
        Constraint(budget_usd=5.0, objective=Objective.MIN_COST),
        SHA,
        memory_step_mb=512,
    )
    least = sum(float(s.cost_usd.min()) for s in setup.problem.stages)
    plan = plan_from(setup, planner)
    assert plan.cost_usd == pytest.approx(least, rel=1e-12)
    assert plan.cost_usd <= 5.0


@pytest.mark.parametrize("planner", SPLITTING)
def test_least_time_within_a_deadline_alone(planner: str) -> None:
    setup = tuning_problem(
        load_workload("lr-higgs"),
        load_catalog("aws-lambda"),
        Constraint(deadline_s=3600.0, objective=Objective.MIN_TIME),
        SHA,
        memory_step_mb=512,
    )
    least = sum(float(s.time_s.min()) for s in setup.problem.stages)
    plan = plan_from(setup, planner)
    assert plan.time_s == pytest.approx(least, rel=1e-12)
    assert plan.time_s <= 3600.0
