"""Scalability curves: samples/s of a job as a function of its node count.

- :class:`PiecewiseCurve`: linear interpolation between measured points (the jobs file's
  data; BFTrainer interpolates the same way), flat beyond the last point.
- :func:`linear_guess`: what a FreeTrain user who knows only the one-node rate must guess:
  linear scaling, S(n) = n · S(1), up to the job's max nodes.
- :func:`fit_curve`: the Job Profiling Advisor's fit of measured points: a monotone cubic
  (PCHIP) through them, and outside the measured counts Amdahl's law
  S(n) = S(1) · n / (1 + σ (n − 1)) fitted by least squares to the points (anchored at the
  nearest measured point).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.interpolate import PchipInterpolator

FloatArray = npt.NDArray[np.float64]


class Curve:
    """Samples/s at node counts (vectorised); 0 at 0 nodes."""

    def __call__(self, counts: npt.ArrayLike) -> FloatArray:
        raise NotImplementedError


@dataclass(frozen=True)
class PiecewiseCurve(Curve):
    """Linear interpolation between (nodes, samples/s) points."""

    nodes: tuple[float, ...]
    rates: tuple[float, ...]

    def __call__(self, counts: npt.ArrayLike) -> FloatArray:
        x = np.asarray(counts, dtype=np.float64)
        xs = np.asarray((0.0, *self.nodes)) if self.nodes[0] > 0 else np.asarray(self.nodes)
        ys = np.asarray((0.0, *self.rates)) if self.nodes[0] > 0 else np.asarray(self.rates)
        return np.where(x <= 0, 0.0, np.interp(x, xs, ys))


@dataclass(frozen=True)
class LinearCurve(Curve):
    """S(n) = per_node · n: linear scaling."""

    per_node: float

    def __call__(self, counts: npt.ArrayLike) -> FloatArray:
        return self.per_node * np.maximum(np.asarray(counts, dtype=np.float64), 0.0)


def linear_guess(nodes: Sequence[float], rates: Sequence[float]) -> LinearCurve:
    """FreeTrain's user guess: the measured one-node rate, scaled linearly."""
    curve = PiecewiseCurve(tuple(float(n) for n in nodes), tuple(float(r) for r in rates))
    return LinearCurve(float(curve(1.0)))


def amdahl_sigma(points: Mapping[int, float]) -> tuple[float, float]:
    """Least-squares (S(1), σ) of S(n) = S(1) · n / (1 + σ (n − 1)), σ in [0, 1].

    Linear in 1/S: n / S(n) = (1 − σ)/S(1) + σ n / S(1), solved by least squares."""
    ns = np.asarray(sorted(points), dtype=np.float64)
    ss = np.asarray([points[int(n)] for n in ns], dtype=np.float64)
    if len(ns) == 1:
        return float(ss[0] / ns[0]), 0.0
    y = ns / ss
    a = np.vstack([np.ones_like(ns), ns]).T
    (c0, c1), *_ = np.linalg.lstsq(a, y, rcond=None)
    s1 = 1.0 / max(c0 + c1, 1e-12)
    sigma = float(np.clip(c1 * s1, 0.0, 1.0))
    # Re-fit S(1) for the clipped σ: minimise Σ (s1·g(n) − s)² with g(n) = n / (1 + σ(n−1)).
    g = ns / (1.0 + sigma * (ns - 1.0))
    s1 = float(np.dot(g, ss) / np.dot(g, g))
    return s1, sigma


@dataclass(frozen=True)
class FittedCurve(Curve):
    """PCHIP through measured points; Amdahl outside them."""

    points: tuple[tuple[int, float], ...]
    s1: float
    sigma: float

    def _amdahl(self, x: FloatArray) -> FloatArray:
        return self.s1 * x / (1.0 + self.sigma * (x - 1.0))

    @functools.cached_property
    def _parts(self) -> tuple[FloatArray, FloatArray, PchipInterpolator | None, float, float]:
        """Built once per curve: the points, the interpolator, Amdahl at both ends."""
        ns = np.asarray([float(n) for n, _ in self.points])
        ss = np.asarray([s for _, s in self.points])
        pchip = PchipInterpolator(ns, ss) if len(ns) >= 2 else None
        amdahl_low = max(float(self._amdahl(np.array(ns[0]))), 1e-12)
        amdahl_top = max(float(self._amdahl(np.array(ns[-1]))), 1e-12)
        return ns, ss, pchip, amdahl_low, amdahl_top

    def __call__(self, counts: npt.ArrayLike) -> FloatArray:
        x = np.asarray(counts, dtype=np.float64)
        ns, ss, pchip, amdahl_low, amdahl_top = self._parts
        low, top = ns[0], ns[-1]
        inside = pchip(np.clip(x, low, top)) if pchip is not None else np.full_like(x, ss[0])
        # Outside the measured counts: Amdahl's shape, anchored at the nearest measured point.
        below = ss[0] * self._amdahl(np.maximum(x, 1e-9)) / amdahl_low
        beyond = ss[-1] * self._amdahl(np.maximum(x, top)) / amdahl_top
        out = np.where(x < low, below, np.where(x <= top, inside, beyond))
        return np.where(x <= 0, 0.0, out)

    def amdahl(self, counts: npt.ArrayLike) -> FloatArray:
        """The fitted Amdahl law alone (no interpolation)."""
        return self._amdahl(np.asarray(counts, dtype=np.float64))


def fit_curve(points: Mapping[int, float]) -> FittedCurve:
    """The JPA's curve through measured (nodes → samples/s) points; needs at least one."""
    if not points:
        raise ValueError("fit_curve needs at least one measured point")
    clean = {int(n): float(s) for n, s in points.items() if n > 0 and s > 0}
    if not clean:
        raise ValueError("fit_curve needs a point with positive nodes and samples/s")
    # Keep the fitted curve monotone: a measured dip (noise) is flattened to the running max.
    ordered = sorted(clean.items())
    best = 0.0
    monotone: list[tuple[int, float]] = []
    for n, s in ordered:
        best = max(best, s)
        monotone.append((n, best))
    s1, sigma = amdahl_sigma(dict(monotone))
    return FittedCurve(tuple(monotone), s1, sigma)
