"""The cluster policy contract and helpers every policy shares (placement, greedy growth)."""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from faasml.cluster.records import (
    TABLE2_RESTART_S,
    Cluster,
    ClusterAllocation,
    Decision,
    JobView,
    Placement,
)

FloatArray = npt.NDArray[np.float64]


class ClusterPolicy(ABC):
    """``allocate(jobs, cluster, current, now) -> Decision``: a pure function of its inputs.

    ``jobs`` are the active (arrived, unfinished) jobs; ``cluster`` holds the servers the
    policy may use now (servers loaned to inference are simply absent, a later issue);
    ``current`` is the allocation in force. The returned allocation must not oversubscribe a
    server. State a policy keeps between rounds (FaPES's schedule plans) travels in the
    Decision and comes back in each JobView, so the policy object itself stays stateless.
    """

    name: ClassVar[str] = ""
    adaptive: ClassVar[bool] = False
    """Whether jobs under this policy co-adapt their batch size to their GPUs."""
    elastic: ClassVar[bool] = True
    """Whether a running job's GPU count may change."""

    def __init__(self, round_s: float = 60.0, restart_s: float = TABLE2_RESTART_S) -> None:
        self.round_s = round_s
        self.restart_s = restart_s
        """What a (re)start costs a job: the simulator's overhead, weighed by the policies
        that plan with it (FaPES's planner, Pollux's re-allocation factor)."""

    @abstractmethod
    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision: ...

    def curve(self, view: JobView, cluster: Cluster) -> FloatArray:
        """Predicted goodput of ``view`` for 0..max GPUs, packed (index = GPUs)."""
        top = min(view.max_gpus, cluster.total_gpus)
        return view.model.goodput_curve(
            view.job,
            view.progress,
            top,
            cluster.gpus_per_server,
            cluster.servers_per_switch,
            adaptive=self.adaptive,
        )

    def fixed_gpus(self, view: JobView, cluster: Cluster) -> int:
        """The GPUs a non-elastic job asks for, within its bounds and the cluster."""
        return max(min(view.job.gpus, view.max_gpus, cluster.total_gpus), 1)


class GreedyGrowthPolicy(ClusterPolicy):
    """Every round: one GPU to each job, oldest first (no job starves), then the GPUs left one
    step at a time to the job whose ``value`` of goodput grows most per GPU (``greedy_grow``,
    Optimus §4); packed placement."""

    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        total = cluster.total_gpus
        ordered = by_arrival(jobs)[:total]
        counts = {v.name: 1 for v in ordered}
        curves = {v.name: self.curve(v, cluster) for v in ordered}
        value = {v.name: self.value(v, curves[v.name]) for v in ordered}
        return grow_and_place(counts, curves, total - len(ordered), value, cluster, current)

    @abstractmethod
    def value(self, view: JobView, curve: FloatArray) -> Callable[[float], float]:
        """What a goodput is worth to the job ``view`` whose goodput by GPUs is ``curve``."""


def by_arrival(jobs: Iterable[JobView]) -> list[JobView]:
    """Oldest first; ties broken by name, so every run orders the same."""
    return sorted(jobs, key=lambda v: (v.job.arrival_s, v.name))


def best_step(
    curve: FloatArray, n: int, value: Callable[[float], float], span: int
) -> tuple[float, int]:
    """Largest gain per GPU over the next 1..span GPUs (looking past dips at server edges)."""
    top = len(curve) - 1
    if n >= top:
        return -np.inf, 0
    base = value(float(curve[n]))
    best, best_k = -np.inf, 0
    for k in range(1, min(span, top - n) + 1):
        gain = (value(float(curve[n + k])) - base) / k
        if gain > best + 1e-15:
            best, best_k = gain, k
    return best, best_k


