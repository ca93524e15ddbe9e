"""Loss-curve fitting and epochs-to-target prediction (CE-scaling §II-C2 Finding 2, §III-D).

Every family is l(k) = a·g(k; θ) + c with a, c ≥ 0 and one shape parameter θ > 0:

- ``inverse`` (Optimus): l(k) = 1/(β₀k + β₁) + β₂. With ρ = β₁/β₀ it reads
  (1/β₀)·1/(k + ρ) + β₂, so a = 1/β₀, c = β₂, θ = ρ.
- ``exponential``: l(k) = a·exp(−θk) + c.
- ``power``: l(k) = a·(k + 1)^(−θ) + c.

Fitting is variable projection: for each θ on a log grid the linear part (a, c) is solved by
non-negative least squares in closed form, all grid points at once; the best θ is refined on
a finer grid. Loss spikes are first rejected by a leave-one-out F test (the externally
studentised residual of the worst point, Bonferroni-corrected), then the remaining points are
down-weighted by two rounds of Huber reweighting. ``family="auto"`` fits every family and keeps
the one with the smallest weighted residual (the inverse family wins ties: Optimus' curve is
the default). ``predict_epochs`` averages the families and can take the offline estimate as a
log-normal prior (Algorithm 2 line 3's e₀), combined with the online prediction in log space.

The uncertainty of a prediction comes from the Gauss–Newton covariance of (θ, a, c): 256
parameter draws (fixed seed, so the same data give the same interval) are pushed through the
closed-form inverse of the curve and the 10th and 90th percentiles reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml.exceptions import ConfigError, UnreachableTargetError

Array = NDArray[np.float64]

FAMILIES = ("inverse", "exponential", "power")
"""Curve families ``fit_loss_curve`` knows; ``auto`` chooses among them by fit quality."""

MIN_POINTS = 3
"""Three parameters need at least three (epoch, loss) points."""

_GRIDS: dict[str, tuple[float, float]] = {
    "inverse": (1e-3, 1e4),
    "exponential": (1e-4, 5.0),
    "power": (1e-3, 8.0),
}
_COARSE = 64
_FINE = 32
_STEP = float((1e4 / 1e-3) ** (1 / (_COARSE - 1)))
"""Ratio between neighbouring coarse grid points (of the widest grid)."""
_COARSE_GRIDS = {name: np.geomspace(lo, hi, _COARSE) for name, (lo, hi) in _GRIDS.items()}
_UNIT = np.linspace(0.0, 1.0, _FINE)
_DRAWS = 256
_HUBER_K = 1.5
_HUBER_ROUNDS = 2
_POLISH = (8.0, 64.0)
_REACH_SHARE = 0.1
"""``predict_epochs`` refuses when families that reach the target hold less than this share
of the Akaike weight: a good fit with its floor above the target outweighs poor ones below."""
_OUTLIER_ROUNDS = 2
_OUTLIER_MIN_POINTS = 6
_EXACT = 1e-9
"""Relative residual below which a fit counts as exact (no outlier test)."""
_OUTLIER_LEVEL = 0.001
"""Significance level of the outlier test over all points (a clean point is rarely lost)."""
DEFAULT_PRIOR_SIGMA = 0.5
"""Log-space standard deviation of an offline estimate used as a prior: CE-scaling Fig. 4a
reports offline sampling errors up to 40 %; 0.5 (a factor 1.65) is wider than that on purpose."""
_Z80 = 1.2815515655446004
"""Standard normal quantile of 0.9: an 80 % interval spans ±1.28 σ."""
_MIN_LOG_SIGMA = 1e-3
_MAX_PRIOR_SIGMA = 5.0
"""A log-space σ of 5 is a factor of 150: wider says nothing."""
_AUTO_MARGIN = 0.97
"""Another family replaces ``inverse`` only when its residual is at least 3 % smaller."""


def _basis(family: str, epochs: Array, theta: Array) -> Array:
    """g(k; θ) for every θ (rows) and epoch (columns)."""
    k = epochs[None, :]
    t = theta[:, None]
    if family == "inverse":
        return 1.0 / (k + t)
    if family == "exponential":
        return np.exp(-t * k)
    return (k + 1.0) ** (-t)


def _basis_dtheta(family: str, epochs: Array, theta: float) -> Array:
    """∂g/∂θ at one θ, for the Gauss–Newton covariance."""
    k = epochs
    if family == "inverse":
        return -1.0 / (k + theta) ** 2
    if family == "exponential":
        return -k * np.exp(-theta * k)
    return -np.log(k + 1.0) * (k + 1.0) ** (-theta)


def _inverse(family: str, theta: Array, level: Array) -> Array:
    """k with g(k; θ) = level (level in (0, g(0)]), the closed form of each family."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if family == "inverse":
            return 1.0 / level - theta
        if family == "exponential":
            return -np.log(level) / theta
        return level ** (-1.0 / theta) - 1.0


