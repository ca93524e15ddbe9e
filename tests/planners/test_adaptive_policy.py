from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import ConfigError, InfeasibleConstraintError, UnknownNameError
from faasml.models.space import evaluate_allocation
from faasml.planners.adaptive import (
    TRAINING_POLICIES,
    AdaptiveScheduler,
    training_frontier,
)
from faasml.planners.training import plan_training
from faasml.sim.synthetic import random_curve, synthetic_curve
from faasml.sim.training import simulate_training
from faasml.types import Constraint, Decision
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda")
WORKLOAD = load_workload("mobilenet-cifar10")
FRONTIER = training_frontier(WORKLOAD, CATALOG, memory_step_mb=256, max_functions=100)


def scheduler(constraint: Constraint, offline: int, **kwargs: object) -> AdaptiveScheduler:
    return AdaptiveScheduler(
        WORKLOAD, CATALOG, constraint, 1.0, offline_epochs=offline, frontier=FRONTIER, **kwargs
    )


def least_budget(epochs: int) -> float:
    cost = FRONTIER.startup_usd + epochs * FRONTIER.cost_usd
    return float(cost.min())


def test_start_is_the_best_pareto_allocation_within_the_budget() -> None:
    budget = 3 * least_budget(20)
    policy = scheduler(Constraint(budget_usd=budget), 20)
    chosen = policy.start()
    plan = plan_training(
        WORKLOAD,
        CATALOG,
        Constraint(budget_usd=budget),
        epochs=20,
        memory_step_mb=256,
        max_functions=100,
    )
    assert chosen.n * chosen.memory_mb > 0
    rows = [i for i in range(len(FRONTIER)) if FRONTIER.allocation(i) == chosen]
    (row,) = rows
    assert FRONTIER.startup_usd[row] + 20 * FRONTIER.cost_usd[row] <= budget
    # No faster frontier allocation fits the budget.
    cost = FRONTIER.startup_usd + 20 * FRONTIER.cost_usd
    assert FRONTIER.time_s[row] <= FRONTIER.time_s[cost <= budget].min() + 1e-12
    assert FRONTIER.time_s[row] == pytest.approx(plan.choice.epoch_time_s, rel=0.05)


def test_an_infeasible_budget_names_the_least_budget() -> None:
    with pytest.raises(InfeasibleConstraintError, match="least budget") as caught:
        scheduler(Constraint(budget_usd=least_budget(20) / 4), 20).start()
    assert caught.value.least_budget_usd == pytest.approx(least_budget(20))


def test_a_budget_for_part_of_the_offline_estimate_starts_best_effort() -> None:
    policy = scheduler(Constraint(budget_usd=least_budget(20) * 0.7), 20)
    chosen = policy.start()
    assert "best effort" in policy.start_reason
    cheapest = int(np.argmin(FRONTIER.cost_usd))
    assert chosen == FRONTIER.allocation(cheapest)
    with pytest.raises(ConfigError, match="start_fraction"):
        scheduler(Constraint(budget_usd=1.0), 20, start_fraction=0.0)


def test_observe_checks_its_input_and_needs_start() -> None:
    policy = scheduler(Constraint(budget_usd=100.0), 20)
    with pytest.raises(ConfigError, match="start"):
        policy.observe(1, 2.0, 0.1, 10.0)
    policy.start()
    policy.observe(1, 2.0, 0.1, 10.0)
    with pytest.raises(ConfigError, match="epoch"):
        policy.observe(1, 1.9, 0.2, 20.0)
    with pytest.raises(ConfigError, match="loss"):
        policy.observe(2, float("nan"), 0.2, 20.0)
    with pytest.raises(ConfigError, match="delta"):
        scheduler(Constraint(budget_usd=100.0), 20, delta=-1.0)


def test_stops_when_the_target_is_reached() -> None:
    policy = scheduler(Constraint(budget_usd=100.0), 20)
    policy.start()
    decision = policy.observe(1, 0.9, 0.1, 10.0)
    assert decision.decision is Decision.STOP
    assert "reached" in decision.reason


def test_rescales_when_the_prediction_moves_beyond_delta_and_keeps_within() -> None:
    curve = synthetic_curve("inverse", 1.0, 30.0, noise=0.0)
    budget = 2 * least_budget(30)
    wrong = scheduler(Constraint(budget_usd=budget), 60)  # offline estimate twice too high
    right = scheduler(Constraint(budget_usd=budget), 30)
    for policy in (wrong, right):
        policy.start()
    spent = 0.0
    decisions = {}
    for epoch in range(1, 8):
        spent += 0.01
        loss = float(curve.mean(epoch))
        decisions[epoch] = (
            wrong.observe(epoch, loss, spent, 60.0 * epoch),
            right.observe(epoch, loss, spent, 60.0 * epoch),
        )
    first_online = decisions[5]
    assert first_online[0].decision is Decision.RESCALE
    assert "more than δ" in first_online[0].reason
    switch = first_online[0].switch
    assert switch is not None and switch.delayed and switch.mid_epoch
    assert first_online[0].effective_epoch == 6  # takes over at a sync point within epoch 6
    assert first_online[0].predicted_total_epochs == 30
    assert all(d[1].decision is Decision.KEEP for d in decisions.values())


