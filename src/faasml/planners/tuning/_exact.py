"""The exact tuning planner: the multiple-choice knapsack of CE-scaling eqs. 7–9 / 11.

Choose one option per stage (x_i(θ) of eq. 6) minimising F = Σ F_i (time, eq. 7; or cost,
eq. 11) subject to G = Σ G_i ≤ limit (budget, eq. 8; or deadline, eq. 9) and, when both bounds
are given, F ≤ its own bound. Solved by a dynamic programme over stages whose states are the
Pareto-optimal partial sums (F, G) — a dominated partial plan can never complete into a better
plan — pruned by two valid bounds:

* feasibility: G + Σ_rest min G_j ≤ limit and F + Σ_rest min F_j ≤ F's bound;
* optimality: F + L_rest(limit − G) > incumbent, where L_rest is the LP relaxation of the
  remaining stages (the merged lower convex hulls of their options, a lower bound on any
  integral completion). The incumbent is the LP solution rounded down to a feasible plan,
  improved by a local search and by coarse passes of the programme itself.

Stages are taken in decreasing order of their largest hull step, so the LP bound of the stages
left is tight (``_stage_order``); the last two are combined into one stage of their
Pareto-optimal option pairs, searched in the final step (``_pair_last``). The programme
expands (state, option) pairs in bounded chunks and keeps at most ``MAX_STATES`` states per
stage: nothing that could be optimal is dropped unless that cap is reached, so the result is
**proven optimal** over the stage options (which ``_problem.tuning_candidates`` proves
complete). At the cap, states within δ in F are merged and the plan is within a proven gap Σδ
of the optimum (``ExactSolution`` says which); with both bounds given HiGHS
(``scipy.optimize.milp``) solves it instead. Memory and time stay bounded whatever the
instance. ``exact_options_milp`` solves the problem with HiGHS as a cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import InfeasibleConstraintError
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


MAX_STATES = 1 << 17
"""Most partial plans the programme keeps after a stage; beyond it states are merged (below)."""
COARSE_STATES = (256, 4096)
"""States kept by the coarse passes that find the incumbent."""
EXACT_PASSES = 2
"""Full passes: a second runs when the first merged states but found a better plan."""
_CHUNK = 1 << 20
"""Most (state, option) pairs expanded at once: bounds the programme's memory."""
MILP_TIME_LIMIT_S = 30.0
"""HiGHS's time limit when it is the fallback (both bounds given and states were merged)."""


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


def exact_options(problem: TuningProblem) -> tuple[int, ...]:
    """Optimal option index per stage; InfeasibleConstraintError when no choice fits."""
    return exact_solution(problem).options


def _stage_order(fs: list[Array], hulls: list[tuple[Array, Array]]) -> list[int]:
    """Stages by decreasing largest F step along their hull. The LP bound of the stages not
    yet decided is off by at most one such step, so deciding the coarse stages first leaves
    tight bounds for the rest and the programme keeps far fewer states (the order of a sum is
    free, so this is exact)."""
    steps = [float(-np.diff(f).min()) if len(f) > 1 else 0.0 for _, f in hulls]
    return sorted(range(len(fs)), key=lambda i: (-steps[i], i))


