"""The one stage model (``faasml.models.stages``): with an empty context it is CE-scaling eqs.
7–8, and the planner's ``stage_totals`` and the run's ``stage_estimate`` give the same figures
where their contexts coincide (both price with it)."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.catalog import Catalog, load_catalog
from faasml.models.space import AllocationTable
from faasml.models.stages import StageContext, stage_totals
from faasml.planners._space import searchable_space
from faasml.planners.tuning import SuccessiveHalving, build_problem, trials_per_wave
from faasml.runtime.runs.stage_pricing import stage_estimate
from faasml.types import Constraint
from faasml.workload import Workload, load_workload


@cache
def machine(delivered: float | None) -> Catalog:
    """The local catalog on a fixed 4-core machine (not this one's) delivering ``delivered``."""
    base = load_catalog("local")
    platform = dataclasses.replace(
        base.platform, capacity_vcpus=4.0, capacity_memory_mb=16000.0, delivered_vcpus=delivered
    )
    return dataclasses.replace(base, platform=platform)


@cache
def workload() -> Workload:
    return load_workload("mobilenet-cifar10")


@cache
def _space(catalog_name: str) -> tuple[Catalog, AllocationTable]:
    catalog = load_catalog(catalog_name)
    return catalog, searchable_space(workload(), catalog)


@settings(max_examples=40, deadline=None)
@given(
    trials=st.integers(1, 300),
    epochs=st.integers(1, 6),
    on_platform=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_an_empty_context_is_eqs_7_and_8(
    trials: int, epochs: int, on_platform: bool, seed: int
) -> None:
    catalog, space = _space("aws-lambda")
    rows = np.random.default_rng(seed).choice(len(space), size=min(64, len(space)))
    table = space.take(rows)
    k = trials_per_wave(table, catalog)
    # A public FaaS has no contention: its platform in the context changes nothing.
    context = StageContext(platform=catalog.platform if on_platform else None)
    totals = stage_totals(table, k, trials, epochs, context)
    waves = np.ceil(trials / k)
    assert np.array_equal(totals.waves, waves.astype(np.int64))
    time = table.startup_s + waves * epochs * table.time_s
    cost = trials * epochs * table.cost_usd + np.minimum(trials, k) * table.startup_usd
    np.testing.assert_allclose(totals.time_s, time, rtol=1e-12)
    np.testing.assert_allclose(totals.cost_usd, cost, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(trials=st.integers(1, 40), epochs=st.integers(1, 4), factor=st.floats(0.25, 4.0))
def test_equal_trials_scheduled_in_turn_run_in_waves(
    trials: int, epochs: int, factor: float
) -> None:
    """Trials of one factor f, scheduled on the first slots to free, end as waves of epochs
    whose computation is f times the workload's."""
    catalog, space = _space("aws-lambda")
    table = space.take(np.arange(0, len(space), max(1, len(space) // 50)))
    k = np.minimum(trials_per_wave(table, catalog), 7)  # several waves in most stages
    context = StageContext(factors=(factor,) * trials)
    totals = stage_totals(table, k, trials, epochs, context)
    epoch_s = table.time_s + (factor - 1.0) * table.compute_s
    time = table.startup_s + np.ceil(trials / k) * epochs * epoch_s
    np.testing.assert_allclose(totals.time_s, time, rtol=1e-9)
    per_s = table.function_usd / table.time_s
    rest = table.invocation_usd + table.storage_usd
    cost = trials * epochs * (epoch_s * per_s + rest) + np.minimum(trials, k) * table.startup_usd
    np.testing.assert_allclose(totals.cost_usd, cost, rtol=1e-9)


def test_a_slow_trial_holds_the_stage_while_the_others_run_in_turn() -> None:
    _, space = _space("aws-lambda")
    table = space.take(np.array([0]))
    one = stage_totals(table, np.array([2]), 3, 1, StageContext(factors=(1.0, 1.0, 1.0)))
    slow = stage_totals(table, np.array([2]), 3, 1, StageContext(factors=(3.0, 1.0, 1.0)))
    epoch_s, compute_s = float(table.time_s[0]), float(table.compute_s[0])
    # The slow trial holds one slot for the whole stage; the other two run one after the other.
    longest = max(epoch_s + 2.0 * compute_s, 2.0 * epoch_s)
    assert float(slow.time_s[0]) == pytest.approx(float(table.startup_s[0]) + longest)
    assert float(one.time_s[0]) == pytest.approx(float(table.startup_s[0]) + 2.0 * epoch_s)


@settings(max_examples=25, deadline=None)
@given(
    delivered=st.sampled_from([None, 1.0, 2.5]),
    stage=st.integers(0, 2),
    warm=st.sampled_from([{}, {1728: 4}, {640: 1, 1728: 2}]),
    seed=st.integers(0, 2**16),
)
def test_the_planner_and_the_run_price_a_stage_alike(
    delivered: float | None, stage: int, warm: dict[int, int], seed: int
) -> None:
    """Stages priced apart (the planner's view): warm functions before the first stage only,
    the machine's contention, no early starts, equal trials."""
    catalog = machine(delivered)
    job = SuccessiveHalving(8, 2, 3, 2)
    problem = build_problem(
        searchable_space(workload(), catalog), catalog, job, Constraint(budget_usd=1e9), warm=warm
    )
    rows = np.random.default_rng(seed).choice(len(problem.table), size=12)
    time, cost, _ = problem.stage_totals(stage, rows)
    for row, t, c in zip(rows, time, cost, strict=True):
        allocation = problem.table.allocation(int(row))
        ready = warm.get(allocation.memory_mb, 0) if stage == 0 else 0
        q, r = job.trial_counts[stage], job.epochs[stage]
        run = stage_estimate(workload(), catalog, allocation, q, r, warm=ready)
        assert run == pytest.approx((float(t), float(c)), rel=1e-9)


def test_a_workload_of_its_own_prices_alike_too() -> None:
    """The planner's table row and the run's own evaluation of that allocation agree."""
    catalog = load_catalog("aws-lambda")
    other = load_workload("lr-higgs")
    job = SuccessiveHalving(16, 2, 4, 1)
    problem = build_problem(
        searchable_space(other, catalog), catalog, job, Constraint(budget_usd=1e9)
    )
    for stage in range(len(job.trial_counts)):
        rows = np.arange(0, len(problem.table), max(1, len(problem.table) // 20))
        time, cost, _ = problem.stage_totals(stage, rows)
        for row, t, c in zip(rows, time, cost, strict=True):
            allocation = problem.table.allocation(int(row))
            q, r = job.trial_counts[stage], job.epochs[stage]
            run = stage_estimate(other, catalog, allocation, q, r)
            assert run == pytest.approx((float(t), float(c)), rel=1e-9)


def test_factors_beyond_the_stage_trials_are_not_billed() -> None:
    """A stage of one trial given three trials' factors prices that one trial only."""
    catalog, space = _space("aws-lambda")
    allocation = space.allocation(0)
    one = stage_estimate(workload(), catalog, allocation, 1, 2, factors=[1.5])
    assert stage_estimate(workload(), catalog, allocation, 1, 2, factors=[1.5, 0.5, 2.0]) == one
