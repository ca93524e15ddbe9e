"""The Job Profiling Advisor: inverse-order schedules, their cost against stepping up, and
the curve it fits to measurements of synthetic scalability curves."""

from __future__ import annotations

import numpy as np
import pytest

from faasml.cluster.scavenge import (
    JobMonitor,
    fit_curve,
    inverse_order,
    schedule_cost,
    settled,
    step_up_order,
)


def test_inverse_order_scales_up_once_then_down() -> None:
    assert inverse_order(64, 1) == (64, 32, 16, 8, 4, 2, 1)
    assert inverse_order(5, 1) == (5, 4, 2, 1)
    assert inverse_order(12, 3) == (12, 8, 4, 3)
    assert inverse_order(2, 3) == ()
    assert step_up_order(5, 1) == (1, 2, 4, 5)


def test_inverse_order_costs_less_than_stepping_up() -> None:
    inverse = schedule_cost(inverse_order(64, 1), 60.0, scale_up_s=18.0, scale_down_s=11.0)
    step = schedule_cost(step_up_order(64, 1), 60.0, scale_up_s=18.0, scale_down_s=11.0)
    assert (inverse.scale_ups, inverse.scale_downs) == (1, 6)
    assert (step.scale_ups, step.scale_downs) == (7, 0)
    assert inverse.duration_s < step.duration_s
    # Same counts measured: node-seconds differ only by the pauses, cheaper when going down.
    assert inverse.paused_node_s < step.paused_node_s


@pytest.mark.parametrize("sigma", [0.0, 0.02, 0.1, 0.4])
def test_fit_recovers_synthetic_amdahl_curves(sigma: float) -> None:
    def truth(n: np.ndarray) -> np.ndarray:
        return 250.0 * n / (1 + sigma * (n - 1))

    monitor = JobMonitor()
    for n in inverse_order(16, 1):
        monitor.record(n, float(truth(np.array(n))))
    curve = monitor.curve()
    grid = np.arange(1, 65)
    assert curve.sigma == pytest.approx(sigma, abs=1e-6)
    # Exact at the measured points, close in between, and beyond them by Amdahl's law.
    np.testing.assert_allclose(curve(np.array([1, 2, 4, 8, 16])), truth(np.array([1, 2, 4, 8, 16])))
    np.testing.assert_allclose(curve(grid), truth(grid), rtol=0.03)
    assert np.all(np.diff(curve(grid)) >= -1e-9)  # monotone
    assert float(curve(np.array(0))) == 0.0


def test_fit_flattens_noisy_dips_and_needs_a_point() -> None:
    curve = fit_curve({1: 100.0, 2: 190.0, 4: 180.0})  # a noisy dip at 4
    assert np.all(np.diff(curve(np.arange(0, 9))) >= -1e-9)
    with pytest.raises(ValueError):
        fit_curve({})
    one = fit_curve({4: 400.0})
    assert float(one(np.array(8))) == pytest.approx(800.0)  # one point: linear guess


def test_profiling_settles_when_the_fit_predicts_the_next_count() -> None:
    amdahl = {n: 100 * n / (1 + 0.1 * (n - 1)) for n in (64, 32, 16)}
    assert settled(amdahl)
    assert not settled({64: amdahl[64]})  # one point: go on
    # Two points determine a valid Amdahl law: stop, unless three are asked for.
    assert settled({64: amdahl[64], 32: amdahl[32]})
    assert not settled({64: amdahl[64], 32: amdahl[32]}, least=3)
    # Two points no Amdahl law fits: superlinear, or slower on more nodes: go on.
    assert not settled({64: 7000.0, 32: 3000.0})
    assert not settled({64: 2800.0, 32: 2900.0})
    odd = {64: 3000.0, 32: 2900.0, 16: 800.0}  # a knee the first two did not show
    assert not settled(odd)


def test_a_curve_profiled_at_large_counts_extrapolates_down_by_amdahl() -> None:
    def truth(n: np.ndarray) -> np.ndarray:
        return 80.0 * n / (1 + 0.03 * (n - 1))

    curve = fit_curve({n: float(truth(np.array(n))) for n in (64, 32, 16)})
    grid = np.arange(1, 17)
    np.testing.assert_allclose(curve(grid), truth(grid), rtol=1e-6)
