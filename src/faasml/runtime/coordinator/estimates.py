"""What a segment will take and cost, and what it may spend: the budget guard's arithmetic.

A segment's predicted time is its rounds × seconds per round (measured on this allocation,
else the performance model's t'(θ)/k, CE-scaling eq. 2), plus the fixed time a segment spends
outside its rounds (loading its partition, reading and writing checkpoints: measured), plus a
cold start where no warm instance is likely; its cost is n functions for that time (eq. 4).
A segment reserves up to RESERVE_FACTOR × that prediction and its functions are stopped when
they would bill more, so the reservations of the running segments bound every dollar still to
be billed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from faasml.catalog import Catalog, FunctionPlatform
from faasml.runtime.platforms.contract import Billed
from faasml.types import Allocation

BUDGET_MARGIN = 1.25
"""A segment starts only when its predicted cost × this margin fits the budget left."""
RESERVE_FACTOR = 10.0
"""A segment reserves up to this many times its predicted cost."""
KILL_SLACK_S = 0.05
"""Billed time a killed function may run past its limit (monitor tick and kill)."""
MIN_LIMIT_S = 1.0
"""The least time limit a budget sets a segment (within the budget left): a busy machine
delays a function by this order whatever a tiny segment's prediction, and a stop costs a
restart."""


class SegmentEstimator:
    """Predictions of segment time and cost, corrected by what runs measured."""

    def __init__(self, platform: FunctionPlatform) -> None:
        self.platform = platform
        self.predicted_round_s: Callable[[Allocation], float] | None = None
        """The performance model's seconds per round (set by the run; None: unknown)."""
        self._round_s: dict[tuple[int, int], float] = {}
        """Measured seconds per round by (n, memory)."""
        self._overhead_s: dict[tuple[int, int], float] = {}
        """Measured seconds a segment bills outside its rounds, by (n, memory)."""
        self._epoch_end_s: dict[tuple[int, int], float] = {}
        """Measured seconds each epoch ending inside a segment of several adds (evaluation)."""
        self._floor_s: dict[tuple[int, int], float] = {}
        """Least segment seconds by (n, memory), raised when a segment ran out of its
        reservation: the next prediction is at least twice what it was allowed."""
        self._init_s: dict[int, float] = {}
        """Longest cold start measured by memory size."""
        self._setup_s: dict[int, float] = {}
        """Longest set-up of a cold function before its first round by memory size."""
        self._started: dict[int, int] = {}
        """Instances started (and not failed) by memory size: the warm pool, approximately."""

    def round_seconds(self, allocation: Allocation) -> float | None:
        measured = self._round_s.get((allocation.n, allocation.memory_mb))
        if measured is not None:
            return measured
        if self.predicted_round_s is not None:
            return self.predicted_round_s(allocation)
        return None

    def measured_round_s(self, allocation: Allocation) -> float | None:
        """Seconds per round a segment on ``allocation`` took (None: none ran there yet)."""
        return self._round_s.get((allocation.n, allocation.memory_mb))

    def cost(
        self,
        allocation: Allocation,
        rounds: int,
        busy: int = 0,
        epochs: int = 1,
        *,
        warm: bool = False,
    ) -> float:
        """Predicted cost of a segment of ``rounds`` rounds over ``epochs`` epochs: n functions
        for its predicted time (eq. 4); ``busy`` functions of the same size are running
        already; ``warm``: its functions are known warm (a segment after one on them)."""
        per_round = self.round_seconds(allocation)
        platform = self.platform
        init = self.cold_start_s(allocation.memory_mb)
        if warm or self._started.get(allocation.memory_mb, 0) >= busy + allocation.n:
            init = 0.0  # enough instances of this size were started: they are likely warm
        key = (allocation.n, allocation.memory_mb)
        seconds = (per_round or 0.0) * rounds + self._overhead_s.get(key, 0.0) + init
        seconds += (epochs - 1) * self.epoch_end_s(allocation)
        seconds = max(seconds, self._floor_s.get(key, 0.0))
        gb = allocation.memory_mb / 1024.0
        return allocation.n * (
            seconds * gb * platform.price_per_gb_s + platform.price_per_invocation
        )

    def cold_start_s(self, memory_mb: int) -> float:
        """Predicted cold start of a function of ``memory_mb``: the longest measured there, at
        least the catalog's, which is CPU-bound (below one vCPU it stretches by 1/vCPU)."""
        share = min(1.0, float(self.platform.vcpus(memory_mb)))
        return max(self._init_s.get(memory_mb, 0.0), self.platform.cold_start_s / share)

    def start_s(self, allocation: Allocation) -> float:
        """Predicted seconds from invoking a function on ``allocation`` to its first round:
        its cold start and the segment's fixed time (loading: measured there)."""
        return self.cold_start_s(allocation.memory_mb) + self.segment_overhead_s(allocation)

    def observe_prewarm(self, memory_mb: int, count: int) -> None:
        """``count`` instances of ``memory_mb`` were started ahead of use: warm, likely."""
        self._started[memory_mb] = self._started.get(memory_mb, 0) + count

    def cold_start_at_one_vcpu(self) -> float | None:
        """The longest cold start measured with its function's set-up before the first round
        (as the job profile's holds it), scaled to one vCPU where starts run under the CPU
        share (as catalogs state it); None before any."""
        if not self._init_s:
            return None
        share = 1.0
        scaled = []
        for memory, init in self._init_s.items():
            if self.platform.cold_start_scales_with_cpu:
                share = min(1.0, float(self.platform.vcpus(memory)))
            scaled.append((init + self._setup_s.get(memory, 0.0)) * share)
        return max(scaled)

    def observe_round(
        self,
        allocation: Allocation,
        seconds: float,
        overhead_s: float = 0.0,
        epoch_end_s: float | None = None,
    ) -> None:
        """A segment on ``allocation`` took ``seconds`` per round (its slowest worker) and
        billed ``overhead_s`` more outside its rounds (warm start, loading, checkpoints, one
        evaluation); a segment of several epochs also ``epoch_end_s`` per epoch ending inside
        it."""
        key = (allocation.n, allocation.memory_mb)
        self._round_s[key] = seconds
        self._overhead_s[key] = max(0.0, overhead_s)
        if epoch_end_s is not None:
            self._epoch_end_s[key] = max(0.0, epoch_end_s)

    def epoch_end_s(self, allocation: Allocation) -> float:
        """Measured seconds an epoch's end adds inside a segment of several (0: not yet)."""
        return self._epoch_end_s.get((allocation.n, allocation.memory_mb), 0.0)

    def segment_overhead_s(self, allocation: Allocation) -> float:
        """Seconds a segment on ``allocation`` costs besides its rounds: measured there, and
        never less than the platform's per-invocation latency."""
        measured = self._overhead_s.get((allocation.n, allocation.memory_mb), 0.0)
        return max(measured, self.platform.warm_start_s)

    def observe_billed(self, billed: Billed, setup_s: float = 0.0) -> None:
        """An invocation's bill; ``setup_s``: its seconds before its first round (a cold
        function's imports and set-up, which the segment's fixed time holds too)."""
        if billed.cold:
            known = self._init_s.get(billed.memory_mb, 0.0)
            self._init_s[billed.memory_mb] = max(known, billed.init_s)
            setup = self._setup_s.get(billed.memory_mb, 0.0)
            self._setup_s[billed.memory_mb] = max(setup, setup_s)
            if billed.ok:
                self._started[billed.memory_mb] = self._started.get(billed.memory_mb, 0) + 1
        elif not billed.ok:  # a failed or stopped function's instance is gone: one less warm
            count = self._started.get(billed.memory_mb, 0)
            self._started[billed.memory_mb] = max(0, count - 1)

    def ran_out(self, allocation: Allocation, timeout_s: float) -> None:
        """A segment was stopped at ``timeout_s`` by its reservation: predict at least twice
        what it was allowed (its limit plus the kill slack), and at least twice the last floor,
        so repeated stops grow the prediction geometrically until the segment fits or the
        budget guard stops the trial."""
        key = (allocation.n, allocation.memory_mb)
        allowed = timeout_s + KILL_SLACK_S
        self._floor_s[key] = max(2 * self._floor_s.get(key, 0.0), 2 * allowed)


