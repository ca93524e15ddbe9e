"""Loss spikes rejected before fitting: a leave-one-out F test on the worst residual,
Bonferroni-corrected (see :func:`_outlier_mask`)."""

from __future__ import annotations

import numpy as np

from faasml.models.convergence.families import FAMILIES, Array, _basis, _fit_family

_OUTLIER_ROUNDS = 2
_OUTLIER_MIN_POINTS = 6
_EXACT = 1e-9
"""Relative residual below which a fit counts as exact (no outlier test)."""
_OUTLIER_LEVEL = 0.001
"""Significance level of the outlier test over all points (a clean point is rarely lost)."""


def _f_critical(dof: int, tested: int) -> float:
    """Critical value of F(1, dof) at ``_OUTLIER_LEVEL`` / ``tested``: the largest of
    ``tested`` residuals is tested, so the level is Bonferroni-corrected."""
    # Imported here: scipy.stats takes a second to import, and the CLI's parsers reach this
    # module without needing it.
    from scipy import stats as scipy_stats

    return float(scipy_stats.f.isf(_OUTLIER_LEVEL / tested, 1, dof))


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
