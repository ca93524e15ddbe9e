"""The exact tuning planner: the multiple-choice knapsack of CE-scaling eqs. 7–9 / 11.

Choose one option per stage (x_i(θ) of eq. 6) minimising F = Σ F_i (time, eq. 7; or cost,
eq. 11) subject to G = Σ G_i ≤ limit (budget, eq. 8; or deadline, eq. 9) and, when both bounds
are given, F ≤ its own bound. Solved exactly by a dynamic programme over stages whose states
are the Pareto-optimal partial sums (F, G) — a dominated partial plan can never complete into
a better plan — pruned by two valid bounds:

* feasibility: G + Σ_rest min G_j ≤ limit and F + Σ_rest min F_j ≤ F's bound;
* optimality: F + L_rest(limit − G) > incumbent, where L_rest is the LP relaxation of the
  remaining stages (the merged lower convex hulls of their options, a lower bound on any
  integral completion) and the incumbent is the LP solution rounded down to a feasible plan.

Nothing that could be optimal is ever dropped, so the result is optimal over the stage options
(which ``_problem.tuning_candidates`` proves complete). ``exact_options_milp`` solves the same
problem with HiGHS (``scipy.optimize.milp``) as a cross-check.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from faasml.exceptions import InfeasibleConstraintError
from faasml.planners.pareto import pareto_indices
from faasml.planners.tuning._problem import TuningProblem
from faasml.types import Objective

Array = NDArray[np.float64]
_SLACK = 1e-12
"""Relative tolerance of the optimality bound: prune only what is worse by more than this."""


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


def _hull(g: Array, f: Array) -> NDArray[np.int64]:
    """Indices of the lower convex hull of points sorted by g ascending (f descending)."""
    hull: list[int] = []
    for j in range(len(g)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # Drop b when it lies on or above the segment a -> j.
            if (f[b] - f[a]) * (g[j] - g[a]) >= (f[j] - f[a]) * (g[b] - g[a]):
                hull.pop()
            else:
                break
        hull.append(j)
    return np.array(hull, dtype=np.int64)


class _Relaxation:
    """L(b) = min Σ F s.t. Σ G ≤ b over a set of stages with fractional choices (LP bound)."""

    def __init__(self, hulls: list[tuple[Array, Array]]) -> None:
        self.g0 = float(sum(g[0] for g, _ in hulls))
        self.f0 = float(sum(f[0] for _, f in hulls))
        if hulls:
            dg = np.concatenate([np.diff(g) for g, _ in hulls])
            df = np.concatenate([np.diff(f) for _, f in hulls])
        else:
            dg = df = np.zeros(0)
        order = np.argsort(df / np.where(dg > 0, dg, 1.0), kind="stable")
        self.g = self.g0 + np.concatenate(([0.0], np.cumsum(dg[order])))
        self.f = self.f0 + np.concatenate(([0.0], np.cumsum(df[order])))

    def __call__(self, budget: Array) -> Array:
        value = np.interp(budget, self.g, self.f, right=self.f[-1])
        result: Array = np.where(budget < self.g0 * (1 - _SLACK), np.inf, value)
        return result


def exact_options(problem: TuningProblem) -> tuple[int, ...]:
    """Optimal option index per stage; InfeasibleConstraintError when no choice fits."""
    fs, gs, g_limit, f_limit = _roles(problem)
    d = len(fs)
    hulls = []
    for f, g in zip(fs, gs, strict=True):
        # Options come cheapest-in-cost first; sort by G for either objective.
        order = np.lexsort((f, g))
        index = order[_hull(g[order], f[order])]
        hulls.append((g[index], f[index]))
    suffix = [_Relaxation(hulls[i + 1 :]) for i in range(d)]
    min_g_rest = np.concatenate((np.cumsum([g.min() for g in gs][::-1])[::-1][1:], [0.0]))
    min_f_rest = np.concatenate((np.cumsum([f.min() for f in fs][::-1])[::-1][1:], [0.0]))
    incumbent = _rounded_lp(fs, gs, g_limit, f_limit)

    state_f = np.zeros(1)
    state_g = np.zeros(1)
    parents: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
    for i in range(d):
        k = len(fs[i])
        total_f = (state_f[:, None] + fs[i][None, :]).ravel()
        total_g = (state_g[:, None] + gs[i][None, :]).ravel()
        keep = (total_g + min_g_rest[i] <= g_limit) & (total_f + min_f_rest[i] <= f_limit)
        if incumbent is not None:
            best_f = incumbent[0]
            bound = total_f + suffix[i](g_limit - total_g)
            keep &= bound <= best_f * (1 + _SLACK) + 1e-300
        rows = np.flatnonzero(keep)
        if rows.size == 0:
            break
        front = rows[pareto_indices(total_f[rows], total_g[rows])]
        parents.append(((front // k).astype(np.int64), (front % k).astype(np.int64)))
        state_f, state_g = total_f[front], total_g[front]
    else:
        best = int(np.argmin(state_f))
        if incumbent is None or state_f[best] <= incumbent[0]:
            choice = []
            for parent, option in reversed(parents):
                choice.append(int(option[best]))
                best = int(parent[best])
            return tuple(reversed(choice))
    if incumbent is not None:
        return incumbent[1]
    raise InfeasibleConstraintError("no plan meets the constraint")


def _rounded_lp(
    fs: list[Array], gs: list[Array], g_limit: float, f_limit: float
) -> tuple[float, tuple[int, ...]] | None:
    """A feasible plan near the LP optimum, or None: each stage on the cheapest-in-G option,
    then the best ratio upgrades (over the hulls) that fit whole."""
    choice = [int(np.argmin(g)) for g in gs]
    spent = sum(float(g[j]) for g, j in zip(gs, choice, strict=True))
    if spent > g_limit:
        return None
    steps: list[tuple[float, int, int]] = []
    for i, (f, g) in enumerate(zip(fs, gs, strict=True)):
        order = np.lexsort((f, g))
        hull = order[_hull(g[order], f[order])]
        steps.extend(
            ((f[b] - f[a]) / (g[b] - g[a]), i, int(b))
            for a, b in itertools.pairwise(hull)
            if g[b] > g[a]
        )
    steps.sort()
    for _, i, option in steps:
        extra = float(gs[i][option] - gs[i][choice[i]])
        if spent + extra <= g_limit and fs[i][option] < fs[i][choice[i]]:
            spent += extra
            choice[i] = option
    value = sum(float(f[j]) for f, j in zip(fs, choice, strict=True))
    return (value, tuple(choice)) if value <= f_limit else None


def exact_options_milp(problem: TuningProblem) -> tuple[int, ...]:
    """The same problem as a MILP solved by HiGHS to a zero gap (a cross-check; slower)."""
    fs, gs, g_limit, f_limit = _roles(problem)
    sizes = np.array([len(f) for f in fs])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    f_all, g_all = np.concatenate(fs), np.concatenate(gs)
    total = int(sizes.sum())
    stage_of = np.repeat(np.arange(len(fs)), sizes)
    rows = [LinearConstraint(csr_array((np.ones(total), (stage_of, np.arange(total)))), 1, 1)]
    for values, limit in ((g_all, g_limit), (f_all, f_limit)):
        if np.isfinite(limit):
            rows.append(LinearConstraint(values[None, :] / limit, -np.inf, 1.0))
    result = milp(
        f_all / (float(np.abs(f_all).max()) or 1.0),
        integrality=np.ones(total),
        bounds=Bounds(0, 1),
        constraints=rows,
        options={"mip_rel_gap": 0.0},
    )
    if result.x is None:
        raise InfeasibleConstraintError(f"no plan meets the constraint ({result.message})")
    picked = np.flatnonzero(result.x > 0.5)
    return tuple(int(j - starts[stage_of[j]]) for j in picked)
