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

Solved with ``scipy.optimize.milp`` (HiGHS) under 75 % of the time limit; when HiGHS has no
optimal answer in time, its best solution or a feasible greedy allocation (best marginal
value per node), whichever is worth more.
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
    trivial (nothing to decide); ``solve_s`` is the wall time of the decision."""

    counts: dict[str, int]
    objective: float
    status: str
    solve_s: float


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


def allocate_counts(
    jobs: Sequence[AllocJob],
    pool: int,
    *,
    window_s: float = 600.0,
    metric: str = "throughput",
    time_limit_s: float = 1.0,
) -> CountAllocation:
    """BFTrainer's allocation on counts (module docstring), solved by HiGHS."""
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
    sizes = [len(c) for c, _ in options]
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    values = np.concatenate([v for _, v in options])
    scale = max(float(np.max(np.abs(values))), 1.0)
    all_counts = np.concatenate([c for c, _ in options]).astype(np.float64)
    rows = np.concatenate([np.repeat(np.arange(len(jobs)), sizes), np.full(len(values), len(jobs))])
    cols = np.concatenate([np.arange(len(values)), np.arange(len(values))])
    data = np.concatenate([np.ones(len(values)), all_counts])
    matrix = csr_matrix((data, (rows, cols)), shape=(len(jobs) + 1, len(values)))
    lower = np.concatenate([np.ones(len(jobs)), [0.0]])
    upper = np.concatenate([np.ones(len(jobs)), [float(pool)]])
    result = milp(
        c=-values / scale,
        constraints=LinearConstraint(matrix, lower, upper),
        integrality=np.ones(len(values)),
        bounds=Bounds(0, 1),
        # Most of the budget to HiGHS, the rest kept for the greedy fallback.
        options={"time_limit": 0.75 * time_limit_s, "disp": False, "mip_rel_gap": 1e-3},
    )
    picks: list[int] | None = None
    if result.x is not None:
        picks = [int(np.argmax(result.x[offsets[j] : offsets[j + 1]])) for j in range(len(jobs))]
        if sum(int(options[j][0][k]) for j, k in enumerate(picks)) > pool:
            picks = None
    if picks is not None and result.status == 0:
        chosen, status = picks, "optimal"
    else:
        # Out of time: HiGHS's best so far if any, or the greedy, whichever is worth more.
        chosen, status = _greedy(options, start, pool), "fallback"
        if picks is not None and _worth(options, picks) >= _worth(options, chosen):
            chosen, status = picks, "time-limit"
    objective = _worth(options, chosen)
    result_counts = {
        job.job: int(options[j][0][k]) for j, (job, k) in enumerate(zip(jobs, chosen, strict=True))
    }
    return CountAllocation(result_counts, objective, status, time.perf_counter() - started)


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
