"""The deployment search on simulated landscapes: the model's truth, a perturbed truth with
noise, a re-trigger after a change, the dollar budget, and what cannot run."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.search import SearchBudget
from faasml.search.deployment import DeploymentGoal, DeploymentSearch, DeploymentSpace
from faasml.sim.deployment import TrueLandscape, perturbed_workload
from faasml.types import Allocation, Constraint, Objective
from faasml.workload import Workload, load_workload

CATALOG = load_catalog("aws-lambda").restricted_to(["s3"])
WORKLOAD = load_workload("lr-higgs")


def space_of(workload: Workload) -> DeploymentSpace:
    """A smaller space than the default (256 MB steps, at most 128 functions): fast tests."""
    return DeploymentSpace.build(workload, CATALOG, memory_step_mb=256, max_functions=128)


def goal_for(space: DeploymentSpace, epochs: int) -> DeploymentGoal:
    budget = 1.5 * epochs * float(space.table.cost_usd.min())
    return DeploymentGoal.from_constraint(Constraint(budget_usd=budget), epochs)


def exact_best(truth: TrueLandscape, space: DeploymentSpace, goal: DeploymentGoal) -> tuple:
    time_s, cost = truth.exact(space)
    kept = np.isfinite(time_s) & (goal.epochs * cost <= goal.limit)
    return time_s, cost, float(time_s[kept].min())


def test_the_goal_scores_the_objective_and_penalises_the_constraint() -> None:
    goal = DeploymentGoal(Objective.MIN_TIME, epochs=10, limit=1.0)
    assert float(goal.score(20.0, 0.05)) == pytest.approx(math.log(20.0))
    assert float(goal.score(20.0, 0.2)) > math.log(20.0) + 5  # twice the budget
    assert goal.keeps(20.0, 0.1) and not goal.keeps(20.0, 0.11)
    with pytest.raises(ConfigError, match="epochs is 0"):
        DeploymentGoal(Objective.MIN_COST, epochs=0)


def test_the_space_holds_feasible_candidates_with_scaled_features() -> None:
    space = space_of(WORKLOAD)
    assert len(space) > 500
    assert space.features.min() >= 0.0 and space.features.max() <= 1.0
    needed = WORKLOAD.memory_needed_mb(space.table.n)
    assert np.all(needed <= space.table.memory_mb)
    row = 17
    assert space.index_of(space.allocation(row)) == row
    assert space.index_of(Allocation(3, 129, "s3", "allreduce")) is None


def test_a_job_no_function_can_hold_is_a_one_line_error() -> None:
    huge = dataclasses.replace(WORKLOAD, model_mb=50_000.0)
    with pytest.raises(
        ConfigError, match=r"no deployment of aws-lambda can run .*memory too small"
    ):
        DeploymentSpace.build(huge, CATALOG)


def test_with_an_exact_model_the_first_probe_is_the_optimum_and_the_search_stops_early() -> None:
    space = space_of(WORKLOAD)
    goal = goal_for(space, WORKLOAD.epochs)
    truth = TrueLandscape(WORKLOAD, CATALOG, noise=0.01, seed=0)
    search = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=10))
    result = search.run(truth.measure)
    time_s, _, best = exact_best(truth, space, goal)
    assert result.probes[0].allocation == space.allocation(int(np.argmin(space.prior(goal))))
    assert time_s[result.choice_index] <= 1.05 * best
    assert len(result.probes) < 10 and "expected improvement" in result.stop_reason


@pytest.mark.parametrize("seed", [0, 1])
def test_a_wrong_model_is_corrected_within_ten_probes_and_a_retrigger_within_three(
    seed: int,
) -> None:
    space = space_of(WORKLOAD)
    goal = goal_for(space, WORKLOAD.epochs)
    truth = TrueLandscape(perturbed_workload(WORKLOAD, np.random.default_rng(seed)), CATALOG)
    search = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=10), seed=seed)
    result = search.run(truth.measure)
    time_s, cost, best = exact_best(truth, space, goal)
    assert time_s[result.choice_index] <= 1.05 * best
    assert goal.epochs * cost[result.choice_index] <= goal.limit * 1.05

    bigger = dataclasses.replace(WORKLOAD, batch_size=WORKLOAD.batch_size * 4)
    new_space = space_of(bigger)
    new_goal = goal_for(new_space, bigger.epochs)
    new_truth = TrueLandscape(perturbed_workload(bigger, np.random.default_rng(seed)), CATALOG)
    again = search.retrigger(new_space, new_goal, budget=SearchBudget(max_probes=3), seed=seed)
    second = again.run(new_truth.measure)
    time_s, _, best = exact_best(new_truth, new_space, new_goal)
    assert len(second.probes) <= 3
    assert time_s[second.choice_index] <= 1.05 * best


def test_the_dollar_budget_caps_what_the_probes_cost() -> None:
    space = space_of(WORKLOAD)
    goal = goal_for(space, WORKLOAD.epochs)
    costs = space.probe_cost()
    cap = float(np.sort(costs)[len(costs) // 2]) * 1.5  # about one or two median probes
    truth = TrueLandscape(perturbed_workload(WORKLOAD, np.random.default_rng(3)), CATALOG)
    for searcher in ("gp-ei", "random"):
        search = DeploymentSearch(
            space,
            goal,
            searcher=searcher,
            budget=SearchBudget(max_probes=25, max_usd=cap, ei_threshold=0.0),
            probe_costs=costs,
            warm=False,
        )
        result = search.run(truth.measure)
        spent = 0.0
        for probe in result.probes:  # each probe fitted what was left when it was proposed
            assert costs[space.index_of(probe.allocation)] <= cap - spent + 1e-12
            spent += probe.measurement.probe_usd
        assert 1 <= len(result.probes) < 25
        assert "budget" in result.stop_reason


def test_recorded_probes_replayed_give_the_same_posterior() -> None:
    """What a resumed workflow run does: the probes of its record observed again."""
    space = space_of(WORKLOAD)
    goal = goal_for(space, WORKLOAD.epochs)
    truth = TrueLandscape(perturbed_workload(WORKLOAD, np.random.default_rng(5)), CATALOG)
    search = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=4, ei_threshold=0.0))
    result = search.run(truth.measure)
    again = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=4, ei_threshold=0.0))
    for probe in result.probes:
        again.record(probe.allocation, probe.measurement)
    assert again.result().choice == result.choice
    assert again.searcher.done()
    first, _ = search.searcher.residual(space.features)  # type: ignore[attr-defined]
    second, _ = again.searcher.residual(space.features)  # type: ignore[attr-defined]
    assert np.allclose(first, second)
    with pytest.raises(ConfigError, match="not a candidate"):
        again.record(Allocation(3, 999, "s3", "allreduce"), result.probes[0].measurement)


def test_memory_above_the_largest_cpu_share_is_not_searched_unless_the_job_needs_it() -> None:
    local = load_catalog("local")
    two_cores = dataclasses.replace(
        local,
        platform=dataclasses.replace(
            local.platform, max_vcpus=2.0, capacity_vcpus=2.0, memory_max_mb=18000
        ),
    )
    small = load_workload("lr-higgs")
    space = DeploymentSpace.build(small, two_cores)
    # 2 vCPUs at 3538 MB: the first size of 128 MB steps at or above it is the largest kept.
    assert int(space.table.memory_mb.max()) == 3584
    # A job whose one function needs more keeps every size (memory, not CPU, binds it).
    big = dataclasses.replace(small, runtime_mb=6000.0)
    assert int(DeploymentSpace.build(big, two_cores).table.memory_mb.max()) > 6000
    # AWS Lambda's largest size (10240 MB) is below its 6-vCPU share: nothing is left out.
    aws = load_catalog("aws-lambda")
    assert int(DeploymentSpace.build(small, aws).table.memory_mb.max()) == 10240
