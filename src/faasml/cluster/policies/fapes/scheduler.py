"""The FaPES scheduler: filter, prioritise, plan, back-fill (the package docstring)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from faasml.cluster.board import Board
from faasml.cluster.planning import FOREVER, Pricing, plan_schedule
from faasml.cluster.policies._base import ClusterPolicy, FloatArray, greedy_grow, pack
from faasml.cluster.policies.fapes.curves import (
    _achievement,
    _achievement_at,
    _finishing,
    _held_back,
    _per_gpu,
    _spare_rounds,
    _speedup_value,
)
from faasml.cluster.policies.fapes.placement import _repair, follow_plan, restore_servers
from faasml.cluster.records import (
    TABLE2_RESTART_S,
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
        slots: int = 12,
        chunks: int = 32,
        popup_rounds: int = 3,
        board_rounds: int = 480,
        price_ratio_cap: float = 4.0,
        min_gain: float = 0.1,
        rank: str = "per_gpu",
        restart_s: float = TABLE2_RESTART_S,
        backfill: bool = True,
        srpt: float = 2.0,
        backfill_restarts: float = 1.0,
        keep_servers: bool = True,
        sticky: bool = True,
        horizon: bool = True,
        follow_plans: bool = True,
        yield_planless: bool = True,
    ) -> None:
        super().__init__(round_s, restart_s)
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
        if srpt < 0:
            raise ConfigError(f"the value of srpt is {srpt}, but must be >= 0")
        if min_gain < 0:
            raise ConfigError(f"the value of min_gain is {min_gain}, but must be >= 0")
        if rank not in ("per_gpu", "achievement"):
            raise ConfigError(f"the value of rank is {rank!r}, but must be per_gpu or achievement")
        self.slots = slots
        self.chunks = chunks
        self.popup_rounds = popup_rounds
        self.board_rounds = board_rounds
        self.price_ratio_cap = price_ratio_cap
        self.min_gain = min_gain
        self.rank = rank
        self.backfill = backfill
        self.srpt = srpt
        self.backfill_restarts = backfill_restarts
        """Restarts a back-filled running job is charged (0: back-filling ignores them, and
        ``sticky`` and ``horizon`` do nothing)."""
        self.keep_servers = keep_servers
        """Whether a job whose GPU count is unchanged takes its servers back from jobs that
        restart anyway (:func:`restore_servers`)."""
        self.follow_plans = follow_plans
        """Whether every plan follows the servers its job got (:func:`follow_plan`); off,
        a plan keeps the servers it was made with and the swap is redone every round
        (benchmarks/results/fapes_loans.md measures both)."""
        self.yield_planless = yield_planless
        """Whether running jobs without a plan join the cohort every round and yield their
        GPUs to the queued jobs planned before them (:meth:`_planless`); off, such a job
        keeps its GPUs until it ends while the board shows it for two rounds, and queued
        jobs planned into them can wait for hours (benchmarks/results/fapes_loans.md)."""
        self.sticky = sticky
        """Whether back-filling charges a restart for every choice but keeping last round's
        back-filled GPUs that are still free (such a job is not charged ``horizon``'s
        take-back restart). Does nothing when ``backfill_restarts`` is 0."""
        self.horizon = horizon
        """Whether back-filling charges the restart of taking the GPUs back, spread over the
        rounds the board leaves them free (not to a job ``sticky`` charges). Does nothing
        when ``backfill_restarts`` is 0."""

    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        r0 = round(now / self.round_s)
        curves = {v.name: self.curve(v, cluster) for v in jobs}
        running = [v for v in jobs if current.get(v.name)]
        queued = [v for v in jobs if not current.get(v.name)]
        recycled = self._filter(running, queued, cluster, current, curves)
        planless = self._planless(running, recycled, current, curves)
        cohort = {v.name for v in queued} | {v.name for v in recycled + planless}

        board = Board(cluster, r0, self.board_rounds)
        for view in running:
            if view.name not in cohort:
                if view.plan is None or view.plan.end <= r0 + 1:
                    board.occupy(current[view.name], r0, r0 + 2)  # outlived its plan
                else:
                    board.add_plan(view.plan)
        held = {v.name: current[v.name][:1] for v in recycled}
        for placement in held.values():
            board.occupy(placement, r0, r0 + 1)

        order = self._prioritise(queued, recycled + planless, current, curves)
        pricing = self._pricing(jobs, curves, cluster)
        plans: dict[str, SchedulePlan] = {}
        weights = self._weights(jobs, curves)
        for view in order:
            if view.name in held:
                board.occupy(held[view.name], r0, r0 + 1, sign=-1)
            plan = plan_schedule(
                curves[view.name],
                view.remaining,
                board,
                current.get(view.name, ()),
                pricing,
                round_s=self.round_s,
                restart_s=self.restart_s,
                slots=self.slots,
                chunks=self.chunks,
                weight=weights[view.name],
            )
            if plan is None and view.name in held:
                plan = SchedulePlan((Segment(r0, r0 + FOREVER, held[view.name]),), 0.0)
            if plan is not None:
                plans[view.name] = plan
                board.add_plan(plan)

        wanted: dict[str, Placement] = {}
        for view in running:
            if view.name not in cohort:
                at = view.plan.placement_at(r0) if view.plan is not None else None
                wanted[view.name] = current[view.name] if at is None else at
        for name, plan in plans.items():
            at = plan.placement_at(r0)
            if at:
                wanted[name] = at
        allocation = _repair(wanted, cluster, [v.name for v in order])
        if self.keep_servers:
            # Before back-filling, so that a job its plan merely moved and that gets its
            # servers back counts as keeping its GPUs (back-filling charges it the restart).
            allocation = restore_servers(allocation, current, cluster)
        settled = allocation
        if self.backfill:
            allocation = self._backfill(jobs, allocation, current, curves, cluster, weights, board)
            if self.keep_servers:
                allocation = restore_servers(allocation, current, cluster)
        # The plans follow the servers the jobs got (restored, or packed by the repair), so
        # that the next round wants them again and the board counts them.
        kept = {v.name: v.plan for v in running if v.name not in cohort and v.plan is not None}
        for name, plan in ({**kept, **plans} if self.follow_plans else {}).items():
            moved = follow_plan(plan, r0, allocation.get(name, ()), settled.get(name, ()), cluster)
            if moved is not plan:
                plans[name] = moved
        return Decision(allocation, plans)

    def _backfill(
        self,
        jobs: Sequence[JobView],
        allocation: dict[str, Placement],
        current: ClusterAllocation,
        curves: dict[str, FloatArray],
        cluster: Cluster,
        weights: dict[str, float],
        board: Board,
    ) -> dict[str, Placement]:
        """GPUs no plan uses this round go, for this round only, to the jobs whose speedup
        they raise most (queued jobs first), so that reservations for later rounds leave no
        GPU idle now. A job back-filled last round keeps the same GPUs where they are still
        free (no restart)."""
        free = np.array(cluster.capacity(), dtype=np.int64)
        for placement in allocation.values():
            np.subtract.at(free, list(placement), 1)
        spare = int(free.sum())
        if spare <= 0:
            return allocation
        counts = {v.name: len(allocation.get(v.name, ())) for v in jobs}
        value = {v.name: _speedup_value(curves[v.name], weights[v.name]) for v in jobs}
        grow_curves = dict(curves)
        if self.backfill_restarts > 0:
            # Growing a job that would otherwise keep its GPUs costs it a restart now and
            # another when the back-filled GPUs are taken back: weigh both.
            keep = max(1.0 - self.backfill_restarts * self.restart_s / self.round_s, 0.0)
            back = 1.0
            if self.horizon:
                rounds = _spare_rounds(board, free)
                back = max(1.0 - self.restart_s / (rounds * self.round_s), 0.0)
            for v in jobs:
                n = counts[v.name]
                planned, held = allocation.get(v.name, ()), current.get(v.name, ())
                if n and planned == held:
                    curve = np.array(curves[v.name])
                    curve[n + 1 :] *= keep * back
                    grow_curves[v.name] = curve
                elif (
                    self.sticky
                    and n
                    and len(held) < len(curves[v.name])
                    and _held_back(planned, held, free)
                ):
                    # Back-filled last round, its extra GPUs still free: keeping them is
                    # the one choice without a restart (Pollux's re-allocation factor).
                    curve = np.array(curves[v.name]) * keep
                    curve[len(held)] = curves[v.name][len(held)]
                    grow_curves[v.name] = curve
                elif back < 1.0:
                    # It restarts now anyway; the back-filled GPUs cost it one restart more
                    # when a plan takes them back, spread over the rounds they stay free.
                    curve = np.array(curves[v.name])
                    curve[n + 1 :] *= back
                    grow_curves[v.name] = curve
        grown = greedy_grow(counts, grow_curves, spare, value, cluster.gpus_per_server)
        out = dict(allocation)
        todo: list[str] = []
        for name in sorted(n for n in grown if grown[n] > counts[n]):
            cur = Counter(current.get(name, ()))
            extra = cur - Counter(allocation.get(name, ()))
            if (
                sum(cur.values()) == grown[name]
                and sum(extra.values()) == grown[name] - counts[name]
                and all(free[sid] >= c for sid, c in extra.items())
            ):
                for sid, c in extra.items():
                    free[sid] -= c
                out[name] = current[name]
            else:
                todo.append(name)
        switch = np.array([s.switch for s in cluster.servers])
        for name in todo:
            more = pack(grown[name] - counts[name], free, switch)
            out[name] = tuple(sorted(allocation.get(name, ()) + more))
        return out

    def _planless(
        self,
        running: list[JobView],
        recycled: list[JobView],
        current: ClusterAllocation,
        curves: dict[str, FloatArray],
    ) -> list[JobView]:
        """Running jobs without a plan that will not finish within the round (started by
        back-filling when planning found them no plan, or whose plan a reclaim dropped), when
        ``yield_planless`` is on. They join the cohort and are planned with the recycled
        jobs, after the queued ones (§5.2), but hold no GPU until their turn: their GPUs
        were back-filled, for one round only, so a queued job planned before them may take
        them now. Without a plan they are back-filled again, on their own GPUs where those
        stay free (no restart). Before, such a job kept its GPUs until it ended while the
        board showed it for two rounds only, so a queued job was planned two rounds ahead,
        every round, for hours (benchmarks/results/fapes_loans.md)."""
        if not self.yield_planless:
            return []
        taken = {v.name for v in recycled}
        return [
            v
            for v in running
            if v.plan is None
            and v.name not in taken
            and not _finishing(curves[v.name], len(current[v.name]), v.remaining, self.round_s)
        ]

    def _weights(self, jobs: Sequence[JobView], curves: dict[str, FloatArray]) -> dict[str, float]:
        """Weight of each job's completion time: its rank from the longest (heSRPT)."""

        def alone(v: JobView) -> float:
            top = float(curves[v.name].max())
            return v.remaining / top if top > 0 else math.inf

        order = sorted(jobs, key=lambda v: (-alone(v), v.name))
        mean = (len(order) + 1) / 2
        return {v.name: ((i + 1) / mean) ** self.srpt for i, v in enumerate(order)}

    # -- §5.1 filtering -------------------------------------------------------------------
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
            return []  # no queued job and no idle GPU: nothing to gain

        def busy(view: JobView) -> int:
            return len(current[view.name])

        def finishing(view: JobView) -> bool:
            return _finishing(curves[view.name], busy(view), view.remaining, self.round_s)

        rank = _per_gpu if self.rank == "per_gpu" and queued else _achievement
        candidates = sorted(
            (v for v in running if not finishing(v)),
            key=lambda v: (rank(curves[v.name], busy(v)), v.name),
        )
        if not candidates:
            return []
        # Recycling the first k candidates (k = 1, 2, ...) shares the free and recycled GPUs
        # evenly over the cohort (queued + recycled); all k at once, summed in cohort order.
        cohort = queued + candidates
        q = len(queued)
        k = np.arange(1, len(candidates) + 1)
        shares = (free + np.cumsum([busy(v) for v in candidates])) // (q + k)
        now = [_achievement(curves[v.name], len(current.get(v.name, ()))) for v in cohort]
        before = np.cumsum(now)[q + k - 1]
        after = np.cumsum(_achievement_at(cohort, curves, shares), axis=0)[q + k - 1, k - 1]
        stop = np.flatnonzero(after <= before * (1.0 + self.min_gain) + 1e-9)
        return candidates[: int(stop[0]) if len(stop) else len(candidates)]

    # -- §5.2 prioritising ----------------------------------------------------------------
    def _prioritise(
        self,
        queued: list[JobView],
        recycled: list[JobView],
        current: ClusterAllocation,
        curves: dict[str, FloatArray],
    ) -> list[JobView]:
        def length(view: JobView) -> float:
            top = float(curves[view.name].max())
            return view.remaining / top if top > 0 else math.inf

        popped = [v for v in queued if v.started and v.waiting_rounds >= self.popup_rounds]
        popped.sort(key=lambda v: (-v.waiting_rounds, v.job.arrival_s, v.name))
        fresh = [v for v in queued if v not in popped]
        fresh.sort(key=lambda v: (-v.waiting_rounds, length(v), v.job.arrival_s, v.name))
        rest = sorted(
            recycled,
            key=lambda v: (-_achievement(curves[v.name], len(current[v.name])), v.name),
        )
        return popped + fresh + rest

    # -- §5.3 prices ----------------------------------------------------------------------
    def _pricing(
        self, jobs: Sequence[JobView], curves: dict[str, FloatArray], cluster: Cluster
    ) -> Pricing:
        """Board prices ``H (U/H)^(load/capacity)``: U/H is the ratio of the largest
        completion time (one GPU) to the least (all the GPUs a job can use) over the active
        jobs, capped at ``price_ratio_cap``. The paper leaves the unit implicit; an idle
        GPU-round here costs the delay it imposes on the other active jobs, t̂ × (jobs − 1)
        / GPUs seconds, so prices and completion times add up."""
        low, high = math.inf, 0.0
        for v in jobs:
            curve = curves[v.name]
            if len(curve) > 1 and curve[1] > 0:
                low = min(low, v.remaining / float(curve.max()))
                high = max(high, v.remaining / float(curve[1]))
        ratio = high / low if math.isfinite(low) and low > 0 else 1.0
        ratio = min(max(ratio, 1.0), self.price_ratio_cap)
        idle = self.round_s * max(len(jobs) - 1, 1) / cluster.total_gpus
        return Pricing(idle, idle * ratio)