def test_policies_are_found_by_name() -> None:
    assert TRAINING_POLICIES.names() == ["adaptive", "every-epoch", "no-delay", "static"]
    with pytest.raises(UnknownNameError, match="adaptive"):
        TRAINING_POLICIES.get("optimus")


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    slack=st.floats(0.6, 3.0),
    policy=st.sampled_from(["adaptive", "no-delay", "every-epoch"]),
    by_deadline=st.booleans(),
)
def test_guarded_policies_never_overspend_or_overrun(
    seed: int, slack: float, policy: str, by_deadline: bool
) -> None:
    rng = np.random.default_rng(seed)
    curve = random_curve(rng, epochs=(8.0, 30.0))
    truth = curve.true_epochs
    if by_deadline:
        least = float((CATALOG.platform.cold_start_s + truth * FRONTIER.time_s).min())
        constraint = Constraint(deadline_s=slack * least)
    else:
        constraint = Constraint(budget_usd=slack * least_budget(truth))
    try:
        run = simulate_training(
            WORKLOAD, CATALOG, constraint, curve, policy=policy, frontier=FRONTIER, seed=seed
        )
    except InfeasibleConstraintError:
        return  # the offline estimate alone does not fit: refused before spending anything
    assert not run.violated
    assert run.cost_usd <= (constraint.budget_usd or np.inf) * (1 + 1e-9)
    assert run.time_s <= (constraint.deadline_s or np.inf) * (1 + 1e-9)
    if run.reached:
        assert run.records[-1].loss <= curve.target_loss


def test_the_frontier_can_be_kept_to_some_storages() -> None:
    narrow = training_frontier(
        WORKLOAD, CATALOG, memory_step_mb=256, max_functions=100, storages=["s3"]
    )
    assert {narrow.allocation(i).storage for i in range(len(narrow))} == {"s3"}
    assert float(narrow.time_s.min()) >= float(FRONTIER.time_s.min())
    with pytest.raises(ConfigError, match="storage nowhere"):
        training_frontier(WORKLOAD, CATALOG, max_functions=10, storages=["nowhere"])


def _slower(catalog: Catalog, factor: float) -> Catalog:
    """``catalog`` with u(m) ``factor`` times longer on every memory size."""
    platform = catalog.platform
    arch = platform.architectures[platform.architecture]
    slow = dataclasses.replace(arch, compute_speed=arch.compute_speed / factor)
    architectures = {**platform.architectures, platform.architecture: slow}
    platform = dataclasses.replace(platform, architectures=architectures)
    return dataclasses.replace(catalog, platform=platform)


def test_repricing_keeps_the_allocation_and_the_curve_and_prices_it_as_measured() -> None:
    policy = AdaptiveScheduler(
        WORKLOAD,
        CATALOG,
        Constraint(budget_usd=3 * least_budget(20)),
        1.0,
        offline_epochs=20,
        memory_step_mb=256,
        max_functions=100,
    )
    chosen = policy.start()
    policy.observe(1, 2.0, 0.01, 10.0)
    slower = _slower(CATALOG, 2.0)
    policy.reprice(WORKLOAD, slower)
    assert policy.allocation == chosen  # the running allocation stays, repriced
    row = [i for i in range(len(policy.frontier)) if policy.frontier.allocation(i) == chosen]
    assert len(row) == 1
    measured = evaluate_allocation(WORKLOAD, slower, chosen)
    assert policy.frontier.time_s[row[0]] == pytest.approx(float(measured.time_s[0]))
    assert policy.frontier.cost_usd[row[0]] == pytest.approx(float(measured.cost_usd[0]))
    before = evaluate_allocation(WORKLOAD, CATALOG, chosen)
    assert float(measured.compute_s[0]) == pytest.approx(2 * float(before.compute_s[0]))
    assert float(measured.time_s[0]) > float(before.time_s[0])
    # Every other row is Pareto-optimal under the corrected prices.
    corrected = training_frontier(WORKLOAD, slower, memory_step_mb=256, max_functions=100)
    others = {policy.frontier.allocation(i) for i in range(len(policy.frontier))} - {chosen}
    assert others <= {corrected.allocation(i) for i in range(len(corrected))}
    # The loss curve seen so far stands: the next epoch is epoch 2, not a new start.
    decision = policy.observe(2, 1.9, 0.02, 20.0)
    assert decision.epoch == 2
    with pytest.raises(ConfigError, match="start"):
        AdaptiveScheduler(WORKLOAD, CATALOG, Constraint(budget_usd=1.0), 1.0).reprice(
            WORKLOAD, slower
        )
