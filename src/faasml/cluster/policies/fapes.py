"""FaPES-Scheduler for training jobs (Zhao et al., SoCC 2024, §5): filter, prioritise, plan.

1. Filtering (§5.1): running jobs that will not finish within the next round are candidates,
   ranked by performance achievement; they are recycled one by one while sharing the free
   and recycled GPUs evenly over the cohort (queued jobs plus recycled ones) still raises
   the cohort's average achievement (goodput over the best goodput the model allows) by
   ``min_gain``. Candidates are ranked by increasing achievement (the paper) when no job
   is queued — idle GPUs go to the jobs furthest from their best — and, while jobs queue,
   by goodput per GPU relative to the job's best, so that the jobs using their GPUs least
   efficiently give them up first (``rank="per_gpu"``; ``rank="achievement"`` always uses
   the paper's ranking).
2. Prioritising (§5.2): rescheduled jobs that waited ``popup_rounds`` rounds pop up first;
   then queued jobs by waiting time (ties: least remaining time first); then recycled jobs,
   higher achievement first.
3. Planning (§5.3): each job in turn gets the plan of least completion time plus price
   (:func:`faasml.cluster.planning.plan_schedule`) against the board, which it then joins.
   Our addition: each job's completion time is weighted by its rank from the longest active
   job (shortest = most), ``(rank / mean rank) ** srpt`` — the marginal weights of heSRPT
   (Berg et al., 2020) for least mean completion time — so short jobs buy more GPUs and
   long ones leave room; ``srpt=0`` weighs all jobs alike (eq. 6 as printed). The default
   exponent 2 is a measured choice, not a derived one (its measurements:
   benchmarks/results/cluster_policies.md).
4. Back-filling (our addition): GPUs that no plan uses in the current round (reserved for
   later rounds, or left by fragmentation) go for this round to the jobs whose weighted
   Pollux fitness (−1/speedup) they raise most, queued jobs first; a job back-filled in the
   last round keeps those GPUs while they stay free, so it does not restart. Restarts are
   weighed (``backfill_restarts`` > 0): every choice but a running job's current GPUs (its
   plan's, or its plan's plus last round's back-fill still free) loses a restart out of
   the round, and back-filled GPUs lose the restart of their taking back, spread over the
   rounds the board leaves them free (not charged to a job keeping last round's back-fill).
   A job counts as keeping its GPUs when its placement after :func:`restore_servers` (run
   before back-filling, and again after it) is exactly what it holds.
5. Placement (ours): a job whose GPU count is unchanged takes its servers back from the jobs
   that restart anyway (:func:`restore_servers`), and every plan follows the servers its job
   got (:func:`follow_plan`), so the swap is not redone every round.

Compensation for estimation error (end of §5.3): a job that outlives its plan keeps its last
placement; one that finishes early leaves the board at once. Rescheduling never preempts a
running job: it holds one of its GPUs until its turn. Jobs co-adapt batch size and GPUs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from faasml.cluster.board import Board
from faasml.cluster.planning import FOREVER, Pricing, plan_schedule
from faasml.cluster.policies._base import ClusterPolicy, FloatArray, greedy_grow, pack
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


def _spare_rounds(board: Board, free: npt.NDArray[np.int64], cap: int = 60) -> float:
    """Median number of rounds (from this one, at most ``cap``) that the GPUs free now stay
    free on the board: how long a back-fill lasts before a plan takes its GPUs back."""
    rows = board.capacity[None, :] - board.by_round[1:cap, :]
    spans: list[int] = []
    for sid in np.flatnonzero(free > 0):
        col = rows[:, sid]
        for j in range(1, int(free[sid]) + 1):
            short = np.flatnonzero(col < j)
            spans.append(1 + (int(short[0]) if len(short) else len(col)))
    return float(np.median(spans)) if spans else 1.0


def _held_back(planned: Placement, cur: Placement, free: npt.NDArray[np.int64]) -> bool:
    """Whether ``cur`` is ``planned`` plus GPUs that are free now (last round's back-fill)."""
    extra = Counter(cur) - Counter(planned)
    return (
        len(cur) > len(planned)
        and sum(extra.values()) == len(cur) - len(planned)
        and all(free[sid] >= c for sid, c in extra.items())
    )


def _speedup_value(curve: FloatArray, weight: float) -> Callable[[float], float]:
    """Minus the inverse speedup of a goodput (the p = -1 fitness of Pollux §4.2), times
    the job's weight."""
    base = weight * (float(curve[1]) if len(curve) > 1 else 1.0)
    return lambda g: -base / g if g > 0 else -1e30


def _at(curve: FloatArray, gpus: int) -> float:
    return float(curve[min(gpus, len(curve) - 1)])


def _finishing(curve: FloatArray, gpus: int, remaining: float, round_s: float) -> bool:
    """Whether a job on ``gpus`` finishes its ``remaining`` work within one round."""
    rate = _at(curve, gpus)
    return rate > 0 and remaining / rate <= round_s


def _achievement(curve: FloatArray, gpus: int) -> float:
    """Goodput on ``gpus`` over the best goodput the model allows (FaPES §5.1)."""
    top = float(curve.max())
    return _at(curve, gpus) / top if top > 0 else 0.0


def _achievement_at(
    views: Sequence[JobView], curves: dict[str, FloatArray], gpus: npt.NDArray[np.int64]
) -> FloatArray:
    """:func:`_achievement` of every job (rows) on each GPU count of ``gpus`` (columns)."""
    rows = [curves[v.name] for v in views]
    lengths = np.array([len(c) for c in rows], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    tops = np.array([float(c.max()) for c in rows])
    flat = np.concatenate(rows)
    at = flat[offsets[:, None] + np.minimum(gpus[None, :], lengths[:, None] - 1)]
    safe = np.where(tops > 0, tops, 1.0)
    return np.where(tops[:, None] > 0, at / safe[:, None], 0.0)


def _per_gpu(curve: FloatArray, gpus: int) -> float:
    """Goodput per GPU on ``gpus`` over the best goodput per GPU."""
    if gpus <= 0 or len(curve) < 2:
        return 0.0
    per = curve[1:] / np.arange(1, len(curve))
    top = float(per.max())
    return _at(curve, gpus) / gpus / top if top > 0 else 0.0


def _repair(
    wanted: dict[str, Placement], cluster: Cluster, priority: list[str]
) -> dict[str, Placement]:
    """Resolve conflicts between plans made at different rounds: jobs outside the cohort,
    then the cohort in priority order, keep their servers where free; the rest are packed
    on free GPUs, or wait. (Serving first the jobs outside the cohort that keep their
    placement was tried: it queued jobs longer where few GPUs are left to training —
    benchmarks/results/fapes_loans.md; :func:`restore_servers` saves those restarts without
    that.)"""
    rank = {name: i for i, name in enumerate(priority)}
    names = sorted(wanted, key=lambda n: (n in rank, rank.get(n, 0), n))
    free = np.array(cluster.capacity(), dtype=np.int64)
    switch = np.array([s.switch for s in cluster.servers])
    out: dict[str, Placement] = {}
    conflicted: list[str] = []
    for name in names:
        need = Counter(wanted[name])
        if all(free[sid] >= c for sid, c in need.items()):
            for sid, c in need.items():
                free[sid] -= c
            out[name] = wanted[name]
        else:
            conflicted.append(name)
    for name in conflicted:
        if int(free.sum()) >= len(wanted[name]):
            out[name] = pack(len(wanted[name]), free, switch)
    return out


def follow_plan(
    plan: SchedulePlan,
    r0: int,
    allocated: Placement,
    settled: Placement,
    cluster: Cluster,
) -> SchedulePlan:
    """``plan`` with the servers it wants at round ``r0`` replaced by those the job got with
    the same GPU count: ``allocated`` (this round's decision) or else ``settled`` (before
    back-filling added GPUs for this round only). Every segment from ``r0`` on that holds
    the replaced GPUs gets the job's own instead, where the servers have room; ``plan``
    itself is returned when nothing changes."""
    at = plan.placement_at(r0)
    if not at:
        return plan
    if len(allocated) == len(at):
        got = allocated
    elif len(settled) == len(at):
        got = settled
    else:
        return plan
    removed = Counter(at) - Counter(got)
    if not removed:
        return plan
    added = Counter(got) - Counter(at)
    cap = cluster.capacity()
    segments: list[Segment] = []
    for seg in plan.segments:
        mine = Counter(seg.placement)
        if seg.end > r0 and all(mine[s] >= c for s, c in removed.items()):
            swapped = mine - removed + added
            if all(c <= cap[s] for s, c in swapped.items()):
                seg = Segment(seg.start, seg.end, tuple(sorted(swapped.elements())))
        segments.append(seg)
    return SchedulePlan(tuple(segments), plan.achievement)


def restore_servers(
    allocation: dict[str, Placement], current: ClusterAllocation, cluster: Cluster
) -> dict[str, Placement]:
    """A job whose GPU count is unchanged but whose servers changed (a restart that buys it
    nothing) takes its servers back when the jobs now on them restart anyway — they did not
    hold those GPUs last round — and each of them can move its GPUs there to the GPUs so
    freed (or idle ones) without spanning more servers or switches. Placement is ours, not
    the paper's: FaPES §5.3 keeps a job's servers only within its own plan (Fig. 9).

    The servers' use and the jobs on each server are kept up to date as jobs move, so a
    job's attempt costs the servers and jobs it touches, not the whole allocation."""
    out = dict(allocation)
    cap = np.array(cluster.capacity(), dtype=np.int64)
    switch = np.array([s.switch for s in cluster.servers])
    used = np.zeros(len(cap), dtype=np.int64)
    on: list[set[str]] = [set() for _ in range(len(cap))]
    for job, placement in out.items():
        for sid, count in Counter(placement).items():
            used[sid] += count
            on[sid].add(job)

    def spans(placement: Placement) -> tuple[int, int]:
        servers = set(placement)
        return len(servers), len({int(switch[s]) for s in servers})

    for name in sorted(out):
        old, new = current.get(name, ()), out[name]
        if not old or len(old) != len(new) or Counter(old) == Counter(new):
            continue
        trial: dict[str, Placement] = {name: tuple(sorted(old))}
        use = used.copy()
        for sid, count in Counter(new).items():
            use[sid] -= count
        for sid, count in Counter(old).items():
            use[sid] += count
        over = {int(sid): int(use[sid] - cap[sid]) for sid in np.flatnonzero(use > cap)}
        # Victims: jobs on the over-full servers whose placement changes this round anyway.
        ok = True
        for sid, excess in sorted(over.items()):
            for other in sorted(on[sid]):
                if excess <= 0:
                    break
                mine = Counter(trial.get(other, out[other]))
                if other == name or not mine[sid]:
                    continue
                if Counter(current.get(other, ())) == mine:
                    continue  # it keeps its placement: not ours to move
                take = min(mine[sid], excess)
                mine[sid] -= take
                excess -= take
                trial[other] = tuple(sorted(mine.elements()))
                use[sid] -= take
            if excess > 0:
                ok = False
                break
        if not ok:
            continue
        free = cap - use
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
                fits = np.flatnonzero(free >= missing)
                sid = int(fits[np.argmin(free[fits])]) if len(fits) else int(free.argmax())
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
            for job, placement in trial.items():
                for sid, count in Counter(out[job]).items():
                    used[sid] -= count
                    on[sid].discard(job)
                for sid, count in Counter(placement).items():
                    used[sid] += count
                    on[sid].add(job)
                out[job] = placement
    return out