def exact_solution(problem: TuningProblem) -> ExactSolution:
    """Solve the knapsack of the module docstring; InfeasibleConstraintError when nothing fits.

    Proven optimal unless a stage's partial plans exceed ``MAX_STATES``: then partial plans
    whose F falls in one bucket of width δ are merged into the one with least G (it can
    complete every plan the others can, at most δ dearer in F), so the plan is within Σδ of
    the optimum; with both bounds given that argument fails (the merged plan may break F's own
    bound) and HiGHS solves it instead, within ``MILP_TIME_LIMIT_S``.
    """
    fs, gs, g_limit, f_limit = _roles(problem)
    # Sums are taken in another order than the caller's (stages reordered, pairs), so a bound
    # met exactly may be missed by rounding: allow a relative 1e-12 (Constraint.admits: 1e-9).
    g_limit, f_limit = g_limit * (1 + _LIMIT_SLACK), f_limit * (1 + _LIMIT_SLACK)
    # Sort every stage's options by G; being a Pareto front, F then decreases.
    sorts = [np.lexsort((f, g)) for f, g in zip(fs, gs, strict=True)]
    fs = [f[o] for f, o in zip(fs, sorts, strict=True)]
    gs = [g[o] for g, o in zip(gs, sorts, strict=True)]
    if sum(float(g[-1]) for g in gs) <= g_limit and sum(float(f[-1]) for f in fs) <= f_limit:
        # The limit does not bind: every stage on its best option is optimal.
        value = sum(float(f[-1]) for f in fs)
        return ExactSolution(tuple(int(o[-1]) for o in sorts), value, value, True, _DP)
    hull_rows = [_hull(g, f) for f, g in zip(fs, gs, strict=True)]
    hulls = [(g[h], f[h]) for f, g, h in zip(fs, gs, hull_rows, strict=True)]
    order = _stage_order(fs, hulls)
    fs, gs = [fs[i] for i in order], [gs[i] for i in order]
    hull_rows, hulls = [hull_rows[i] for i in order], [hulls[i] for i in order]
    lp_bound = float(
        _Segments(hulls).relaxation(np.ones(len(fs), dtype=bool))(np.array([g_limit]))[0]
    )
    incumbent = _improved(
        fs, gs, g_limit, f_limit, _rounded_lp(fs, gs, g_limit, f_limit, hull_rows)
    )
    # Coarse passes (few states, merged) find plans within a small gap of the optimum; each
    # tighter incumbent lets the next pass prune far more.
    for states in COARSE_STATES:
        coarse = _pass(fs, gs, hulls, g_limit, f_limit, incumbent, states)
        if coarse is not None and coarse[1] is not None:
            incumbent = (coarse[0], coarse[1])
    lost = 0.0
    for _ in range(EXACT_PASSES):
        found = _pass(fs, gs, hulls, g_limit, f_limit, incumbent, MAX_STATES)
        if found is None:
            if np.isfinite(f_limit):
                # With both bounds, merged states may have dropped the only plans that meet
                # F's own bound: HiGHS decides (and says infeasible only when it is).
                return _milp_solution(problem)
            raise InfeasibleConstraintError("no plan meets the constraint")
        value, better, lost = found
        if better is None:  # nothing beats the incumbent
            assert incumbent is not None  # _solve returns None when there is neither
            value, chosen = incumbent
            break
        chosen = better
        if lost == 0.0:
            break
        incumbent = (value, chosen)  # merged, but better: again, pruning with it
    options = [0] * len(order)
    for position, stage in enumerate(order):
        options[stage] = int(sorts[stage][chosen[position]])
    if lost == 0.0:
        return ExactSolution(tuple(options), value, value, True, _DP)
    if np.isfinite(f_limit):
        return _milp_solution(problem)
    lower = max(lp_bound, value - lost)
    return ExactSolution(tuple(options), value, min(lower, value), False, _DP_MERGED)


_DP = "dynamic programme"
_DP_MERGED = "dynamic programme, merged states"


