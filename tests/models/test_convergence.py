from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.exceptions import ConfigError, FaasmlError, UnreachableTargetError
from faasml.models.convergence import FAMILIES, fit_loss_curve
from faasml.sim.synthetic import synthetic_curve


@settings(max_examples=25, deadline=None)
@given(
    family=st.sampled_from(["inverse", "exponential", "power"]),
    true_epochs=st.floats(10, 60),
    initial=st.floats(1.5, 4.0),
    floor=st.floats(0.1, 0.8),
    seen=st.floats(0.4, 1.0),
)
def test_fit_recovers_a_known_noise_free_curve(
    family: str, true_epochs: float, initial: float, floor: float, seen: float
) -> None:
    curve = synthetic_curve(family, 1.0, true_epochs, initial_ratio=initial, floor_ratio=floor)
    ks = np.arange(0, max(4, int(seen * true_epochs)) + 1, dtype=float)
    fit = fit_loss_curve(ks, curve.mean(ks))
    assert fit.family == family
    assert np.allclose(fit.predict(ks), curve.mean(ks), rtol=1e-3)
    prediction = fit.epochs_to_reach(1.0)
    assert prediction.epochs == pytest.approx(true_epochs, rel=0.02)
    assert prediction.low <= prediction.epochs <= prediction.high


def test_optimus_betas_are_recovered() -> None:
    ks = np.arange(1, 30, dtype=float)
    losses = 1.0 / (0.2 * ks + 0.5) + 0.3
    fit = fit_loss_curve(ks, losses, "inverse")
    assert fit.betas == pytest.approx((0.2, 0.5, 0.3), rel=1e-3)
    assert fit.epochs_to_reach(0.5).epochs == pytest.approx((1 / 0.2 - 0.5) / 0.2, rel=1e-3)


def test_noisy_curves_are_predicted_within_ten_percent_and_inside_the_interval() -> None:
    rng = np.random.default_rng(3)
    errors, covered = [], 0
    for seed in range(30):
        family = ["inverse", "exponential", "power"][seed % 3]
        curve = synthetic_curve(family, 1.0, float(rng.uniform(20, 40)), noise=0.005, seed=seed)
        ks = np.arange(1, int(0.6 * curve.epochs_to_target) + 1)
        fit = fit_loss_curve(ks, [curve.observed(int(k)) for k in ks])
        prediction = fit.epochs_to_reach(1.0)
        errors.append(abs(prediction.epochs - curve.epochs_to_target) / curve.epochs_to_target)
        covered += prediction.low <= curve.epochs_to_target <= prediction.high
    assert float(np.median(errors)) < 0.05
    assert float(np.mean(errors)) < 0.10
    assert covered >= 15


def test_a_loss_spike_does_not_move_the_prediction_much() -> None:
    curve = synthetic_curve("inverse", 1.0, 40.0)
    ks = np.arange(1, 25, dtype=float)
    losses = curve.mean(ks)
    losses[12] *= 1.5  # one bad epoch
    prediction = fit_loss_curve(ks, losses).epochs_to_reach(1.0)
    assert prediction.epochs == pytest.approx(40.0, rel=0.05)


def test_target_below_the_floor_is_refused_and_says_so() -> None:
    ks = np.arange(1, 20, dtype=float)
    fit = fit_loss_curve(ks, 1.0 / (0.2 * ks + 0.5) + 0.3, "inverse")
    with pytest.raises(UnreachableTargetError, match="floor") as caught:
        fit.epochs_to_reach(0.25)
    assert caught.value.floor == pytest.approx(0.3, rel=1e-3)
    assert isinstance(caught.value, FaasmlError)


def test_a_flat_or_rising_curve_never_reaches_a_lower_target() -> None:
    ks = np.arange(1, 15, dtype=float)
    with pytest.raises(UnreachableTargetError):
        fit_loss_curve(ks, 0.5 + 0.01 * ks).epochs_to_reach(0.4)


@pytest.mark.parametrize(
    ("epochs", "losses", "family", "message"),
    [
        ([1, 2], [1.0, 0.9], "auto", "points"),
        ([1, 2, 3], [1.0, 0.9], "auto", "pair up"),
        ([1, 2, 3], [1.0, -0.9, 0.5], "auto", "finite and >= 0"),
        ([1, 2, 3], [1.0, math.nan, 0.5], "auto", "finite and >= 0"),
        ([-1, 2, 3], [1.0, 0.9, 0.8], "auto", "epoch"),
        ([1, 2, 3], [1.0, 0.9, 0.8], "cubic", "family"),
    ],
)
def test_bad_input_names_the_rule(
    epochs: list[float], losses: list[float], family: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        fit_loss_curve(epochs, losses, family)


def test_every_family_is_fitted_by_name() -> None:
    ks = np.arange(1, 12, dtype=float)
    for family in FAMILIES:
        assert fit_loss_curve(ks, 2.0 / (ks + 1.0) + 0.1, family).family == family
