"""The Resource Allocator: BFTrainer's MILP on node counts, then counts mapped to nodes.

BFTrainer (MalleTrain's reference [112]) picks a node-to-job map x[j, n] maximising, over a
forward-looking window T_fwd,  Σ_j T_fwd · S_j(N_j) − Σ_j (rescale cost of j),  with N_j = 0
or min_j ≤ N_j ≤ max_j, each node on at most one job, and no migration (a job keeps its nodes
when it grows and keeps a subset when it shrinks). Nodes are interchangeable, so we solve for
the counts N_j and map counts to nodes afterwards keeping each job's current nodes — any
count vector with Σ N_j ≤ |pool| maps without migration.

On counts the piecewise-linear S_j and the up/down indicators become one binary y[j, n] per
job and allowed count n (a multiple-choice knapsack):

    max  Σ_j Σ_n v[j, n] · y[j, n]
    s.t. Σ_n y[j, n] = 1  (each job one count),   Σ_j Σ_n n · y[j, n] ≤ |pool|,

    v[j, n] = S_j(n) · max(0, T_fwd − c_j(n)),  c_j(n) = up_j if n > C_j, down_j if 0 < n < C_j,
    else 0 (C_j: the nodes j holds now): the samples j processes in the window, its rescale
    pause included. With ``metric="efficiency"`` S_j is divided by S_j(1) (speedup: a sum of
    node-equivalents, BFTrainer's scaling-efficiency objective).

Before HiGHS sees it, the problem is cut down by Lagrangian reduction (relax the capacity
row with a multiplier λ: L(λ) = λ·|pool| + Σ_j max_n (v[j, n] − λ·n) bounds the optimum;
an option whose bound when forced is no better than a feasible incumbent is dropped, a job
left with one option is fixed): at the trace's scale most events are decided by the bound
alone and the rest leave HiGHS a few dozen binaries instead of thousands. What is left is
solved with ``scipy.optimize.milp`` (HiGHS) under 75 % of the time limit; when HiGHS has no
optimal answer in time, its best solution or the incumbent (the relaxation's picks filled
greedily, best marginal value per node), whichever is worth more.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix

from faasml.cluster.scavenge.curves import Curve
from faasml.exceptions import ConfigError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

METRICS = ("throughput", "efficiency")


@dataclass(frozen=True)
class AllocJob:
    """A running job as the allocator sees it: bounds, nodes held, rescale costs, curve."""

    job: str
    current: int
    min_nodes: int
    max_nodes: int
    scale_up_s: float
    scale_down_s: float
    curve: Curve


@dataclass(frozen=True)
class CountAllocation:
    """Node counts per job; ``status`` is optimal, time-limit (HiGHS's best), fallback or
    trivial (nothing to decide); ``solve_s`` is the wall time of the decision;
    ``variables`` the binaries HiGHS was given (0: the reduction decided alone)."""

    counts: dict[str, int]
    objective: float
    status: str
    solve_s: float
    variables: int = 0


def candidate_values(
    job: AllocJob, pool: int, window_s: float, metric: str = "throughput"
) -> tuple[IntArray, FloatArray]:
    """Allowed counts of ``job`` (0 and min..min(max, pool)) and their values v[j, n]."""
    top = min(job.max_nodes, pool)
    counts = np.concatenate(([0], np.arange(job.min_nodes, top + 1))).astype(np.int64)
    rates = np.asarray(job.curve(counts), dtype=np.float64)
    if metric == "efficiency":
        one = float(np.asarray(job.curve(np.array([1.0])))[0])
        rates = rates / one if one > 0 else rates * 0.0
    cost = np.where(
        counts > job.current,
        job.scale_up_s,
        np.where((counts > 0) & (counts < job.current), job.scale_down_s, 0.0),
    )
    values = rates * np.maximum(window_s - cost, 0.0)
    return counts, values


def _greedy(
    options: Sequence[tuple[IntArray, FloatArray]], start: Sequence[int], pool: int
) -> list[int]:
    """Feasible counts: start from ``start`` (indices), then repeatedly take the move with the
    best value gained per extra node that still fits (each job's best move is cached and
    recomputed only when it changes or no longer fits)."""
    chosen = list(start)
    left = pool - sum(int(options[j][0][chosen[j]]) for j in range(len(options)))

    def best_move(j: int) -> tuple[float, int, int]:
        counts, values = options[j]
        extra = counts - counts[chosen[j]]
        ok = (extra > 0) & (extra <= left)
        if not ok.any():
            return (-np.inf, 0, 0)
        gain = np.where(ok, (values - values[chosen[j]]) / np.maximum(extra, 1), -np.inf)
        k = int(np.argmax(gain))
        return (float(gain[k]), k, int(extra[k]))

    moves = [best_move(j) for j in range(len(options))]
    while left > 0:
        j = max(range(len(moves)), key=lambda i: moves[i][0], default=None)
        if j is None or moves[j][0] <= 0:
            break
        _, k, extra = moves[j]
        if extra > left:  # stale: the pool shrank since it was computed
            moves[j] = best_move(j)
            continue
        chosen[j] = k
        left -= extra
        moves[j] = best_move(j)
        for i, move in enumerate(moves):
            if move[2] > left:
                moves[i] = best_move(i)
    return chosen


def _worth(options: Sequence[tuple[IntArray, FloatArray]], chosen: Sequence[int]) -> float:
    return float(sum(options[j][1][k] for j, k in enumerate(chosen)))


def _lagrangian(
    counts: FloatArray, values: FloatArray, pool: int
) -> tuple[float, float, IntArray, IntArray]:
    """The Lagrangian relaxation of the capacity row: L(λ) = λ·pool + Σ_j max_k (v[j,k] −
    λ·n[j,k]) is an upper bound for every λ ≥ 0 (equal to the LP bound at its minimum).
    ``counts``/``values`` are padded J×K matrices (padding: value −inf). Returns (λ, L(λ))
    at the best λ found by bisection on the subgradient, and the per-job picks at λ (the
    smallest count among ties; feasible) and just below it (infeasible unless λ = 0)."""

    def picks(lam: float) -> IntArray:
        # Ties go to the smallest count (the options are sorted by count).
        score = values - lam * counts
        return np.asarray(np.argmax(score >= score.max(axis=1, keepdims=True) - 1e-9, axis=1))

    rows = np.arange(counts.shape[0])

    def used(k: IntArray) -> float:
        return float(counts[rows, k].sum())

    def bound(lam: float) -> float:
        return lam * pool + float((values - lam * counts).max(axis=1).sum())

    k_zero = picks(0.0)
    if used(k_zero) <= pool:
        return 0.0, bound(0.0), k_zero, k_zero
    low, high = 0.0, float(np.max(np.where(counts > 0, values / np.maximum(counts, 1), 0)) + 1.0)
    for _ in range(60):
        mid = 0.5 * (low + high)
        if used(picks(mid)) > pool:
            low = mid
        else:
            high = mid
    return high, bound(high), picks(high), picks(low)


def allocate_counts(
    jobs: Sequence[AllocJob],
    pool: int,
    *,
    window_s: float = 600.0,
    metric: str = "throughput",
    time_limit_s: float = 1.0,
    reduce: bool = True,
    gap: float = 1e-4,
) -> CountAllocation:
    """BFTrainer's allocation on counts (module docstring), solved by HiGHS.

    With ``reduce`` (the default) the MILP HiGHS sees is first cut down by Lagrangian
    reduction (the standard one for multiple-choice knapsacks): with L(λ) the relaxation
    bound and a feasible incumbent z (the relaxation's picks filled greedily, or the greedy
    from the current counts), an option (j, n) whose bound when forced, L(λ) − h_j(λ) +
    v[j,n] − λn, is at most z·(1 + ``gap``) cannot improve on z by more than the gap and is
    dropped; a job left with one option is fixed. Often nothing is left and z is proven
    within the gap without a solve. ``gap`` is also HiGHS's relative gap."""
    if metric not in METRICS:
        raise ConfigError(f"the metric is {metric!r}, but must be one of {', '.join(METRICS)}")
    if pool < 0:
        raise ConfigError(f"the pool is {pool} nodes, but must be >= 0")
    started = time.perf_counter()
    options = [candidate_values(j, pool, window_s, metric) for j in jobs]
    if not jobs:
        return CountAllocation({}, 0.0, "trivial", time.perf_counter() - started)
    # A start the greedy fallback can always use: current counts where they still fit.
    start = []
    used = 0
    for (counts, _), job in zip(options, jobs, strict=True):
        k = int(np.searchsorted(counts, job.current))
        if k < len(counts) and counts[k] == job.current and used + job.current <= pool:
            start.append(k)
            used += job.current
        else:
            start.append(0)
    keep: list[IntArray] = [np.arange(len(c)) for c, _ in options]
    incumbent: list[int] | None = None
    if reduce:
        incumbent, keep = _reduce(options, start, pool, gap)
        if incumbent is not None and not keep:
            return _done(jobs, options, incumbent, "optimal", started)
    picks = _solve(options, keep, pool, 0.75 * time_limit_s, gap)
    variables = sum(len(k) for k in keep if len(k) > 1)
    if picks is not None and picks[1] == "optimal":
        chosen, status = picks[0], "optimal"
        if incumbent is not None and _worth(options, incumbent) > _worth(options, chosen):
            chosen = incumbent  # the reduced MILP only holds what may beat the incumbent
    elif picks is not None and picks[1] == "infeasible" and incumbent is not None:
        chosen, status = incumbent, "optimal"  # nothing left beats the incumbent
    else:
        # Out of time: HiGHS's best so far if any, or the greedy, whichever is worth more.
        chosen, status = incumbent or _greedy(options, start, pool), "fallback"
        worth = _worth(options, chosen)
        if picks is not None and picks[1] != "infeasible" and _worth(options, picks[0]) >= worth:
            chosen, status = picks[0], "time-limit"
    return _done(jobs, options, chosen, status, started, variables)


def _done(
    jobs: Sequence[AllocJob],
    options: Sequence[tuple[IntArray, FloatArray]],
    chosen: Sequence[int],
    status: str,
    started: float,
    variables: int = 0,
) -> CountAllocation:
    counts = {
        job.job: int(options[j][0][k]) for j, (job, k) in enumerate(zip(jobs, chosen, strict=True))
    }
    return CountAllocation(
        counts, _worth(options, chosen), status, time.perf_counter() - started, variables
    )


def _reduce(
    options: Sequence[tuple[IntArray, FloatArray]], start: Sequence[int], pool: int, gap: float
) -> tuple[list[int], list[IntArray]]:
    """The incumbent and, per job, the options that may beat it by more than ``gap``
    (:func:`allocate_counts`); an empty list when none may: the incumbent stands."""
    width = max(len(c) for c, _ in options)
    counts = np.zeros((len(options), width))
    values = np.full((len(options), width), -np.inf)
    for j, (c, v) in enumerate(options):
        counts[j, : len(c)] = c
        values[j, : len(v)] = v
    lam, upper, feasible, _ = _lagrangian(counts, values, pool)
    candidates = [_greedy(options, list(map(int, feasible)), pool), _greedy(options, start, pool)]
    incumbent = max(candidates, key=lambda k: _worth(options, k))
    best = _worth(options, incumbent)
    limit = best + gap * abs(best) + 1e-9 * max(abs(upper), 1.0)
    if upper <= limit:
        return incumbent, []
    score = values - lam * counts
    forced = upper - score.max(axis=1, keepdims=True) + score
    keep = [np.flatnonzero(forced[j, : len(c)] > limit) for j, (c, _) in enumerate(options)]
    if any(len(k) == 0 for k in keep):
        return incumbent, []
    return incumbent, keep


def _solve(
    options: Sequence[tuple[IntArray, FloatArray]],
    keep: Sequence[IntArray],
    pool: int,
    time_limit_s: float,
    gap: float,
) -> tuple[list[int], str] | None:
    """HiGHS on the kept options (a job with one option is fixed, not a variable): the
    picks (indices into each job's full options) and "optimal", "time-limit" or
    "infeasible"; None when HiGHS has no solution."""
    fixed = [int(k[0]) if len(k) == 1 else -1 for k in keep]
    left = pool - sum(int(options[j][0][k]) for j, k in enumerate(fixed) if k >= 0)
    free = [j for j, k in enumerate(fixed) if k < 0]
    if left < 0:
        return [], "infeasible"
    if not free:
        return fixed, "optimal"
    sizes = [len(keep[j]) for j in free]
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    values = np.concatenate([options[j][1][keep[j]] for j in free])
    all_counts = np.concatenate([options[j][0][keep[j]] for j in free]).astype(np.float64)
    scale = max(float(np.max(np.abs(values))), 1.0)
    rows = np.concatenate([np.repeat(np.arange(len(free)), sizes), np.full(len(values), len(free))])
    cols = np.concatenate([np.arange(len(values)), np.arange(len(values))])
    data = np.concatenate([np.ones(len(values)), all_counts])
    matrix = csr_matrix((data, (rows, cols)), shape=(len(free) + 1, len(values)))
    lower = np.concatenate([np.ones(len(free)), [0.0]])
    upper = np.concatenate([np.ones(len(free)), [float(left)]])
    result = milp(
        c=-values / scale,
        constraints=LinearConstraint(matrix, lower, upper),
        integrality=np.ones(len(values)),
        bounds=Bounds(0, 1),
        # Most of the budget to HiGHS, the rest kept for the greedy fallback.
        options={"time_limit": max(time_limit_s, 1e-3), "disp": False, "mip_rel_gap": gap},
    )
    if result.status == 2:
        return [], "infeasible"
    if result.x is None:
        return None
    chosen = list(fixed)
    for i, j in enumerate(free):
        chosen[j] = int(keep[j][int(np.argmax(result.x[offsets[i] : offsets[i + 1]]))])
    if sum(int(options[j][0][k]) for j, k in enumerate(chosen)) > pool:
        return None
    return chosen, "optimal" if result.status == 0 else "time-limit"


def map_to_nodes(
    current: Mapping[str, Iterable[str]], counts: Mapping[str, int], free: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """Nodes per job for ``counts``: a shrinking job keeps a subset of its nodes, a growing
    job keeps all of its nodes and takes free ones (no migration). Deterministic: nodes are
    released and taken in sorted order. Raises ValueError if the counts do not fit."""
    kept: dict[str, list[str]] = {}
    pool = set(free)
    for job, want in counts.items():
        have = sorted(current.get(job, ()))
        kept[job] = have[:want]
        pool.update(have[want:])
    for job, nodes in current.items():
        if job not in counts:
            pool.update(nodes)
    need = sum(max(0, counts[j] - len(kept[j])) for j in counts)
    if need > len(pool):
        raise ValueError(f"counts need {need} more nodes, but only {len(pool)} are free")
    spare = sorted(pool)
    at = 0
    out: dict[str, tuple[str, ...]] = {}
    for job, want in counts.items():
        grow = want - len(kept[job])
        out[job] = (*kept[job], *spare[at : at + grow]) if grow > 0 else tuple(kept[job])
        at += max(grow, 0)
    return out
