"""Epochs to a target averaged over the curve families (Akaike weights), optionally
combined with an offline estimate as a log-normal prior."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.models.convergence.fit import EpochPrediction, LossFit, _fit_families

_REACH_SHARE = 0.1
"""``predict_epochs`` refuses when families that reach the target hold less than this share
of the Akaike weight: a good fit with its floor above the target outweighs poor ones below."""
DEFAULT_PRIOR_SIGMA = 0.5
"""Log-space standard deviation of an offline estimate used as a prior: CE-scaling Fig. 4a
reports offline sampling errors up to 40 %; 0.5 (a factor 1.65) is wider than that on purpose."""
_Z80 = 1.2815515655446004
"""Standard normal quantile of 0.9: an 80 % interval spans ±1.28 σ."""
_MIN_LOG_SIGMA = 1e-3
_MAX_PRIOR_SIGMA = 5.0
"""A log-space σ of 5 is a factor of 150: wider says nothing."""


@dataclass(frozen=True)
class AveragedPrediction:
    """An epochs-to-target prediction averaged over curve families, and the fits behind it."""

    prediction: EpochPrediction
    fits: tuple[LossFit, ...]
    weights: tuple[float, ...]
    """Akaike weight of each fit (0 for a family that never reaches the target)."""
    prior_only: bool = False
    """True when the online fit said nothing usable and the prediction is the prior's."""

    @property
    def best(self) -> LossFit:
        """The fit with the largest weight."""
        return self.fits[int(np.argmax(self.weights))]


def predict_epochs(
    epochs: Sequence[float] | ArrayLike,
    losses: Sequence[float] | ArrayLike,
    target: float,
    family: str = "auto",
    *,
    prior_epochs: float | None = None,
    prior_sigma: float = DEFAULT_PRIOR_SIGMA,
) -> AveragedPrediction:
    """Epochs to reach ``target``: with ``family="auto"`` the Akaike-weighted geometric mean of
    the predictions of every family that reaches the target (equal parameter counts, so the
    weights are exp(−n/2 · (ln SSE_f − ln SSE_min))). Averaging in log space keeps one family's
    far extrapolation from dominating; dropping families whose floor is above the target keeps
    one pessimistic family from vetoing the others. The interval averages the families' bounds
    the same way (infinite when a family with weight above 1 % has no upper bound). Raises
    UnreachableTargetError when no family reaches the target.

    With ``prior_epochs`` (the offline estimate e₀ of Algorithm 2 line 3) the prediction is the
    Bayesian combination of the two in log space: the prior is log-normal around e₀ with
    standard deviation ``prior_sigma``, the online prediction log-normal with the standard
    deviation its 80 % interval implies, and the result their precision-weighted mean. The
    prior says the target is reached, so the online part averages the families that reach it
    whatever weight the others hold (without a prior it refuses below 10 %); an interval
    without an upper bound is taken as wide as its lower half. Where no family reaches the
    target the prior alone is returned (``AveragedPrediction.prior_only``).
    """
    if prior_epochs is None:
        return _online_prediction(epochs, losses, target, family)
    if not (math.isfinite(prior_epochs) and prior_epochs > 0):
        raise ConfigError(f"the value of prior_epochs is {prior_epochs}, but must be > 0")
    if not (math.isfinite(prior_sigma) and 0 < prior_sigma <= _MAX_PRIOR_SIGMA):
        raise ConfigError(
            f"the value of prior_sigma is {prior_sigma}, but must be in (0, {_MAX_PRIOR_SIGMA:g}]"
        )
    try:
        online = _online_prediction(epochs, losses, target, family, reach_share=0.0)
    except UnreachableTargetError:
        online = None
    spread = _Z80 * prior_sigma
    prior = EpochPrediction(
        prior_epochs, prior_epochs * math.exp(-spread), prior_epochs * math.exp(spread)
    )
    if online is None:
        fits = _fit_families(epochs, losses, family)
        return AveragedPrediction(prior, fits, tuple(0.0 for _ in fits), prior_only=True)
    got = online.prediction
    point, low = max(got.epochs, 1e-9), max(got.low, 1e-9)
    if math.isfinite(got.high):
        sigma = (math.log(max(got.high, 1e-9)) - math.log(low)) / (2 * _Z80)
    else:  # no upper bound: the lower half of the interval says how wide it is
        sigma = (math.log(point) - math.log(low)) / _Z80
    sigma = max(sigma, _MIN_LOG_SIGMA)
    w_on, w_prior = sigma**-2, prior_sigma**-2
    mean = (w_on * math.log(point) + w_prior * math.log(prior_epochs)) / (w_on + w_prior)
    half = _Z80 / math.sqrt(w_on + w_prior)
    point = math.exp(mean)
    combined = EpochPrediction(point, point * math.exp(-half), point * math.exp(half))
    return AveragedPrediction(combined, online.fits, online.weights)


def _online_prediction(
    epochs: Sequence[float] | ArrayLike,
    losses: Sequence[float] | ArrayLike,
    target: float,
    family: str,
    *,
    reach_share: float = _REACH_SHARE,
) -> AveragedPrediction:
    """``predict_epochs`` from the online fit alone (see there); refuses when the families
    that reach the target hold less than ``reach_share`` of the weight (or none reaches)."""
    fits = _fit_families(epochs, losses, family)
    n = fits[0].points
    sse = np.array([max(f.residual**2, 1e-300) for f in fits])
    raw = np.exp(-0.5 * n * (np.log(sse) - np.log(sse.min())))
    predictions: list[EpochPrediction | None] = []
    refusal: UnreachableTargetError | None = None
    for fit in fits:
        try:
            predictions.append(fit.epochs_to_reach(target))
        except UnreachableTargetError as err:
            predictions.append(None)
            refusal = refusal or err
    reach = np.array([p is not None for p in predictions])
    if not reach.any() or raw[reach].sum() < reach_share * raw.sum():
        best = fits[int(np.argmax(raw))]
        raise UnreachableTargetError(
            f"the target loss {target:g} is at or below the fitted floor {best.floor:.4g} of the "
            f"best-fitting curve ({best.family}); it is not predicted to be reached",
            floor=best.floor,
        )
    weights = np.where(reach, raw, 0.0)
    weights = weights / weights.sum()

    def mean_log(values: list[float]) -> float:
        logs = np.log(np.maximum(np.array(values), 1e-9))
        return float(np.exp(np.sum(weights[reach] * logs)))

    chosen = [p for p in predictions if p is not None]
    point = mean_log([p.epochs for p in chosen])
    low = mean_log([p.low for p in chosen])
    highs = [p.high for p in chosen]
    unbounded = any(
        not math.isfinite(h) and w > 0.01 for h, w in zip(highs, weights[reach], strict=True)
    )
    high = math.inf if unbounded else mean_log([h if math.isfinite(h) else point for h in highs])
    return AveragedPrediction(
        prediction=EpochPrediction(point, min(low, point), max(high, point)),
        fits=fits,
        weights=tuple(float(w) for w in weights),
    )