def guard_admits(estimate_usd: float, left_usd: float) -> bool:
    """The budget guard's rule: a segment predicted at ``estimate_usd`` starts only when that
    × BUDGET_MARGIN fits the ``left_usd`` of the budget (after the running reservations)."""
    return estimate_usd * BUDGET_MARGIN <= left_usd


def fits_capacity(catalog: Catalog, sizes: Sequence[tuple[int, int]]) -> bool:
    """True when functions of (memory MB, count) ``sizes`` run at once within the platform's
    concurrency, vCPUs and memory."""
    platform = catalog.platform
    if sum(c for _, c in sizes) > platform.concurrency_limit:
        return False
    if platform.capacity_vcpus is not None:
        vcpus = sum(c * float(platform.vcpus(m)) for m, c in sizes)
        if vcpus > platform.capacity_vcpus + 1e-9:
            return False
    memory_mb = platform.capacity_memory_mb
    return memory_mb is None or sum(c * m for m, c in sizes) <= memory_mb + 1e-9


def coordinator_seconds(commits_s: list[float], launches_s: list[float], poll_s: float) -> float:
    """``FunctionPlatform.coordinator_s``: the coordinator's seconds between a trial's
    invocations — the median commit of a finished segment (its history and clean-up; the
    run's record is written after the next launch, off this path), the median launch of the
    next (a rare launch that starts processes or makes room is a cold start's, priced apart)
    and half a poll period (an end is noticed at the next poll). Before any segment ran, the
    commit is priced as one write of the run's record (more than a commit takes) and no
    launch is known."""

    def median(values: list[float]) -> float:
        return max(statistics.median(values), 0.0) if values else 0.0

    return median(commits_s) + median(launches_s) + poll_s / 2


