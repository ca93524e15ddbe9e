"""The curve families l(k) = a·g(k; θ) + c, their closed-form inverses, and the grid fit
of one family (variable projection: NNLS of (a, c) for every θ of a log grid at once)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

FAMILIES = ("inverse", "exponential", "power")
"""Curve families ``fit_loss_curve`` knows; ``auto`` chooses among them by fit quality."""


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
