"""FaPES-Scheduler for training jobs (Zhao et al., SoCC 2024, §5): filter, prioritise, plan.

1. Filtering (§5.1): running jobs that will not finish within the next round are candidates
   for rescheduling, in increasing order of their performance achievement (goodput now over
   the best goodput the model allows); candidates are recycled one by one while sharing the
   recycled and free GPUs evenly over the cohort (queued jobs plus recycled ones) raises the
   cohort's average achievement.
2. Prioritising (§5.2): rescheduled jobs that have waited ``popup_rounds`` rounds pop up to
   the top; then queued jobs by waiting time; then recycled jobs by achievement, best first.
3. Planning (§5.3): in priority order each job gets the schedule plan that minimises its
   completion time plus the price of the GPU-rounds it uses, against the board's prices
   ``H (U/H)^(load/capacity)``, by dynamic programming over the work done in each future
   slot (eq. 6 and the DP that follows it); GPUs are taken from the cheapest servers, a
   running job's earlier servers first. Each plan goes on the board before the next job.

Compensation for estimation error (end of §5.3): a job that outlives its plan keeps its GPUs
and its occupation stays on the board; a job that finishes early leaves the board at once
(it is no longer active). Jobs co-adapt batch size and GPUs (goodput model, §4.2).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from faasml.cluster.board import Board
from faasml.cluster.policies._base import ClusterPolicy, FloatArray, _pack
from faasml.cluster.records import (
    Cluster,
    ClusterAllocation,
    Decision,
    JobView,
    Placement,
    SchedulePlan,
    Segment,
)
from faasml.exceptions import ConfigError


class FapesPolicy(ClusterPolicy):
    """FaPES's filter → prioritise → plan scheduler with its forward-looking board."""

    name = "fapes"
    adaptive = True

    def __init__(
        self,
        round_s: float = 60.0,
        *,
        slots: int = 24,
        chunks: int = 48,
        popup_rounds: int = 3,
        board_rounds: int = 480,
        price_ratio_cap: float = 64.0,
    ) -> None:
        super().__init__(round_s)
        for label, value, least in (
            ("slots", slots, 1),
            ("chunks", chunks, 2),
            ("popup_rounds", popup_rounds, 1),
            ("board_rounds", board_rounds, 1),
        ):
            if value < least:
                raise ConfigError(f"the value of {label} is {value}, but must be >= {least}")
        if price_ratio_cap < 1:
            raise ConfigError(
                f"the value of price_ratio_cap is {price_ratio_cap}, but must be >= 1"
            )
        self.slots = slots
        self.chunks = chunks
        self.popup_rounds = popup_rounds
        self.board_rounds = board_rounds
        self.price_ratio_cap = price_ratio_cap

    # -- the round ------------------------------------------------------------------------
    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        r0 = int(round(now / self.round_s))
        curves = {v.name: self.curve(v, cluster) for v in jobs}
        best = {n: float(c.max()) for n, c in curves.items()}

        def achievement(view: JobView, gpus: int) -> float:
            top = best[view.name]
            curve = curves[view.name]
            return float(curve[min(gpus, len(curve) - 1)]) / top if top > 0 else 0.0

        running = [v for v in jobs if current.get(v.name)]
        queued = [v for v in jobs if not current.get(v.name)]
        cohort_running = self._filter(running, queued, cluster, current, curves, achievement)
        cohort = set(v.name for v in queued) | set(v.name for v in cohort_running)

        board = Board(cluster, r0, self.board_rounds)
        for view in running:
            if view.name in cohort:
                continue
            plan = view.plan
            if plan is None or plan.end <= r0 + 1:
                # Outlived its plan (or never had one): keep its GPUs, stay on the board.
                board.occupy(current[view.name], r0, r0 + 2)
            else:
                board.add_plan(plan)

        order = self._prioritise(queued, cohort_running, achievement, current)
        plans: dict[str, SchedulePlan] = {}
        bounds = self._bounds(jobs, curves)
        for view in order:
            plan = self._plan(view, curves[view.name], board, r0, current.get(view.name, ()), bounds)
            if plan is not None:
                plans[view.name] = plan
                board.add_plan(plan)

        wanted: dict[str, Placement] = {}
        for view in running:
            if view.name in cohort:
                continue
            plan = view.plan
            at = plan.placement_at(r0) if plan is not None else None
            wanted[view.name] = current[view.name] if at is None else at
        for name, plan in plans.items():
            at = plan.placement_at(r0)
            if at:
                wanted[name] = at
        return Decision(_repair(wanted, cluster, order, jobs), plans)

    # -- §5.1 filtering -------------------------------------------------------------------
    def _filter(
        self,
        running: list[JobView],
        queued: list[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        curves: dict[str, FloatArray],
        achievement: object,
    ) -> list[JobView]:
        ach = achievement  # callable(view, gpus) -> float
        free = cluster.total_gpus - sum(len(current[v.name]) for v in running)

        def finishing(view: JobView) -> bool:
            rate = float(curves[view.name][min(len(current[view.name]), len(curves[view.name]) - 1)])
            return rate > 0 and view.remaining / rate <= self.round_s

        candidates = sorted(
            (v for v in running if not finishing(v)),
            key=lambda v: (ach(v, len(current[v.name])), v.name),  # type: ignore[operator]
        )
        best_gain, best_k = -math.inf, 0
        for k in range(len(candidates) + 1):
            cohort = queued + candidates[:k]
            if not cohort:
                continue
            pool = free + sum(len(current[v.name]) for v in candidates[:k])
            share = pool // len(cohort)
            before = sum(
                ach(v, len(current.get(v.name, ()))) for v in cohort  # type: ignore[operator]
            ) / len(cohort)
            after = sum(ach(v, share) for v in cohort) / len(cohort)  # type: ignore[operator]
            gain = after - before
            if gain > best_gain + 1e-12:
                best_gain, best_k = gain, k
            elif k > best_k:
                break
        return candidates[:best_k] if best_gain > 0 else []

    # -- §5.2 prioritising ----------------------------------------------------------------
    def _prioritise(
        self,
        queued: list[JobView],
        recycled: list[JobView],
        achievement: object,
        current: ClusterAllocation,
    ) -> list[JobView]:
        ach = achievement
        popped = [v for v in queued if v.started and v.waiting_rounds >= self.popup_rounds]
        popped.sort(key=lambda v: (-v.waiting_rounds, v.job.arrival_s, v.name))
        fresh = [v for v in queued if v not in popped]
        fresh.sort(key=lambda v: (-v.waiting_rounds, v.job.arrival_s, v.name))
        rest = sorted(
            recycled,
            key=lambda v: (-ach(v, len(current[v.name])), v.name),  # type: ignore[operator]
        )
        return popped + fresh + rest

    # -- §5.3 planning --------------------------------------------------------------------
    def _bounds(self, jobs: Sequence[JobView], curves: dict[str, FloatArray]) -> tuple[float, float]:
        """H and U: the least and largest completion time over the jobs, with all GPUs a job
        can use and with one GPU (FaPES §5.3, "bound values")."""
        low, high = math.inf, 0.0
        for v in jobs:
            curve = curves[v.name]
            if len(curve) < 2 or curve[1] <= 0:
                continue
            low = min(low, v.remaining / float(curve.max()))
            high = max(high, v.remaining / float(curve[1]))
        if not math.isfinite(low) or high <= 0:
            return 1.0, 1.0
        return max(low, 1e-9), max(high, low)

    def _plan(
        self,
        view: JobView,
        curve: FloatArray,
        board: Board,
        r0: int,
        current: Placement,
        bounds: tuple[float, float],
    ) -> SchedulePlan | None:
        """The schedule plan of least completion time plus resource price (FaPES eq. 6)."""
        work = view.remaining
        top = len(curve) - 1
        if top < 1 or work <= 0 or curve[top] <= 0:
            return None
        good = np.maximum.accumulate(curve)
        # Slot length: enough slots to finish at the middle of the job's time range.
        fast = work / float(good[top])
        slow = work / float(good[1]) if good[1] > 0 else fast
        est = math.sqrt(fast * slow)
        m = max(1, math.ceil(2.0 * est / (self.slots * self.round_s)))
        low_b, high_b = bounds
        ratio = min(max(high_b / low_b, 1.0), self.price_ratio_cap)
        # Price per GPU-round in seconds of completion time: a full server costs a round.
        unit_high = self.round_s
        unit_low = unit_high / ratio
        K = self.chunks
        q = work / K
        T = self.slots
        cost = np.full((T, K + 1), np.inf)
        need = np.zeros((T, K + 1), dtype=np.int64)
        slot_servers: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        cur_n = len(current)
        for t in range(T):
            free = board.free_in(t * m, (t + 1) * m)
            price = board.price(free, unit_low, unit_high) * m
            order = np.lexsort((-free, price))
            slot_servers.append((order, free, price))
            per_gpu = np.repeat(price[order], free[order])[:top]
            avail = len(per_gpu)
            cum = np.concatenate([[0.0], np.cumsum(per_gpu)])
            seconds = m * self.round_s
            w = good * seconds
            if t == 0:
                w = w.copy()
                w[np.arange(len(w)) != cur_n] = good[np.arange(len(w)) != cur_n] * max(
                    seconds - self._restart_guess(), 0.0
                )
                w = np.maximum.accumulate(w)
            targets = np.arange(K + 1) * q
            n = np.searchsorted(w, targets - 1e-9 * q)
            ok = n <= avail
            n = np.minimum(n, top)
            need[t] = n
            cost[t] = np.where(ok, cum[np.minimum(n, avail)], np.inf)
            cost[t, 0] = 0.0
        # DP over slots: f[t][k] = least price to do k chunks by the end of slot t.
        f = cost[0].copy()
        back = np.zeros((T, K + 1), dtype=np.int64)
        back[0] = np.arange(K + 1)
        idx = np.arange(K + 1)
        diff = idx[:, None] - idx[None, :]  # k - j
        valid = diff >= 0
        best_obj, best_t = math.inf, -1
        for t in range(T):
            if t > 0:
                prev = np.where(valid, f[np.clip(diff, 0, K)], np.inf)
                total = prev + cost[t][None, :]
                j = np.argmin(total, axis=1)
                f = total[idx, j]
                back[t] = j
            if np.isfinite(f[K]):
                obj = (t + 1) * m * self.round_s + f[K]
                if obj < best_obj - 1e-9:
                    best_obj, best_t = obj, t
        if best_t < 0:
            return None
        # Reconstruct chunks per slot, then GPUs per slot, then placements.
        chunks_per_slot = np.zeros(best_t + 1, dtype=np.int64)
        k = K
        for t in range(best_t, -1, -1):
            j = int(back[t][k]) if t > 0 else k
            chunks_per_slot[t] = j
            k -= j
        segments: list[Segment] = []
        prev: Placement = current
        planned_goodput = 0.0
        for t in range(best_t + 1):
            n = int(need[t][chunks_per_slot[t]]) if chunks_per_slot[t] > 0 else 0
            order, free, price = slot_servers[t]
            placement = _choose_servers(n, prev, order, free.copy(), price)
            start, end = r0 + t * m, r0 + (t + 1) * m
            if t == best_t:
                end = r0 + 10**9  # compensation: keep the last placement until it finishes
            if segments and segments[-1].placement == placement:
                segments[-1] = Segment(segments[-1].start, end, placement)
            else:
                segments.append(Segment(start, end, placement))
            planned_goodput += float(good[n]) if n else 0.0
            prev = placement
        top_good = float(good[top])
        ach = planned_goodput / ((best_t + 1) * top_good) if top_good > 0 else 0.0
        return SchedulePlan(tuple(segments), ach)

    def _restart_guess(self) -> float:
        from faasml.cluster.simulator import TABLE2_RESTART_S

        return TABLE2_RESTART_S


def _choose_servers(
    n: int, prev: Placement, order: np.ndarray, free: np.ndarray, price: np.ndarray
) -> Placement:
    """``n`` GPUs: keep the previous servers (dropping the dearest first when scaling down),
    then add the cheapest (FaPES §5.3, Fig. 9)."""
    if n <= 0:
        return ()
    keep: list[int] = []
    held = Counter(prev)
    for sid in sorted(held, key=lambda s: (price[s], -held[s], s)):
        take = int(min(held[sid], free[sid], n - len(keep)))
        if take > 0:
            keep.extend([sid] * take)
            free[sid] -= take
        if len(keep) == n:
            break
    for sid in order:
        if len(keep) == n:
            break
        take = int(min(free[sid], n - len(keep)))
        if take > 0:
            keep.extend([int(sid)] * take)
            free[sid] -= take
    return tuple(sorted(keep))


def _repair(
    wanted: dict[str, Placement],
    cluster: Cluster,
    order: Sequence[JobView],
    jobs: Sequence[JobView],
) -> dict[str, Placement]:
    """Resolve conflicts between stale plans: jobs keep their wanted servers in priority
    order where they are free; the rest are re-packed on free GPUs (or wait)."""
    rank = {v.name: i for i, v in enumerate(order)}
    names = sorted(wanted, key=lambda n: (n in rank, rank.get(n, 0), n))
    free = np.array(cluster.capacity(), dtype=np.int64)
    switch = np.array([s.switch for s in cluster.servers])
    out: dict[str, Placement] = {}
    conflicted: list[str] = []
    for name in names:
        placement = wanted[name]
        need = Counter(placement)
        if all(free[sid] >= c for sid, c in need.items()):
            for sid, c in need.items():
                free[sid] -= c
            out[name] = placement
        else:
            conflicted.append(name)
    for name in conflicted:
        n = len(wanted[name])
        if int(free.sum()) >= n:
            out[name] = _pack(n, free, switch)
    return out
