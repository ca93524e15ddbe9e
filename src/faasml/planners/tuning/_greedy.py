"""The greedy tuning planner: CE-scaling Algorithm 1 with the marginal benefits of eqs. 10 and 12.

Written once for both objectives: F is what is minimised (time, or cost for eq. 11) and G the
resource whose limit binds (cost under a budget, or time under a deadline); the other bound, if
given, caps F. Starting from a warm-start plan, it repeats (1) *recycling*: move one stage to
its next cheaper-in-G option, the one that loses least F per unit of G freed; then
(2) *reallocating*: spend G on the stage options with the largest benefit B = −ΔF / ΔG
(eq. 10 for time, eq. 12 for cost) while G stays within the warm start's; and keeps the
result if F fell by more than δ (lines 1–14). Last it spends what is left up to the limit,
best benefit first (lines 15–25). Every step keeps the plan feasible and phase 1 only accepts
improvements, so the result is never worse than the warm start.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from faasml.planners.tuning._problem import TuningProblem
from faasml.types import Objective

DELTA = 1e-6
"""δ of Algorithm 1: a round must cut F by more than this fraction to continue."""

Array = NDArray[np.float64]


class _Padded:
    """Stage options as d × K arrays (padding: +inf) in the F / G roles of the objective."""

    def __init__(self, problem: TuningProblem) -> None:
        width = max(len(s) for s in problem.stages)
        self.f = np.full((len(problem.stages), width), np.inf)
        self.g = np.full((len(problem.stages), width), np.inf)
        minimise_time = problem.constraint.goal is Objective.MIN_TIME
        for i, stage in enumerate(problem.stages):
            primary, resource = (
                (stage.time_s, stage.cost_usd) if minimise_time else (stage.cost_usd, stage.time_s)
            )
            self.f[i, : len(stage)] = primary
            self.g[i, : len(stage)] = resource
        c = problem.constraint
        budget = np.inf if c.budget_usd is None else c.budget_usd
        deadline = np.inf if c.deadline_s is None else c.deadline_s
        self.g_limit, self.f_limit = (budget, deadline) if minimise_time else (deadline, budget)
        self.rows = np.arange(len(problem.stages))

    def totals(self, choice: NDArray[np.int64]) -> tuple[float, float]:
        return float(self.f[self.rows, choice].sum()), float(self.g[self.rows, choice].sum())


def _best_spend(pad: _Padded, choice: NDArray[np.int64], g_cap: float) -> tuple[int, int] | None:
    """The stage and option with the largest benefit −ΔF/ΔG (eq. 10 for time, eq. 12 for
    cost) among options with more G and less F that keep the total G within ``g_cap``."""
    current_f = pad.f[pad.rows, choice]
    current_g = pad.g[pad.rows, choice]
    d_f = pad.f - current_f[:, None]  # padding is +inf, so never negative
    d_g = pad.g - current_g[:, None]
    ok = (d_f < 0) & (d_g > 0) & (d_g <= g_cap - float(current_g.sum()))
    if not ok.any():
        return None
    benefit = np.where(ok, -d_f / np.where(ok, d_g, 1.0), -np.inf)
    flat = int(np.argmax(benefit))
    return flat // pad.f.shape[1], flat % pad.f.shape[1]


def _best_recycle(pad: _Padded, choice: NDArray[np.int64]) -> tuple[int, int] | None:
    """Recycling: the stage whose next option cheaper in G loses least F per unit of G freed,
    keeping F within its own bound."""
    below = choice - 1
    valid = below >= 0
    column = np.maximum(below, 0)
    current_f = pad.f[pad.rows, choice]
    d_f = pad.f[pad.rows, column] - current_f
    d_g = pad.g[pad.rows, column] - pad.g[pad.rows, choice]
    ok = valid & (d_g < 0) & (float(current_f.sum()) + d_f <= pad.f_limit)
    if not ok.any():
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        benefit = np.where(d_f <= 0, np.inf, -d_g / d_f)
    stage = int(np.argmax(np.where(ok, benefit, -np.inf)))
    return stage, int(below[stage])


def greedy_options(problem: TuningProblem, start: tuple[int, ...]) -> tuple[int, ...]:
    """Algorithm 1 from the warm start ``start`` (an option index per stage within G's limit;
    the final spending phase only lowers F, so a start above F's own bound may end within it)."""
    pad = _Padded(problem)
    best = np.array(start, dtype=np.int64)
    base_g = min(pad.totals(best)[1], pad.g_limit)
    budget_steps = 4 * pad.f.size + 16
    # Lines 1–14: recycle from some stage, reallocate within the warm start's G.
    for _ in range(budget_steps):
        step = _best_recycle(pad, best)
        if step is None:
            break
        trial = best.copy()
        trial[step[0]] = step[1]
        for _ in range(budget_steps):
            more = _best_spend(pad, trial, base_g)
            if more is None:
                break
            trial[more[0]] = more[1]
        f_best, _ = pad.totals(best)
        f_trial, g_trial = pad.totals(trial)
        if g_trial > pad.g_limit or f_trial > pad.f_limit or f_trial >= f_best * (1 - DELTA):
            break
        best = trial
    # Lines 15–25: spend the rest of the limit, best marginal benefit first.
    for _ in range(budget_steps):
        step = _best_spend(pad, best, pad.g_limit)
        if step is None:
            break
        best[step[0]] = step[1]
    return tuple(int(j) for j in best)