def _pass(
    fs: list[Array],
    gs: list[Array],
    hulls: list[tuple[Array, Array]],
    g_limit: float,
    f_limit: float,
    incumbent: tuple[float, tuple[int, ...]] | None,
    max_states: int,
) -> tuple[float, tuple[int, ...] | None, float] | None:
    """One pass keeping at most ``max_states`` states a stage: the options that can beat the
    incumbent (``_reduce``), the last two stages paired (``_pair_last``), the programme; the
    best plan (None: nothing beats the incumbent), its F and the F it may have lost to
    merging; None when nothing fits."""
    kept = _reduce(fs, gs, g_limit, incumbent, hulls)
    sub_f = [f[k] for f, k in zip(fs, kept, strict=True)]
    sub_g = [g[k] for g, k in zip(gs, kept, strict=True)]
    sub_hulls = hulls
    pair = _pair_last(sub_f, sub_g, g_limit, f_limit) if len(fs) > 2 else None
    if pair is not None:
        # The last two stages become one whose options are their Pareto-optimal pairs: the
        # final step searches it instead of expanding the largest set of states. Its hull
        # bounds the pass's plans, which use kept options only.
        sub_f, sub_g = [*sub_f[:-2], pair[0]], [*sub_g[:-2], pair[1]]
        pair_hull = _hull(pair[1], pair[0])
        sub_hulls = [*hulls[:-2], (pair[1][pair_hull], pair[0][pair_hull])]
    bound = np.inf if incumbent is None else incumbent[0]
    found = _solve(sub_f, sub_g, sub_hulls, g_limit, f_limit, bound, max_states=max_states)
    if found is None:
        return None
    value, local, lost = found
    if local is None:
        return found
    if pair is not None:
        local = (*local[:-1], int(pair[2][local[-1]]), int(pair[3][local[-1]]))
    return value, tuple(int(k[j]) for k, j in zip(kept, local, strict=True)), lost


PAIR_LIMIT = 1 << 20
"""Most option pairs of the last two stages combined into one stage (``_pair_last``)."""


