"""What the exact tuning planner proves with: each stage's F and G, Pareto fronts, lower
convex hulls, the LP relaxation and the incumbent rounded from it, and the certificate
(:class:`ExactSolution`). See :mod:`faasml.planners.tuning._exact`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faasml.planners.tuning._problem import TuningProblem
from faasml.types import Objective

Array = NDArray[np.float64]
_SLACK = 1e-12
"""Relative tolerance of the optimality bound: prune only what is worse by more than this."""
_LIMIT_SLACK = 1e-12
"""Relative tolerance on the bounds, for sums rounded in another order."""


def _roles(problem: TuningProblem) -> tuple[list[Array], list[Array], float, float]:
    """Per-stage F (minimised) and G (limited) values, G's limit and F's own bound."""
    c = problem.constraint
    budget = np.inf if c.budget_usd is None else c.budget_usd
    deadline = np.inf if c.deadline_s is None else c.deadline_s
    if c.goal is Objective.MIN_TIME:
        return (
            [s.time_s for s in problem.stages],
            [s.cost_usd for s in problem.stages],
            budget,
            deadline,
        )
    return (
        [s.cost_usd for s in problem.stages],
        [s.time_s for s in problem.stages],
        deadline,
        budget,
    )


def _front(f: Array, g: Array) -> NDArray[np.int64]:
    """Indices of points not dominated in (f, g), by increasing f: one single-key sort (much
    faster than a two-key one); of points with equal f a dominated one may stay, which costs a
    state but never loses the optimum."""
    order = np.argsort(f, kind="quicksort")
    sorted_g = g[order]
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], sorted_g[:-1])))
    return order[sorted_g < best_before].astype(np.int64)


def _hull(g: Array, f: Array) -> NDArray[np.int64]:
    """Indices of the lower convex hull of points sorted by g ascending (f descending).

    Vectorised: every pass drops each point on or above the chord of its neighbours (such a
    point is no vertex of the hull, so dropping them all at once leaves the hull unchanged),
    until none is left to drop.
    """
    rows = np.arange(len(g), dtype=np.int64)
    while rows.size >= 3:
        x, y = g[rows], f[rows]
        above = (y[1:-1] - y[:-2]) * (x[2:] - x[:-2]) >= (y[2:] - y[:-2]) * (x[1:-1] - x[:-2])
        if not above.any():
            break
        rows = rows[np.concatenate(([True], ~above, [True]))]
    return rows


class _Relaxation:
    """L(b) = min Σ F s.t. Σ G ≤ b over a set of stages with fractional choices (LP bound):
    from every stage's cheapest option, take hull segments in order of slope."""

    def __init__(self, g0: float, g: Array, f: Array) -> None:
        self.g0, self.g, self.f = g0, g, f

    def __call__(self, budget: Array) -> Array:
        value = np.interp(budget, self.g, self.f, right=self.f[-1])
        result: Array = np.where(budget < self.g0 * (1 - _SLACK), np.inf, value)
        return result


class _Segments:
    """Every stage's hull segments sorted once by slope; the LP bound of any set of stages
    is then a masked cumulative sum."""

    def __init__(
        self,
        hulls: list[tuple[Array, Array]],
        hull_rows: list[NDArray[np.int64]] | None = None,
    ) -> None:
        self.g_start = np.array([g[0] for g, _ in hulls])
        self.f_start = np.array([f[0] for _, f in hulls])
        stage = np.concatenate([np.full(len(g) - 1, i) for i, (g, _) in enumerate(hulls)])
        dg = np.concatenate([np.diff(g) for g, _ in hulls])
        df = np.concatenate([np.diff(f) for _, f in hulls])
        order = np.argsort(df / np.where(dg > 0, dg, 1.0), kind="stable")
        self.stage, self.dg, self.df = stage[order], dg[order], df[order]
        ends = (
            np.concatenate([rows[1:] for rows in hull_rows])
            if hull_rows is not None
            else np.zeros(len(stage), dtype=np.int64)
        )
        self.end = ends[order]
        """The option (index into the stage's options) each segment leads to."""

    def relaxation(self, include: NDArray[np.bool_]) -> _Relaxation:
        mask = include[self.stage]
        g0 = float(self.g_start[include].sum())
        f0 = float(self.f_start[include].sum())
        g = g0 + np.concatenate(([0.0], np.cumsum(self.dg[mask])))
        f = f0 + np.concatenate(([0.0], np.cumsum(self.df[mask])))
        return _Relaxation(g0, g, f)


@dataclass(frozen=True)
class ExactSolution:
    """The exact planner's answer with its certificate: F of the plan and a proven lower
    bound on F over every plan (equal when the plan is proven optimal)."""

    options: tuple[int, ...]
    """Option index per stage (into each stage's options)."""
    value: float
    lower_bound: float
    proven_optimal: bool
    method: str
    """'dynamic programme', 'dynamic programme, merged states' or 'HiGHS MILP'."""

    @property
    def gap(self) -> float:
        """(F − lower bound) / F: how far from optimal the plan may be, at most."""
        return max(0.0, (self.value - self.lower_bound) / self.value) if self.value > 0 else 0.0


def _improved(
    fs: list[Array],
    gs: list[Array],
    g_limit: float,
    f_limit: float,
    start: tuple[float, tuple[int, ...]] | None,
) -> tuple[float, tuple[int, ...]] | None:
    """Local search from a feasible plan: take the single-stage change that lowers F most
    while G stays within its limit, until none does (a tighter incumbent prunes more)."""
    if start is None:
        return None
    width = max(len(f) for f in fs)
    f_pad = np.full((len(fs), width), np.inf)
    g_pad = np.full((len(fs), width), np.inf)
    for i, (f, g) in enumerate(zip(fs, gs, strict=True)):
        f_pad[i, : len(f)] = f
        g_pad[i, : len(g)] = g
    rows = np.arange(len(fs))
    choice = np.array(start[1], dtype=np.int64)
    for _ in range(4 * len(fs) * width):
        spent = float(g_pad[rows, choice].sum())
        gain = f_pad[rows, choice][:, None] - f_pad
        ok = (spent - g_pad[rows, choice][:, None] + g_pad <= g_limit) & (gain > 0)
        if not ok.any():
            break
        flat = int(np.argmax(np.where(ok, gain, -np.inf)))
        choice[flat // width] = flat % width
    value = float(f_pad[rows, choice].sum())
    return (value, tuple(int(j) for j in choice)) if value <= f_limit else start


def _rounded_lp(
    fs: list[Array],
    gs: list[Array],
    g_limit: float,
    f_limit: float,
    hull_rows: list[NDArray[np.int64]],
) -> tuple[float, tuple[int, ...]] | None:
    """A feasible plan near the LP optimum, or None: from each stage's cheapest-in-G option,
    the hull segments in order of slope while they fit whole (the LP solution rounded down)."""
    spent = sum(float(g[0]) for g in gs)
    if spent > g_limit:
        return None
    hulls = [(g[h], f[h]) for f, g, h in zip(fs, gs, hull_rows, strict=True)]
    segments = _Segments(hulls, hull_rows)
    taken = np.flatnonzero(np.cumsum(segments.dg) <= g_limit - spent)
    choice = np.zeros(len(fs), dtype=np.int64)
    if taken.size:
        prefix = slice(0, int(taken[-1]) + 1)
        # Within a stage segments come in slope order, so the last one taken is the option.
        np.maximum.at(choice, segments.stage[prefix], segments.end[prefix])
    value = sum(float(f[j]) for f, j in zip(fs, choice, strict=True))
    return (value, tuple(int(j) for j in choice)) if value <= f_limit else None
