from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from faasml.exceptions import ConfigError, FaasmlError, UnreachableTargetError
from faasml.models.convergence import FAMILIES, fit_loss_curve, predict_epochs
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


@settings(max_examples=15, deadline=None)
@given(
    family=st.sampled_from(["inverse", "exponential", "power"]),
    true_epochs=st.floats(10, 60),
    floor=st.floats(0.1, 0.8),
)
@example(family="inverse", true_epochs=10.0, floor=0.8)  # fitted as well by the power family
def test_the_averaged_prediction_recovers_a_noise_free_curve(
    family: str, true_epochs: float, floor: float
) -> None:
    curve = synthetic_curve(family, 1.0, true_epochs, floor_ratio=floor)
    ks = np.arange(0, max(6, int(0.5 * true_epochs)) + 1, dtype=float)
    averaged = predict_epochs(ks, curve.mean(ks), 1.0)
    # The true family fits as well as the best one: a short noise-free stretch can be fitted
    # almost exactly by two families (an inverse curve near its floor looks like a power law),
    # and then either may win; a family that does not fit leaves residuals 100 times larger.
    true_fit = next(fit for fit in averaged.fits if fit.family == family)
    assert true_fit.residual <= max(2 * averaged.best.residual, 1e-4)
    assert sum(averaged.weights) == pytest.approx(1.0)
    assert averaged.prediction.epochs == pytest.approx(true_epochs, rel=0.02)


def test_the_averaged_prediction_refuses_what_the_best_fit_never_reaches() -> None:
    ks = np.arange(1, 20, dtype=float)
    with pytest.raises(UnreachableTargetError, match="best-fitting"):
        predict_epochs(ks, 1.0 / (0.2 * ks + 0.5) + 0.3, 0.25)


def test_a_loss_spike_is_left_out_of_the_fit() -> None:
    curve = synthetic_curve("power", 1.0, 48.0, noise=0.002, seed=5)
    ks = np.arange(1, 13)
    losses = np.array([curve.observed(int(k)) for k in ks])
    clean = fit_loss_curve(ks, losses)
    losses[7] *= 1.12  # one bad epoch, 5–20 % up as the simulator's spikes
    spiked = fit_loss_curve(ks, losses)
    assert clean.points == 12
    assert spiked.points == 11
    assert spiked.epochs_to_reach(1.0).epochs == pytest.approx(
        clean.epochs_to_reach(1.0).epochs, rel=0.01
    )


def test_clean_noisy_points_are_rarely_rejected() -> None:
    lost = 0
    for seed in range(30):
        family = FAMILIES[seed % 3]
        curve = synthetic_curve(family, 1.0, 40.0, noise=0.005, seed=seed)
        curve = dataclasses.replace(curve, spike_probability=0.0)
        ks = np.arange(1, 21)
        lost += fit_loss_curve(ks, [curve.observed(int(k)) for k in ks]).points < ks.size
    assert lost <= 2


def test_a_prior_stands_alone_where_the_online_fit_refuses() -> None:
    ks = np.arange(1, 15, dtype=float)
    averaged = predict_epochs(ks, 0.5 + 0.01 * ks, 0.4, prior_epochs=40.0)
    assert averaged.prior_only
    assert averaged.prediction.epochs == pytest.approx(40.0)
    assert averaged.prediction.low == pytest.approx(40.0 * math.exp(-1.2816 * 0.5), rel=1e-3)
    assert averaged.prediction.high == pytest.approx(40.0 * math.exp(1.2816 * 0.5), rel=1e-3)


def test_a_well_determined_online_fit_outweighs_a_wrong_prior() -> None:
    curve = synthetic_curve("inverse", 1.0, 30.0)
    ks = np.arange(1, 16, dtype=float)
    averaged = predict_epochs(ks, curve.mean(ks), 1.0, prior_epochs=60.0)
    assert not averaged.prior_only
    assert averaged.prediction.epochs == pytest.approx(30.0, rel=0.02)


@settings(max_examples=20, deadline=None)
@given(
    family=st.sampled_from(["inverse", "exponential", "power"]),
    seed=st.integers(0, 10_000),
    prior=st.floats(5.0, 200.0),
    sigma=st.floats(0.05, 2.0),
)
def test_the_combined_prediction_lies_between_the_fit_and_the_prior(
    family: str, seed: int, prior: float, sigma: float
) -> None:
    curve = synthetic_curve(family, 1.0, 40.0, noise=0.01, seed=seed)
    ks = np.arange(1, 13)
    losses = [curve.observed(int(k)) for k in ks]
    try:
        online = predict_epochs(ks, losses, 1.0).prediction
    except UnreachableTargetError:
        return
    combined = predict_epochs(ks, losses, 1.0, prior_epochs=prior, prior_sigma=sigma)
    if combined.prior_only:
        assert not math.isfinite(online.high)
        assert combined.prediction.epochs == pytest.approx(prior)
        return
    low, high = sorted((online.epochs, prior))
    assert low * (1 - 1e-9) <= combined.prediction.epochs <= high * (1 + 1e-9)
    assert combined.prediction.low <= combined.prediction.epochs <= combined.prediction.high


@pytest.mark.parametrize(
    ("prior", "sigma", "message"),
    [
        (0.0, 0.5, "prior_epochs"),
        (math.inf, 0.5, "prior_epochs"),
        (10.0, 0.0, "prior_sigma"),
        (10.0, 9.0, "prior_sigma"),
    ],
)
def test_a_bad_prior_names_the_rule(prior: float, sigma: float, message: str) -> None:
    ks = np.arange(1, 10, dtype=float)
    with pytest.raises(ConfigError, match=message):
        predict_epochs(ks, 2.0 / (ks + 1.0) + 0.1, 0.5, prior_epochs=prior, prior_sigma=sigma)
