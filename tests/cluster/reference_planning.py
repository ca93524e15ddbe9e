"""FaPES's plan search, filtering and server restoring as first written (one slot, one
recycling depth, one rebuild of the servers' use at a time), kept as the references the
faster versions must match exactly."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import numpy.typing as npt

from faasml.cluster.board import Board
from faasml.cluster.planning import Pricing, choose_servers, slot_bounds
from faasml.cluster.policies.fapes import FapesPolicy
from faasml.cluster.policies.fapes.curves import _achievement, _at, _per_gpu
from faasml.cluster.records import (
    Cluster,
    ClusterAllocation,
    JobView,
    Placement,
    SchedulePlan,
    Segment,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def reference_plan(
    curve: FloatArray,
    work: float,
    board: Board,
    current: Placement,
    pricing: Pricing,
    *,
    round_s: float,
    restart_s: float,
    slots: int,
    chunks: int,
    weight: float = 1.0,
) -> SchedulePlan | None:
    """``plan_schedule`` as first written: one slot at a time, every GPU count."""
    top = len(curve) - 1
    if top < 1 or work <= 0 or curve[top] <= 0:
        return None
    good = np.maximum.accumulate(curve)
    fast = work / float(good[top])
    slow = work / float(good[1]) if good[1] > 0 else fast
    bounds = slot_bounds(math.ceil(2.0 * math.sqrt(fast * slow) / round_s), slots)
    K, T = chunks, len(bounds) - 1
    targets = np.arange(K + 1) * (work / K)
    cost = np.full((T, K + 1), np.inf)
    need = np.zeros((T, K + 1), dtype=np.int64)
    servers: list[tuple[IntArray, IntArray, FloatArray]] = []
    cums: list[FloatArray] = []
    cur_n = len(current)
    counts = np.arange(top + 1)
    for t in range(T):
        rounds = bounds[t + 1] - bounds[t]
        seconds = rounds * round_s
        free = board.free_in(bounds[t], bounds[t + 1])
        price = board.price(free, pricing.low, pricing.high) * rounds
        order = np.lexsort((-free, price)).astype(np.int64)
        servers.append((order, free, price))
        per_gpu = np.repeat(price[order], free[order])[:top]
        cum = np.concatenate([[0.0], np.cumsum(per_gpu)])
        cums.append(cum)
        w = good * seconds
        if t == 0:
            w = np.where(counts == cur_n, w, good * max(seconds - restart_s, 0.0))
            w = np.maximum.accumulate(w)
        n = np.searchsorted(w, targets - 1e-9 * targets[1])
        ok = n <= len(per_gpu)
        need[t] = np.minimum(n, top)
        cost[t] = np.where(ok, cum[np.minimum(n, len(per_gpu))], np.inf)
        cost[t, 0] = 0.0
    # f[k]: least price of k chunks done by the end of the slot, running since the start.
    # A plan ends inside its last slot, when the rest of the work is done: its completion
    # time is exact, not rounded up to the slot's end (else starting later looks free).
    idx = np.arange(K + 1)
    diff = idx[:, None] - idx[None, :]
    valid = (diff >= 0) & (idx[None, :] >= 1)
    f = np.full(K + 1, np.inf)
    back = np.zeros((T, K + 1), dtype=np.int64)
    began = np.zeros((T, K + 1), dtype=bool)
    best_obj, best_t, best_k, best_n, best_s = math.inf, -1, 0, 0, 0.0
    for t in range(T):
        seconds = (bounds[t + 1] - bounds[t]) * round_s
        cum = cums[t]
        avail = len(cum) - 1
        if avail >= 1:
            before = f.copy()
            before[0] = 0.0 if not (cur_n and t > 0) else np.inf
            ns = np.arange(1, avail + 1)
            rest = work - targets[:K, None]
            busy = rest / good[ns][None, :]
            if t == 0:
                busy = busy + np.where(ns == cur_n, 0.0, restart_s)[None, :]
            spent = before[:K, None] + cum[ns][None, :] * np.minimum(busy / seconds, 1.0)
            done = weight * (bounds[t] * round_s + busy)
            objective = np.where(busy <= seconds, done + spent, np.inf)
            at = int(np.argmin(objective))
            k_at, n_at = divmod(at, avail)
            if objective.flat[at] < best_obj - 1e-9:
                best_obj, best_t, best_k = float(objective.flat[at]), t, k_at
                best_n, best_s = int(ns[n_at]), float(busy[k_at, n_at])
        total = np.where(valid, f[np.clip(diff, 0, K)], np.inf) + cost[t][None, :]
        j = np.argmin(total, axis=1)
        cont = total[idx, j]
        start = cost[t].copy()
        start[0] = np.inf
        if cur_n and t > 0:
            start[:] = np.inf
        began[t] = start < cont
        f = np.where(began[t], start, cont)
        back[t] = np.where(began[t], idx, j)
    if best_t < 0:
        return None
    sizes = np.zeros(best_t + 1, dtype=np.int64)
    sizes[best_t] = best_n
    k = best_k
    for t in range(best_t - 1, -1, -1):
        if k <= 0:
            break
        j = int(back[t][k])
        sizes[t] = need[t][j]
        k -= j
        if began[t][k + j]:
            break
    finish = bounds[best_t] + max(math.ceil(best_s / round_s - 1e-9), 1)
    return _segments(sizes, servers, board, current, bounds, finish, good)


def _segments(
    sizes: IntArray,
    servers: list[tuple[IntArray, IntArray, FloatArray]],
    board: Board,
    current: Placement,
    bounds: list[int],
    finish: int,
    good: FloatArray,
) -> SchedulePlan:
    """Turn GPUs per slot into placements (keeping earlier servers, §5.3 Fig. 9); the plan
    ends at ``finish`` (rounds from now), when the job is predicted to complete. A job that
    outlives it keeps its GPUs (compensation, applied by the policy)."""
    segments: list[Segment] = []
    prev = current
    planned = 0.0
    r0 = board.origin
    last = len(sizes) - 1
    for t in range(last + 1):
        n = int(sizes[t])
        order, free, price = servers[t]
        end = r0 + (finish if t == last else bounds[t + 1])
        placement = choose_servers(n, prev, order, free.copy(), price)
        if segments and segments[-1].placement == placement:
            segments[-1] = Segment(segments[-1].start, end, placement)
        else:
            segments.append(Segment(r0 + bounds[t], end, placement))
        planned += (float(good[n]) if n else 0.0) * (end - r0 - bounds[t])
        prev = placement
    top = float(good[-1])
    return SchedulePlan(tuple(segments), planned / (finish * top) if top > 0 else 0.0)


class ReferenceFapes(FapesPolicy):
    """FaPES with §5.1 filtering as first written: one recycling depth at a time."""

    def _filter(
        self,
        running: list[JobView],
        queued: list[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        curves: dict[str, FloatArray],
    ) -> list[JobView]:
        free = cluster.total_gpus - sum(len(current[v.name]) for v in running)
        if not queued and free <= 0:
            return []

        def busy(view: JobView) -> int:
            return len(current[view.name])

        def finishing(view: JobView) -> bool:
            rate = _at(curves[view.name], busy(view))
            return rate > 0 and view.remaining / rate <= self.round_s

        rank = _per_gpu if self.rank == "per_gpu" and queued else _achievement
        candidates = sorted(
            (v for v in running if not finishing(v)),
            key=lambda v: (rank(curves[v.name], busy(v)), v.name),
        )
        chosen = 0
        for k in range(1, len(candidates) + 1):
            cohort = queued + candidates[:k]
            share = (free + sum(busy(v) for v in candidates[:k])) // len(cohort)
            before = sum(_achievement(curves[v.name], len(current.get(v.name, ()))) for v in cohort)
            after = sum(_achievement(curves[v.name], share) for v in cohort)
            if after <= before * (1.0 + self.min_gain) + 1e-9:
                break
            chosen = k
        return candidates[:chosen]


def reference_restore_servers(
    allocation: dict[str, Placement], current: ClusterAllocation, cluster: Cluster
) -> dict[str, Placement]:
    """FaPES's :func:`restore_servers` as first written (the servers' use rebuilt for
    every job it tries to move)."""
    out = dict(allocation)
    cap = np.array(cluster.capacity(), dtype=np.int64)
    switch = np.array([s.switch for s in cluster.servers])

    def spans(placement: Placement) -> tuple[int, int]:
        servers = set(placement)
        return len(servers), len({int(switch[s]) for s in servers})

    for name in sorted(out):
        old, new = current.get(name, ()), out[name]
        if not old or len(old) != len(new) or Counter(old) == Counter(new):
            continue
        trial = dict(out)
        trial[name] = tuple(sorted(old))
        used = Counter(old)
        for other, placement in trial.items():
            if other != name:
                used.update(placement)
        over = {sid: used[sid] - int(cap[sid]) for sid in used if used[sid] > cap[sid]}
        # Victims: jobs on the over-full servers whose placement changes this round anyway.
        ok = True
        for sid, excess in sorted(over.items()):
            for other in sorted(trial):
                if excess <= 0:
                    break
                mine = Counter(trial[other])
                if other == name or not mine[sid]:
                    continue
                if Counter(current.get(other, ())) == mine:
                    continue  # it keeps its placement: not ours to move
                take = min(mine[sid], excess)
                mine[sid] -= take
                excess -= take
                trial[other] = tuple(sorted(mine.elements()))
                used[sid] -= take
            if excess > 0:
                ok = False
                break
        if not ok:
            continue
        free = cap - np.bincount(np.fromiter(used.elements(), dtype=np.int64), minlength=len(cap))
        for other in sorted(trial):
            missing = len(out[other]) - len(trial[other])
            if other == name or missing <= 0:
                continue
            # Fill on the servers it already uses, then on the fullest-fitting free server.
            mine = Counter(trial[other])
            for sid in sorted(mine, key=lambda s: (-int(free[s]), s)):
                add = int(min(free[sid], missing))
                mine[sid] += add
                free[sid] -= add
                missing -= add
            while missing > 0 and int(free.sum()) > 0:
                fits = [s for s in range(len(free)) if free[s] >= missing]
                sid = min(fits, key=lambda s: (int(free[s]), s)) if fits else int(free.argmax())
                add = int(min(free[sid], missing))
                mine[sid] += add
                free[sid] -= add
                missing -= add
            placed = tuple(sorted(mine.elements()))
            (servers, switches), (servers0, switches0) = spans(placed), spans(out[other])
            if missing > 0 or servers > servers0 or switches > switches0:
                ok = False
                break
            trial[other] = placed
        if ok:
            out = trial
    return out
