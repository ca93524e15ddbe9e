from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import ConfigError, InfeasibleConstraintError
from faasml.planners.tuning import (
    SuccessiveHalving,
    plan_from,
    plan_tuning,
    retarget,
    tuning_problem,
)
from faasml.sim import simulate_tuning
from faasml.types import Constraint, TunePlan
from faasml.workload import load_workload


@pytest.fixture(scope="module")
def planned() -> tuple[TunePlan, Catalog]:
    catalog = load_catalog("aws-lambda")
    plan = plan_tuning(
        load_workload("mobilenet-cifar10"),
        catalog,
        Constraint(budget_usd=400.0),
        SuccessiveHalving(4096, 2, epochs_per_stage=2),
        memory_step_mb=512,
    )
    assert any(stage.waves > 1 for stage in plan.stages)  # the concurrency limit binds
    return plan, catalog


def test_without_noise_the_simulation_reproduces_the_prediction(
    planned: tuple[TunePlan, Catalog],
) -> None:
    plan, catalog = planned
    run = simulate_tuning(plan, catalog, noise=0.0, cold_start_noise=0.0)
    assert run.time_s == pytest.approx(plan.time_s, rel=1e-9)
    assert run.cost_usd == pytest.approx(plan.cost_usd, rel=1e-9)
    for stage, predicted in zip(run.stages, plan.stages, strict=True):
        assert stage.time_s == pytest.approx(predicted.time_s, rel=1e-9)
        assert stage.peak_functions <= catalog.platform.concurrency_limit
    assert run.within_constraint


def test_noisy_runs_are_deterministic_under_a_seed(planned: tuple[TunePlan, Catalog]) -> None:
    plan, catalog = planned
    first = simulate_tuning(plan, catalog, noise=0.15, seed=7)
    again = simulate_tuning(plan, catalog, noise=0.15, seed=7)
    other = simulate_tuning(plan, catalog, noise=0.15, seed=8)
    assert first == again
    assert first.time_s != other.time_s
    # Stages wait for their slowest trial, so noise lengthens them; money tracks the mean.
    assert 0.0 < first.time_error < 0.5
    assert abs(first.cost_error) < 0.05


@pytest.mark.parametrize("noise", [-0.1, float("nan")])
def test_bad_noise_is_refused(planned: tuple[TunePlan, Catalog], noise: float) -> None:
    plan, catalog = planned
    with pytest.raises(ConfigError, match="the value of noise"):
        simulate_tuning(plan, catalog, noise=noise)


def test_a_platform_too_small_for_the_plan_is_refused(planned: tuple[TunePlan, Catalog]) -> None:
    plan, catalog = planned
    widest = max(stage.allocation.n for stage in plan.stages)
    small = replace(catalog, platform=replace(catalog.platform, concurrency_limit=widest - 1))
    with pytest.raises(ConfigError, match="runs at most"):
        simulate_tuning(plan, small)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["lr-higgs", "mobilenet-cifar10", "bert-imdb"]),
    st.integers(2, 3000),
    st.sampled_from(["exact", "greedy", "static", "even-trials"]),
    st.floats(1.05, 3.0),
)
def test_noiseless_simulation_matches_every_plan(
    workload: str, trials: int, planner: str, factor: float
) -> None:
    catalog = load_catalog("aws-lambda")
    sha = SuccessiveHalving(trials)
    setup = tuning_problem(
        load_workload(workload), catalog, Constraint(budget_usd=1e15), sha, memory_step_mb=1024
    )
    least = sum(float(s.cost_usd.min()) for s in setup.problem.stages)
    try:
        plan = plan_from(retarget(setup, Constraint(budget_usd=factor * least)), planner)
    except InfeasibleConstraintError:
        return
    run = simulate_tuning(plan, catalog, noise=0.0, cold_start_noise=0.0)
    assert run.time_s == pytest.approx(plan.time_s, rel=1e-9)
    assert run.cost_usd == pytest.approx(plan.cost_usd, rel=1e-9)
    assert all(s.peak_functions <= catalog.platform.concurrency_limit for s in run.stages)


@pytest.mark.parametrize("delivered", [None, 1.0])
def test_on_a_crowded_machine_the_simulation_replays_the_stage_model(
    delivered: float | None,
) -> None:
    """On a bounded machine that delivers fewer vCPUs than a wave demands, each trial runs at
    its wave's contention, as the planner's stage model prices it."""
    local = load_catalog("local")
    platform = replace(
        local.platform, capacity_vcpus=4.0, capacity_memory_mb=16000.0, delivered_vcpus=delivered
    )
    catalog = replace(local, platform=platform)
    plan = plan_tuning(
        load_workload("lr-higgs"),
        catalog,
        Constraint(budget_usd=1.0),
        SuccessiveHalving(16, 2, epochs_per_stage=1),
    )
    run = simulate_tuning(plan, catalog, noise=0.0, cold_start_noise=0.0)
    for stage, predicted in zip(run.stages, plan.stages, strict=True):
        assert stage.time_s == pytest.approx(predicted.time_s, rel=1e-9)
        assert stage.cost_usd == pytest.approx(predicted.cost_usd, rel=1e-9)
