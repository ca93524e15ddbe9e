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

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import InfeasibleConstraintError
from faasml.planners.tuning._exact_bounds import (
    _LIMIT_SLACK,
    _SLACK,
    Array,
    ExactSolution,
    _front,
    _hull,
    _improved,
    _roles,
    _rounded_lp,
    _Segments,
)
from faasml.planners.tuning._exact_milp import (
    MILP_TIME_LIMIT_S,
    _milp_solution,
    exact_options_milp,
)
from faasml.planners.tuning._problem import TuningProblem

__all__ = [
    "COARSE_STATES",
    "EXACT_PASSES",
    "MAX_STATES",
    "MILP_TIME_LIMIT_S",
    "ExactSolution",
    "exact_options",
    "exact_options_milp",
    "exact_solution",
]


MAX_STATES = 1 << 17
"""Most partial plans the programme keeps after a stage; beyond it states are merged (below)."""
COARSE_STATES = (256, 4096)
"""States kept by the coarse passes that find the incumbent."""
EXACT_PASSES = 2
"""Full passes: a second runs when the first merged states but found a better plan."""
_CHUNK = 1 << 20
"""Most (state, option) pairs expanded at once: bounds the programme's memory."""


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
