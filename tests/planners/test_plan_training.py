from __future__ import annotations

import numpy as np
import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError, InfeasibleConstraintError
from faasml.models import allocation_space
from faasml.planners import plan_training
from faasml.planners.training import run_totals
from faasml.types import Constraint, Objective
from faasml.workload import load_workload

AWS = load_catalog("aws-lambda")
STEP = 256  # a coarser grid keeps the brute-force checks quick


def brute_force(name: str, epochs: int) -> tuple[np.ndarray, np.ndarray]:
    space = allocation_space(load_workload(name), AWS, memory_step_mb=STEP)
    return run_totals(space, epochs)


@pytest.mark.parametrize("name", ["lr-higgs", "mobilenet-cifar10"])
def test_fastest_within_budget_is_the_brute_force_optimum(name: str) -> None:
    time, cost = brute_force(name, 5)
    budget = float(np.quantile(cost, 0.2))
    plan = plan_training(
        load_workload(name), AWS, Constraint(budget_usd=budget), epochs=5, memory_step_mb=STEP
    )
    assert plan.cost_usd <= budget
    assert plan.time_s == pytest.approx(time[cost <= budget].min())
    assert plan.total.time_s == pytest.approx(plan.time_s)
    assert plan.epochs == 5 and plan.space_size == time.size


@pytest.mark.parametrize("name", ["lr-higgs", "resnet50-cifar10"])
def test_cheapest_within_deadline_is_the_brute_force_optimum(name: str) -> None:
    time, cost = brute_force(name, 3)
    deadline = float(np.quantile(time, 0.3))
    plan = plan_training(
        load_workload(name), AWS, Constraint(deadline_s=deadline), epochs=3, memory_step_mb=STEP
    )
    assert plan.time_s <= deadline
    assert plan.cost_usd == pytest.approx(cost[time <= deadline].min())
    for runner in plan.runners_up:
        assert runner.allocation.storage != plan.choice.allocation.storage or (
            runner.allocation.scheme != plan.choice.allocation.scheme
        )


def test_both_bounds_and_the_objective() -> None:
    workload = load_workload("lr-higgs")
    time, cost = brute_force("lr-higgs", 10)
    budget, deadline = float(np.median(cost)), float(np.median(time))
    both = (cost <= budget) & (time <= deadline)
    assert both.any()
    fast = plan_training(
        workload,
        AWS,
        Constraint(budget, deadline, Objective.MIN_TIME),
        memory_step_mb=STEP,
    )
    cheap = plan_training(
        workload,
        AWS,
        Constraint(budget, deadline, Objective.MIN_COST),
        memory_step_mb=STEP,
    )
    assert fast.time_s == pytest.approx(time[both].min())
    assert cheap.cost_usd == pytest.approx(cost[both].min())
    assert fast.time_s <= cheap.time_s and cheap.cost_usd <= fast.cost_usd


def test_infeasible_budget_states_the_least_budget_that_works() -> None:
    workload = load_workload("mobilenet-cifar10")
    with pytest.raises(InfeasibleConstraintError, match="least budget that works") as info:
        plan_training(workload, AWS, Constraint(budget_usd=1e-6), memory_step_mb=STEP)
    least = info.value.least_budget_usd
    assert least is not None and least > 1e-6
    plan = plan_training(workload, AWS, Constraint(budget_usd=least), memory_step_mb=STEP)
    assert plan.cost_usd == pytest.approx(least)


def test_infeasible_deadline_states_the_shortest_deadline() -> None:
    workload = load_workload("bert-imdb")
    with pytest.raises(InfeasibleConstraintError, match="shortest deadline") as info:
        plan_training(workload, AWS, Constraint(deadline_s=1.0), memory_step_mb=STEP)
    shortest = info.value.least_deadline_s
    assert shortest is not None and shortest > 1.0
    plan = plan_training(workload, AWS, Constraint(deadline_s=shortest), memory_step_mb=STEP)
    assert plan.time_s == pytest.approx(shortest)


def test_bounds_each_feasible_but_not_together() -> None:
    workload = load_workload("resnet50-cifar10")
    time, cost = brute_force("resnet50-cifar10", 20)
    deadline = float(time.min() * 1.01)
    budget = float(cost.min() * 1.01)
    with pytest.raises(InfeasibleConstraintError, match="meeting the deadline needs") as info:
        plan_training(workload, AWS, Constraint(budget, deadline), memory_step_mb=STEP)
    assert info.value.least_budget_usd == pytest.approx(cost[time <= deadline].min())
    assert info.value.least_deadline_s == pytest.approx(time[cost <= budget].min())


def test_bad_epochs_and_constraints() -> None:
    with pytest.raises(ConfigError, match="epochs >= 1"):
        plan_training(load_workload("lr-higgs"), AWS, Constraint(budget_usd=1.0), epochs=0)
    with pytest.raises(ConfigError, match="needs a budget, a deadline"):
        Constraint()
    with pytest.raises(ConfigError, match="budget is -1"):
        Constraint(budget_usd=-1)
