"""A fitted loss curve (:class:`LossFit`) and its epochs to a target with an 80 % interval;
:func:`fit_loss_curve`, the robust fit of one family or the best of all."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.models.convergence.families import (
    _GRIDS,
    _STEP,
    FAMILIES,
    Array,
    _basis,
    _basis_dtheta,
    _fit_family,
    _inverse,
)
from faasml.models.convergence.outliers import _Fit, _outlier_mask

MIN_POINTS = 3
"""Three parameters need at least three (epoch, loss) points."""

_DRAWS = 256
_HUBER_K = 1.5
_HUBER_ROUNDS = 2
_POLISH = (8.0, 64.0)
_AUTO_MARGIN = 0.97
"""Another family replaces ``inverse`` only when its residual is at least 3 % smaller."""


def whole_epochs(epochs: float) -> int:
    """⌈epochs⌉ (at least 1), ignoring a thousandth of an epoch of fitting noise."""
    return max(1, math.ceil(epochs - 1e-3))


@dataclass(frozen=True)
class EpochPrediction:
    """Epochs (counted from 0, fractional) at which the fitted curve reaches a target loss.

    ``low`` and ``high`` bound an 80 % interval from the fit's parameter uncertainty;
    ``high`` is ``math.inf`` when plausible curves never reach the target.
    """

    epochs: float
    low: float
    high: float

    @property
    def whole(self) -> int:
        """Whole epochs to train: ⌈epochs⌉, at least 1."""
        return whole_epochs(self.epochs)


@dataclass(frozen=True)
class LossFit:
    """A fitted loss curve l(k) = a·g(k; θ) + c of one family (see the module docstring)."""

    family: str
    theta: float
    """Shape parameter: ρ = β₁/β₀ (inverse), the decay rate (exponential), the exponent (power)."""
    scale: float
    """a ≥ 0: 1/β₀ for the inverse family."""
    floor: float
    """c ≥ 0: the loss the curve tends to (β₂ for the inverse family)."""
    residual: float
    """Root of the weighted mean squared residual, in loss units."""
    points: int
    """Points the fit used: loss spikes rejected as outliers are not counted."""
    covariance: tuple[tuple[float, ...], ...]
    """Gauss–Newton covariance of (θ, a, c); zeros when it could not be estimated."""

    @property
    def betas(self) -> tuple[float, float, float]:
        """(β₀, β₁, β₂) of Optimus' l(k) = 1/(β₀k + β₁) + β₂ (inverse family only)."""
        if self.family != "inverse":
            raise ConfigError(f"betas are defined for the inverse family, not {self.family}")
        if self.scale <= 0:
            return (math.inf, math.inf, self.floor)
        return (1.0 / self.scale, self.theta / self.scale, self.floor)

    def predict(self, epoch: ArrayLike) -> Array:
        """l(k) at the given epochs."""
        k = np.atleast_1d(np.asarray(epoch, dtype=float))
        values = self.scale * _basis(self.family, k, np.array([self.theta]))[0] + self.floor
        return values.reshape(np.shape(epoch)) if np.ndim(epoch) else values

    def epochs_to_reach(self, target: float) -> EpochPrediction:
        """Epochs until l(k) = target, with an 80 % interval.

        Raises UnreachableTargetError when the target is at or below the fitted floor (the curve
        never gets there) — the message says so and names the floor.
        """
        if not math.isfinite(target):
            raise ConfigError(f"the value of the target loss is {target}, but must be finite")
        if target <= self.floor or self.scale <= 0:
            raise UnreachableTargetError(
                f"the target loss {target:g} is at or below the fitted floor {self.floor:.4g} of "
                f"the {self.family} curve; it is not predicted to be reached",
                floor=self.floor,
            )
        point = float(self._solve(np.array([[self.theta, self.scale, self.floor]]), target)[0])
        solved = self._solve(self._draws(), target)
        low = float(np.quantile(solved, 0.1, method="lower"))
        high = float(np.quantile(solved, 0.9, method="higher"))
        return EpochPrediction(point, min(low, point), max(high, point))

    def _draws(self) -> Array:
        mean = np.array([self.theta, self.scale, self.floor])
        cov = np.array(self.covariance, dtype=float)
        if not np.all(np.isfinite(cov)) or not cov.any():
            return mean[None, :]
        rng = np.random.default_rng(20230515)
        try:
            draws = rng.multivariate_normal(
                mean, cov, size=_DRAWS, method="eigh", check_valid="ignore"
            )
        except (np.linalg.LinAlgError, ValueError):
            return mean[None, :]
        draws[:, 0] = np.maximum(draws[:, 0], _GRIDS[self.family][0])
        draws[:, 1:] = np.maximum(draws[:, 1:], 0.0)
        return draws

    def _solve(self, params: Array, target: float) -> Array:
        """Epoch at which each parameter row reaches the target (inf when it never does)."""
        rows = np.atleast_2d(params)
        theta, a, c = rows[:, 0], rows[:, 1], rows[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            level = (target - c) / a
        k = _inverse(self.family, theta, level)
        k = np.where((level > 0) & np.isfinite(k), np.maximum(k, 0.0), np.inf)
        return np.asarray(k, dtype=float)


def _huber_weights(kept: Array, residual: Array) -> Array:
    """Huber weights of every residual, the scale from the MAD of the ``kept`` ones."""
    scale = 1.4826 * float(np.median(np.abs(kept - np.median(kept))))
    if scale <= 0 or not math.isfinite(scale):
        return np.ones_like(residual)
    r = np.abs(residual) / (_HUBER_K * scale)
    return np.where(r <= 1.0, 1.0, 1.0 / np.maximum(r, 1e-12))


def _covariance(family: str, k: Array, w: Array, theta: float, a: float, sse: float) -> Array:
    n = k.size
    if n <= 3:
        return np.zeros((3, 3))
    jac = np.column_stack(
        [a * _basis_dtheta(family, k, theta), _basis(family, k, np.array([theta]))[0], np.ones(n)]
    )
    jtj = (jac * w[:, None]).T @ jac
    sigma2 = sse / max(float(w.sum()) - 3.0, 1.0)
    try:
        cov = np.linalg.pinv(jtj) * sigma2
    except np.linalg.LinAlgError:  # pragma: no cover - pinv rarely fails
        return np.zeros((3, 3))
    return np.asarray(cov, dtype=float)


def fit_loss_curve(
    epochs: Sequence[float] | ArrayLike,
    losses: Sequence[float] | ArrayLike,
    family: str = "auto",
) -> LossFit:
    """Fit l(k) of ``family`` (or the best of every family for ``"auto"``) to (epoch, loss)
    points by robust non-negative least squares (Optimus' curve: CE-scaling §III-D, Alg. 2
    line 8), loss spikes rejected first. Epochs must be ≥ 0 and losses finite and ≥ 0; at
    least three points."""
    fits = _fit_families(epochs, losses, family)
    best = fits[0]
    for fit in fits[1:]:
        if fit.residual < best.residual * (_AUTO_MARGIN if best.family == "inverse" else 1.0):
            best = fit
    return best


def _fit_families(
    epochs: Sequence[float] | ArrayLike, losses: Sequence[float] | ArrayLike, family: str
) -> tuple[LossFit, ...]:
    """Validate the points, reject outliers once, fit ``family`` (every family for auto)."""
    k = np.asarray(epochs, dtype=float).ravel()
    y = np.asarray(losses, dtype=float).ravel()
    if k.shape != y.shape:
        raise ConfigError(f"got {k.size} epochs but {y.size} losses; they must pair up")
    if k.size < MIN_POINTS:
        raise ConfigError(
            f"the number of (epoch, loss) points is {k.size}, but must be >= {MIN_POINTS}"
        )
    if not np.all(np.isfinite(k)) or np.any(k < 0):
        raise ConfigError("every epoch must be a finite number >= 0")
    if not np.all(np.isfinite(y)) or np.any(y < 0):
        bad = y[~(np.isfinite(y) & (y >= 0))][0]
        raise ConfigError(f"a loss is {bad}, but every loss must be finite and >= 0")
    if family != "auto" and family not in FAMILIES:
        raise ConfigError(
            f"the value of family is {family!r}, but must be one of: auto, {', '.join(FAMILIES)}"
        )
    chosen = FAMILIES if family == "auto" else (family,)
    keep, starts = _outlier_mask(k, y)
    return tuple(_fit_robust(name, k, y, keep, starts[name]) for name in chosen)


def _fit_robust(family: str, k: Array, y: Array, keep: Array, start: _Fit) -> LossFit:
    """Huber-reweighted fit of one family to the kept points, from its least-squares fit."""
    w = keep.copy()
    mask = keep
    theta, a, c, sse = start
    for _ in range(_HUBER_ROUNDS):
        residual = y - (a * _basis(family, k, np.array([theta]))[0] + c)
        w = mask * _huber_weights(residual[mask > 0], residual)
        theta, a, c, sse = _fit_family(family, k, y, w, around=theta)
    for shrink in _POLISH:  # polish θ on ever finer grids
        theta, a, c, sse = _fit_family(family, k, y, w, theta, _STEP ** (1.0 / shrink))
    residual = y - (a * _basis(family, k, np.array([theta]))[0] + c)
    sse = float((w * residual * residual).sum())  # exactly, not from the expanded sums
    cov = _covariance(family, k, w, theta, a, sse)
    return LossFit(
        family=family,
        theta=theta,
        scale=a,
        floor=c,
        residual=math.sqrt(sse / float(w.sum())),
        points=int(np.count_nonzero(mask)),
        covariance=tuple(tuple(float(v) for v in row) for row in cov),
    )