def greedy_grow(
    counts: dict[str, int],
    curves: Mapping[str, FloatArray],
    free: int,
    value: Mapping[str, Callable[[float], float]],
    span: int,
) -> dict[str, int]:
    """Hand ``free`` GPUs out one step at a time to the job with the largest marginal gain
    of ``value(goodput)`` per GPU (Optimus §4, ElasticFlow's greedy stage)."""
    counts = dict(counts)
    heap: list[tuple[float, str, int]] = []
    for name in counts:
        gain, k = best_step(curves[name], counts[name], value[name], span)
        if k and gain > 0:
            heapq.heappush(heap, (-gain, name, k))
    while free > 0 and heap:
        _, name, k = heapq.heappop(heap)
        if k > free:
            gain, k = best_step(curves[name], counts[name], value[name], free)
            if k and gain > 0:
                heapq.heappush(heap, (-gain, name, k))
            continue
        counts[name] += k
        free -= k
        gain, k = best_step(curves[name], counts[name], value[name], span)
        if k and gain > 0:
            heapq.heappush(heap, (-gain, name, k))
    return counts


def grow_and_place(
    counts: dict[str, int],
    curves: Mapping[str, FloatArray],
    free: int,
    value: Mapping[str, Callable[[float], float]],
    cluster: Cluster,
    current: ClusterAllocation,
) -> Decision:
    """``greedy_grow`` by at most one server's GPUs a step, then packed placement."""
    grown = greedy_grow(counts, curves, free, value, cluster.gpus_per_server)
    return Decision(place(grown, cluster, current))


def place(
    counts: Mapping[str, int],
    cluster: Cluster,
    current: ClusterAllocation,
    order: Sequence[str] | None = None,
) -> dict[str, Placement]:
    """Turn GPU counts into placements: keep a job's placement when its count is unchanged,
    shrink in place, and pack new or grown jobs on the fewest servers and switches
    (the packing strategy of Optimus and ElasticFlow)."""
    free = np.array(cluster.capacity(), dtype=np.int64)
    out: dict[str, Placement] = {}
    todo: list[str] = []
    names = list(order) if order is not None else sorted(counts, key=lambda n: -counts[n])
    for name in names:
        n = counts.get(name, 0)
        if n <= 0:
            continue
        cur = current.get(name, ())
        if cur and len(cur) >= n:
            by_server: dict[int, int] = {}
            for sid in cur:
                by_server[sid] = by_server.get(sid, 0) + 1
            kept: list[int] = []
            for sid, c in sorted(by_server.items(), key=lambda kv: (-kv[1], kv[0])):
                take = min(c, n - len(kept))
                kept.extend([sid] * take)
                if len(kept) == n:
                    break
            out[name] = tuple(sorted(kept))
            np.subtract.at(free, list(kept), 1)
        else:
            todo.append(name)
    switch = np.array([s.switch for s in cluster.servers])
    for name in sorted(todo, key=lambda n: -counts[n]):
        out[name] = pack(counts[name], free, switch)
    return out


def pack(n: int, free: npt.NDArray[np.int64], switch: npt.NDArray[np.int64]) -> Placement:
    """Take ``n`` free GPUs: one server if any fits them (best fit), else whole servers of
    the switch with the most free GPUs first."""
    fits = np.flatnonzero(free >= n)
    if len(fits):
        sid = int(fits[np.argmin(free[fits])])
        free[sid] -= n
        return (sid,) * n
    per_switch = np.bincount(switch, weights=free)
    switch_rank = np.argsort(-per_switch, kind="stable")
    rank_of = np.empty_like(switch_rank)
    rank_of[switch_rank] = np.arange(len(switch_rank))
    order = np.lexsort((-free, rank_of[switch]))
    taken: list[int] = []
    for sid in order:
        if free[sid] <= 0:
            continue
        take = int(min(free[sid], n - len(taken)))
        taken.extend([int(sid)] * take)
        free[sid] -= take
        if len(taken) == n:
            break
    if len(taken) < n:
        raise ValueError(f"cannot place {n} GPUs: only {len(taken)} free")
    return tuple(sorted(taken))


def fit_in_order(
    jobs: Sequence[JobView], want: Mapping[str, int], capacity: int, *, strict: bool
) -> dict[str, int]:
    """Admit jobs in the given order while their GPUs fit; ``strict`` stops at the first that
    does not (FIFO's head-of-line blocking), else skips it (SJF's backfill)."""
    counts: dict[str, int] = {}
    left = capacity
    for view in jobs:
        n = want[view.name]
        if n <= left:
            counts[view.name] = n
            left -= n
        elif strict:
            break
    return counts