def _pair_last(
    fs: list[Array], gs: list[Array], g_limit: float, f_limit: float
) -> tuple[Array, Array, NDArray[np.int64], NDArray[np.int64]] | None:
    """The last two stages as one: the Pareto front of their option pairs (F_a + F_b,
    G_a + G_b) that can fit beside the other stages' least G and F, sorted by G (F then
    falls), with the option of each stage; None when there are more than PAIR_LIMIT pairs.
    A pair off that front is dominated in every plan, so this is exact."""
    f_a, f_b, g_a, g_b = fs[-2], fs[-1], gs[-2], gs[-1]
    if len(f_a) * len(f_b) > PAIR_LIMIT:
        return None
    g_room = g_limit - sum(float(g[0]) for g in gs[:-2])
    f_room = f_limit - sum(float(f[-1]) for f in fs[:-2])
    f = (f_a[:, None] + f_b[None, :]).ravel()
    g = (g_a[:, None] + g_b[None, :]).ravel()
    rows = np.flatnonzero((g <= g_room) & (f <= f_room))
    if rows.size == 0:
        return None  # no plan fits; the programme says so
    rows = rows[_front(f[rows], g[rows])][::-1]  # by G ascending, F descending
    k = len(f_b)
    return f[rows], g[rows], (rows // k).astype(np.int64), (rows % k).astype(np.int64)


def _reduce(
    fs: list[Array],
    gs: list[Array],
    g_limit: float,
    incumbent: tuple[float, tuple[int, ...]] | None,
    hulls: list[tuple[Array, Array]],
) -> list[NDArray[np.int64]]:
    """Options that can still be optimal (classic MCKP variable reduction): option j of stage
    i is dropped when f_ij + L_{−i}(limit − g_ij), the LP bound of the other stages with what
    is left, exceeds the incumbent's F. The incumbent's own options are always kept."""
    if incumbent is None:
        return [np.arange(len(f), dtype=np.int64) for f in fs]
    segments = _Segments(hulls)
    kept = []
    for i, (f, g) in enumerate(zip(fs, gs, strict=True)):
        others = segments.relaxation(np.arange(len(fs)) != i)
        bound = f + others(g_limit - g)
        keep = np.flatnonzero(bound <= incumbent[0] * (1 + _SLACK))
        kept.append(np.union1d(keep, [incumbent[1][i]]).astype(np.int64))
    return kept


def _merge(f: Array, g: Array, delta: float) -> NDArray[np.int64]:
    """Of a front sorted by F ascending (so G descending), the last state of every bucket
    ⌊F / δ⌋: the one with least G, less than δ above every state it replaces. The grid is
    fixed for a stage, so merging again never moves a state out of its bucket."""
    bucket = np.floor(f / delta)
    return np.flatnonzero(np.concatenate((bucket[1:] != bucket[:-1], [True]))).astype(np.int64)


_States = tuple[Array, Array, NDArray[np.int64]]
"""Partial plans: F, G and the (state, option) pair each came from."""


def _consolidate(held: list[_States], delta: float, max_states: int) -> tuple[list[_States], float]:
    """One Pareto front of the chunks' states, merged on the grid of width δ when above
    ``max_states`` (δ = 0: not merged yet). The first merge of a stage sets δ to the front's F
    range over ``max_states``; δ doubles while too many buckets are left (the grids nest, so a
    state is never more than the final δ from the one that replaced it). Returns the states
    and the stage's final δ."""
    f_all = np.concatenate([h[0] for h in held])
    g_all = np.concatenate([h[1] for h in held])
    pair_all = np.concatenate([h[2] for h in held])
    rows = _front(f_all, g_all)
    if rows.size > max_states:
        f = f_all[rows]
        if delta == 0.0:
            delta = max(float(f[-1] - f[0]) / max_states, 1e-12 * max(abs(float(f[-1])), 1.0))
        rows = rows[_merge(f, g_all[rows], delta)]
        while rows.size > 2 * max_states:
            delta *= 2.0
            rows = rows[_merge(f_all[rows], g_all[rows], delta)]
    return [(f_all[rows], g_all[rows], pair_all[rows])], delta


def _solve(
    fs: list[Array],
    gs: list[Array],
    hulls: list[tuple[Array, Array]],
    g_limit: float,
    f_limit: float,
    incumbent: float,
    *,
    max_states: int,
) -> tuple[float, tuple[int, ...] | None, float] | None:
    """The dynamic programme over the stages, options sorted by G: (F, plan, the F it may have
    lost to merging; 0: exact) of the best plan with F below ``incumbent``; (incumbent, None,
    loss) when none is; None when there is no incumbent (inf) and no plan.

    (State, option) pairs are expanded in chunks of ``_CHUNK``; when more than ``max_states``
    Pareto-optimal partial plans are left after a stage, they are merged on a grid of width
    δ ≈ (their F range) / max_states (``_consolidate``), so a stage keeps at most about
    ``max_states`` of them and the result is within Σδ of the optimum (the incumbent, if
    better, is returned instead).
    """
    d = len(fs)
    segments = _Segments(hulls)
    suffix = [segments.relaxation(np.arange(d) > i) for i in range(d)]
    min_g_rest = np.concatenate((np.cumsum([g[0] for g in gs][::-1])[::-1][1:], [0.0]))
    min_f_rest = np.concatenate((np.cumsum([f[-1] for f in fs][::-1])[::-1][1:], [0.0]))
    best_f = incumbent
    lost = 0.0

    state_f = np.zeros(1)
    state_g = np.zeros(1)
    parents: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
    for i in range(d - 1):
        delta = 0.0
        k = len(fs[i])
        per_chunk = max(1, _CHUNK // k)
        held: list[_States] = []
        for first in range(0, len(state_f), per_chunk):
            total_f = (state_f[first : first + per_chunk, None] + fs[i][None, :]).ravel()
            total_g = (state_g[first : first + per_chunk, None] + gs[i][None, :]).ravel()
            keep = (total_g + min_g_rest[i] <= g_limit) & (total_f + min_f_rest[i] <= f_limit)
            keep &= total_f + suffix[i](g_limit - total_g) <= best_f * (1 + _SLACK)
            rows = np.flatnonzero(keep)
            if rows.size:
                front = rows[_front(total_f[rows], total_g[rows])]
                held.append((total_f[front], total_g[front], first * k + front))
                if sum(h[0].size for h in held) > 4 * max_states:
                    held, delta = _consolidate(held, delta, max_states)
        if not held:
            return None if not np.isfinite(best_f) else (best_f, None, lost)
        held, delta = _consolidate(held, delta, max_states)
        lost += delta
        state_f, state_g, pairs = held[0]
        parents.append(((pairs // k).astype(np.int64), (pairs % k).astype(np.int64)))
    # Last stage: the best option within what is left is the last one that fits.
    last = np.searchsorted(gs[-1], g_limit - state_g, side="right") - 1
    value = np.where(last >= 0, state_f + fs[-1][np.maximum(last, 0)], np.inf)
    value = np.where(value <= f_limit, value, np.inf)
    best = int(np.argmin(value))
    if not np.isfinite(value[best]) or value[best] >= best_f:
        return None if not np.isfinite(best_f) else (best_f, None, lost)
    found = float(value[best])
    choice = [int(last[best])]
    for parent, option in reversed(parents):
        choice.append(int(option[best]))
        best = int(parent[best])
    return found, tuple(reversed(choice)), lost


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


def exact_options_milp(problem: TuningProblem) -> tuple[int, ...]:
    """The same problem as a MILP solved by HiGHS to a zero gap (a cross-check; slower)."""
    return _milp_solution(problem, time_limit_s=None).options


MILP_CUTS = 50
"""Most plans HiGHS may return over a limit by less than its tolerance before the MILP is
said to have none within it (each is cut off and the MILP solved again)."""


def _milp_solution(
    problem: TuningProblem, time_limit_s: float | None = MILP_TIME_LIMIT_S
) -> ExactSolution:
    """HiGHS on the MILP (x_ij ∈ {0, 1}, Σ_j x_ij = 1, Σ G·x ≤ limit, Σ F·x ≤ F's bound);
    proven optimal when HiGHS closes the gap, else the best plan found with its gap."""
    # Imported here: scipy takes a second to import, and the CLI's parsers reach this module.
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array

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
    scale = float(np.abs(f_all).max()) or 1.0
    options: dict[str, float] = {"mip_rel_gap": 0.0}
    if time_limit_s is not None:
        options["time_limit"] = time_limit_s
    for _ in range(MILP_CUTS):
        result = milp(
            f_all / scale,
            integrality=np.ones(total),
            bounds=Bounds(0, 1),
            constraints=rows,
            options=options,
        )
        if result.x is None:
            raise InfeasibleConstraintError(f"no plan meets the constraint ({result.message})")
        picked = np.flatnonzero(result.x > 0.5)
        # HiGHS accepts a row broken by up to its feasibility tolerance (1e-6 relative here):
        # a plan over a limit by that much is cut off (no-good cut) and the MILP solved again.
        if all(
            float(values[picked].sum()) <= limit * (1 + _LIMIT_SLACK)
            for values, limit in ((g_all, g_limit), (f_all, f_limit))
        ):
            break
        cut = np.zeros(total)
        cut[picked] = 1.0
        rows.append(LinearConstraint(cut[None, :], -np.inf, len(picked) - 1))
    else:
        raise InfeasibleConstraintError(
            f"no plan found within the constraint: HiGHS's last {MILP_CUTS} plans each broke a "
            "limit by less than its tolerance"
        )
    choice = tuple(int(j - starts[stage_of[j]]) for j in picked)
    value = sum(float(f[j]) for f, j in zip(fs, choice, strict=True))
    if result.status == 0:
        return ExactSolution(choice, value, value, True, _MILP)
    bound = getattr(result, "mip_dual_bound", None)
    lower = float(bound) * scale if bound is not None and np.isfinite(bound) else 0.0
    return ExactSolution(choice, value, min(lower, value), False, _MILP)


_MILP = "HiGHS MILP"