def _nnls_two(g: Array, y: Array, w: Array) -> tuple[Array, Array, Array]:
    """Weighted NNLS of y ≈ a·g + c with a, c ≥ 0 for every row of g at once.

    The unconstrained solution is taken where both are non-negative; otherwise the best of the
    two one-variable solutions (a = 0 or c = 0), which is the exact NNLS optimum for two columns.
    Residuals come from the weighted sums (no second pass over the points).
    """
    wg = w * g
    sw = float(w.sum())
    gw = wg.sum(axis=1)
    ggw = (wg * g).sum(axis=1)
    yw = float((w * y).sum())
    yyw = float((w * y * y).sum())
    gyw = wg @ y
    det = ggw * sw - gw * gw
    with np.errstate(divide="ignore", invalid="ignore"):
        a_free = (gyw * sw - gw * yw) / det
        c_free = (ggw * yw - gw * gyw) / det
        a_only = np.where(ggw > 0, np.maximum(gyw / ggw, 0.0), 0.0)
    c_only = max(yw / sw, 0.0)
    free_ok = np.isfinite(a_free) & (a_free >= 0) & (c_free >= 0)
    a_free = np.where(free_ok, a_free, 0.0)
    c_free = np.where(free_ok, c_free, 0.0)

    def sse(a: Array, c: Array | float) -> Array:
        # Σw(y − a·g − c)² expanded into the sums above.
        result: Array = yyw - 2 * a * gyw - 2 * c * yw + a * a * ggw + 2 * a * c * gw + c * c * sw
        return np.maximum(result, 0.0)

    errors = np.stack(
        [
            np.where(free_ok, sse(a_free, c_free), np.inf),
            sse(a_only, 0.0),
            np.broadcast_to(sse(np.zeros(1), c_only), gw.shape),
        ]
    )
    pick = np.argmin(errors, axis=0)
    cand_a = np.where(pick == 0, a_free, np.where(pick == 1, a_only, 0.0))
    cand_c = np.where(pick == 0, c_free, np.where(pick == 2, c_only, 0.0))
    return cand_a, cand_c, np.take_along_axis(errors, pick[None, :], axis=0)[0]


def _fit_family(
    family: str,
    k: Array,
    y: Array,
    w: Array,
    around: float | None = None,
    width: float = 0.0,
) -> tuple[float, float, float, float]:
    """Best (θ, a, c) and weighted SSE of one family: a coarse grid over log θ (or none when
    refining ``around`` a previous θ), then a fine grid around the best."""
    if around is None:
        grid = _COARSE_GRIDS[family]
        a, c, err = _nnls_two(_basis(family, k, grid), y, w)
        best = int(np.argmin(err))
        lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
        fallback = (float(grid[best]), float(a[best]), float(c[best]), float(err[best]))
    else:
        step = width or _STEP
        lo, hi = around / step, around * step
        fallback = None
    fine = lo * (hi / lo) ** _UNIT
    fa, fc, ferr = _nnls_two(_basis(family, k, fine), y, w)
    pick = int(np.argmin(ferr))
    if fallback is not None and fallback[3] < ferr[pick]:
        return fallback
    return float(fine[pick]), float(fa[pick]), float(fc[pick]), float(ferr[pick])


def _f_critical(dof: int, tested: int) -> float:
    """Critical value of F(1, dof) at ``_OUTLIER_LEVEL`` / ``tested``: the largest of
    ``tested`` residuals is tested, so the level is Bonferroni-corrected."""
    # Imported here: scipy.stats takes a second to import, and the CLI's parsers reach this
    # module without needing it.
    from scipy import stats as scipy_stats

    return float(scipy_stats.f.isf(_OUTLIER_LEVEL / tested, 1, dof))


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


_Fit = tuple[float, float, float, float]
"""(θ, a, c, weighted SSE) of one family's fit, as ``_fit_family`` returns it."""


def _outlier_mask(k: Array, y: Array) -> tuple[Array, dict[str, _Fit]]:
    """Weights 1 for kept points and 0 for rejected outliers (loss spikes), and every
    family's least-squares fit to the kept points (where the robust fits start).

    Huber reweighting bounds a spike's pull but does not remove it, and with a few points a
    5–20 % spike moves a three-parameter extrapolation a lot. So, up to ``_OUTLIER_ROUNDS``
    times, the point with the largest residual of the best family's fit is left out and every
    family refitted; the point is rejected when leaving it out lowers the least residual sum
    of squares (over the families) by more than an F(1, m − 4) test at level
    ``_OUTLIER_LEVEL`` / m allows (m points kept: the externally studentised residual test,
    Bonferroni-corrected because the largest of m residuals is the one tested). Tested only
    with at least ``_OUTLIER_MIN_POINTS`` + 1 points kept, so three parameters are never
    fitted to a handful, and never when the best fit is exact.
    """
    keep = np.ones_like(y)
    starts = {name: _fit_family(name, k, y, keep) for name in FAMILIES}
    for _ in range(_OUTLIER_ROUNDS):
        m = int(keep.sum())
        if m - 1 < _OUTLIER_MIN_POINTS:
            break
        residuals = {name: _residual(name, k, y, fit) for name, fit in starts.items()}
        sse = {name: float((keep * r * r).sum()) for name, r in residuals.items()}
        best = min(sse, key=lambda name: sse[name])
        full = sse[best]
        if full <= m * (_EXACT * float(np.mean(y))) ** 2:
            break  # the curve fits to rounding error: nothing to reject
        trial = keep.copy()
        trial[int(np.argmax(np.where(keep > 0, np.abs(residuals[best]), -1.0)))] = 0.0
        refits = {name: _fit_family(name, k, y, trial) for name in FAMILIES}
        reduced = min(
            float((trial * _residual(name, k, y, fit) ** 2).sum()) for name, fit in refits.items()
        )
        dof = m - 1 - 3
        if reduced > 0.0 and (full - reduced) / (reduced / dof) <= _f_critical(dof, m):
            break
        keep, starts = trial, refits
    return keep, starts


def _residual(family: str, k: Array, y: Array, fit: _Fit) -> Array:
    theta, a, c, _ = fit
    residual: Array = y - (a * _basis(family, k, np.array([theta]))[0] + c)
    return residual


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