def reservation(
    platform: FunctionPlatform, allocation: Allocation, estimate: float, left: float | None
) -> tuple[float, bool, float]:
    """(time limit, whether the budget set it, reservation) of a new segment.

    Without a budget (``left`` None): the platform's maximum duration. With one: the segment
    reserves RESERVE_FACTOR × its prediction (at least two cold starts and MIN_LIMIT_S), at
    most ``left`` (the budget less the spend and the running segments' reservations), and
    its functions are stopped when they would bill more: n functions of m MB for t seconds
    cannot bill more than n·(t·m·p_f + p_invk) (CE-scaling eq. 4 read backwards), so the
    budget holds even when a prediction is wrong.
    """
    limit = platform.max_duration_s
    rate = allocation.n * allocation.memory_mb / 1024.0 * platform.price_per_gb_s
    requests = allocation.n * platform.price_per_invocation
    full = requests + rate * (limit + KILL_SLACK_S)
    if left is None:
        return limit, False, full
    # Room for at least two cold starts (a function thought warm may have been reclaimed),
    # and for a busy machine's delays.
    cold = 2 * float(platform.cold_start_time(allocation.memory_mb))
    floor = requests + rate * max(cold, MIN_LIMIT_S)
    reserve = min(full, left, max(RESERVE_FACTOR * estimate, estimate * BUDGET_MARGIN, floor))
    if rate <= 0:
        return limit, False, reserve
    timeout = (reserve - requests) / rate - KILL_SLACK_S
    if timeout >= limit:
        return limit, False, reserve
    return max(timeout, 1e-3), True, reserve
