from __future__ import annotations

from pathlib import Path

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.planners.adaptive import training_frontier
from faasml.sim.curves import CurvePoint, read_curve, write_curve
from faasml.sim.synthetic import RecordedCurve, SyntheticCurve, sample_run, synthetic_curve
from faasml.sim.training import offline_epochs_for, simulate_training
from faasml.types import Constraint, Decision
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda")
WORKLOAD = load_workload("mobilenet-cifar10")
FRONTIER = training_frontier(WORKLOAD, CATALOG, memory_step_mb=256, max_functions=100)


def budget_for(epochs: int, slack: float) -> Constraint:
    cost = FRONTIER.startup_usd + epochs * FRONTIER.cost_usd
    return Constraint(budget_usd=slack * float(cost.min()))


def test_a_run_is_deterministic_and_its_books_add_up() -> None:
    curve = synthetic_curve("power", 1.0, 25.0, noise=0.01, seed=4)
    args = (WORKLOAD, CATALOG, budget_for(25, 2.0), curve)
    first = simulate_training(*args, offline_epochs=15, frontier=FRONTIER)
    again = simulate_training(*args, offline_epochs=15, frontier=FRONTIER)
    assert first == again
    assert first.records[-1].decision.decision is Decision.STOP
    assert [r.epoch for r in first.records] == list(range(1, len(first.records) + 1))
    spent = [r.spent_usd for r in first.records]
    assert spent == sorted(spent) and first.cost_usd == pytest.approx(spent[-1])
    assert first.time_s == pytest.approx(first.records[-1].elapsed_s)


def test_a_too_low_offline_estimate_breaks_the_static_budget_but_not_the_adaptive_one() -> None:
    curve = synthetic_curve("inverse", 1.0, 30.0, noise=0.005, seed=1)
    constraint = budget_for(30, 1.3)
    static = simulate_training(
        WORKLOAD,
        CATALOG,
        constraint,
        curve,
        policy="static",
        offline_epochs=15,
        frontier=FRONTIER,
    )
    adaptive = simulate_training(
        WORKLOAD,
        CATALOG,
        constraint,
        curve,
        policy="adaptive",
        offline_epochs=15,
        frontier=FRONTIER,
    )
    assert static.reached and static.violated
    assert adaptive.reached and not adaptive.violated
    assert adaptive.restarts >= 1


def test_delayed_restarts_hide_switch_time_that_plain_restarts_show() -> None:
    curve = synthetic_curve("exponential", 1.0, 30.0, noise=0.005, seed=2)
    constraint = budget_for(30, 3.0)
    runs = {
        policy: simulate_training(
            WORKLOAD,
            CATALOG,
            constraint,
            curve,
            policy=policy,
            offline_epochs=60,
            frontier=FRONTIER,
        )
        for policy in ("adaptive", "no-delay")
    }
    assert runs["adaptive"].restarts >= 1 and runs["no-delay"].restarts >= 1
    assert runs["adaptive"].hidden_switch_s > 0 and runs["adaptive"].visible_switch_s == 0
    assert runs["no-delay"].hidden_switch_s == 0 and runs["no-delay"].visible_switch_s > 0


def test_a_recorded_curve_is_replayed_until_it_ends(tmp_path: Path) -> None:
    source = synthetic_curve("inverse", 1.0, 40.0, noise=0.0)
    points = [CurvePoint(k, float(source.mean(k))) for k in range(1, 21)]
    recorded = RecordedCurve(read_curve(write_curve(tmp_path / "r.csv", points)), 1.0)
    run = simulate_training(
        WORKLOAD, CATALOG, budget_for(40, 3.0), recorded, offline_epochs=40, frontier=FRONTIER
    )
    assert not run.reached and "ends before epoch 21" in run.stop_reason
    assert run.true_epochs is None
    reached = RecordedCurve(recorded.curve, float(source.mean(10)) + 1e-9)
    assert reached.true_epochs == 10
    with pytest.raises(ConfigError, match="at least 3"):
        RecordedCurve(read_curve(write_curve(tmp_path / "s.csv", points[:2])), 1.0)


def test_sample_runs_and_offline_estimates() -> None:
    curve = synthetic_curve("inverse", 1.0, 30.0, noise=0.0)
    epochs, losses = sample_run(curve, epochs=8, mismatch=0.0, noise=0.0)
    assert epochs == list(range(1, 9))
    assert losses == pytest.approx([float(curve.mean(k)) for k in epochs])
    assert offline_epochs_for(curve, fallback=7, mismatch=0.0) in (29, 30, 31)
    with pytest.raises(ConfigError, match="floor < target"):
        SyntheticCurve("inverse", 2.0, 1.5, 1.0, 10.0)
    with pytest.raises(ConfigError, match="family"):
        synthetic_curve("cubic", 1.0, 10.0)
