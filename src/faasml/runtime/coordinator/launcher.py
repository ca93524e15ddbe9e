"""The coordinator's launching: starting the n worker functions of a segment (their tasks,
time limit and budget reservation), the platform capacity check, where a function is renewed,
injected faults, and prewarming the next allocation's functions."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from faasml.catalog import Catalog
from faasml.loop import is_loop
from faasml.runtime.coordinator.billing import SegmentBiller
from faasml.runtime.coordinator.estimates import (
    BUDGET_MARGIN,
    SegmentEstimator,
    fits_capacity,
    guard_admits,
    reservation,
)
from faasml.runtime.coordinator.failures import FailurePolicy
from faasml.runtime.coordinator.partitions import Partitions
from faasml.runtime.coordinator.state import BudgetExhaustedError, CoordinatorState, Segment
from faasml.runtime.coordinator.stores import SyncStores
from faasml.runtime.coordinator.trial import TrialFault, TrialState
from faasml.runtime.function.worker import Fault, ModelRecipe, WorkerTask
from faasml.runtime.platforms.contract import CapacityError, FunctionError, Invocation, Platform
from faasml.types import Allocation
from faasml.workloads.global_batch import rounds_per_epoch

WORKER_FN = "faasml.runtime.function.worker:run_segment"
WORKER_MODULE = WORKER_FN.partition(":")[0]
"""What a function imports to run a segment (on ``local``, as it starts:
``job_profile.platform_options_for``)."""
SEGMENT_OVERHEAD_SHARE = 0.1
"""A segment of several epochs trains at least 1/this × its fixed time (invocation, loading,
checkpoints, evaluation, the coordinator's commit): epochs short against that run several to
an invocation."""
START_SLACK = 3.0
"""A segment's workers have this many times their predicted start (cold start and loading) to
start, at least ``CoordinatorOptions.start_allowance_s``: a busy machine stretches starts."""
PREWARM_LEAD = 2.0
"""The next stage's functions start when the current stage's last wave has at most this many
times their predicted cold start left (earlier, they would only hold the machine idle)."""


@dataclass
class Prewarm:
    """Functions a tuning run wants warm for its next stage (delayed restart between stages)."""

    allocation: Allocation
    functions: int
    """Functions of its memory size the next stage's first wave uses."""
    started: int = 0
    """How many the coordinator started ahead of the stage (``Launcher.prewarm_next``)."""


@dataclass(frozen=True)
class LaunchParts:
    """The coordinator's parts a launch goes through."""

    partitions: Partitions
    stores: SyncStores
    biller: SegmentBiller
    failures: FailurePolicy


@dataclass(frozen=True)
class Planned:
    """What the next segment of a trial trains and its predicted cost (``Launcher.launch``)."""

    allocation: Allocation
    stop: int | None
    """The batch the functions are renewed at; None runs to the epoch's end."""
    epochs: int
    span: int
    """Rounds it trains."""
    estimate: float
    left: float | None
    """Budget left beside the running segments' reservations (None: no budget)."""


class Launcher:
    """Starts segments within the platform's capacity and the budget."""

    def __init__(
        self,
        platform: Platform,
        catalog: Catalog,
        objects_url: str,
        estimator: SegmentEstimator,
        parts: LaunchParts,
        recipe_of: Callable[[TrialState], ModelRecipe],
        state: CoordinatorState,
        *,
        budget_usd: float | None = None,
        faults: list[TrialFault] | None = None,
    ) -> None:
        """``parts``: the coordinator's parts a launch goes through (data, stores, bills,
        failures); ``faults``: injected faults, each taken by the segment it falls in."""
        self._platform = platform
        self._catalog = catalog
        self._objects_url = objects_url
        self._estimator = estimator
        self._partitions = parts.partitions
        self._stores = parts.stores
        self._biller = parts.biller
        self._failures = parts.failures
        self._recipe_of = recipe_of
        self._state = state
        self._budget_usd = budget_usd
        self._faults = list(faults or [])
        self.segments = 0
        """Segments started."""
        self.launches_s: list[float] = []
        """The coordinator's own seconds launching each new segment (``estimates.
        coordinator_seconds`` prices them per invocation round)."""

    def fits(self, running: list[Segment], allocation: Allocation) -> bool:
        """Whether ``allocation``'s functions fit the platform's capacity beside ``running``."""
        platform = self._catalog.platform
        functions = [(s.allocation.memory_mb, s.allocation.n) for s in running]
        functions.append((allocation.memory_mb, allocation.n))
        count = sum(n for _, n in functions)
        if count > platform.concurrency_limit:
            return False
        if platform.capacity_vcpus is not None:
            vcpus = sum(float(platform.vcpus(m)) * n for m, n in functions)
            if vcpus > platform.capacity_vcpus + 1e-9:
                return not running  # one group alone always gets its turn
        if platform.capacity_memory_mb is not None:
            memory = sum(m * n for m, n in functions)
            if memory > platform.capacity_memory_mb + 1e-9:
                return not running
        return True

    def launch(
        self,
        trial: TrialState,
        allocation: Allocation,
        running: list[Segment],
        until_epoch: int | None = None,
    ) -> Segment | None:
        """Start the next segment of ``trial`` (whole epochs up to ``until_epoch`` where they
        are short, ``_segment_epochs``); None when it must wait (capacity, budget in use)."""
        entered = self._state.clock.monotonic()
        sized = self._failures.sized(trial, allocation)
        if sized.n != allocation.n:  # moved to fewer functions: their partitions
            self._partitions.prepare(sized.n)
        plan = self._plan(trial, sized, running, until_epoch)
        if plan is None:
            return None
        allocation, stop = plan.allocation, plan.stop
        start_s = self._start_bound(trial, allocation)
        timeout, capped, reserve = reservation(
            self._estimator.platform, allocation, plan.estimate, plan.left
        )
        token = uuid.uuid4().hex[:8]
        rounds = self._rounds(trial, allocation)
        out = (
            f"{self._state.namespace}/t{trial.trial_id}/ckpt/e{trial.epoch:04d}-"
            f"b{stop if stop is not None else rounds:06d}-{token}"
        )
        self._biller.in_use(allocation.storage)
        invocations = self._invoke(trial, plan, token, out, (timeout, start_s))
        if invocations is None:
            return None
        self.segments += 1
        started = self._state.clock.monotonic()
        self.launches_s.append(started - entered)
        return Segment(
            trial,
            allocation,
            invocations,
            stop,
            out,
            token,
            started,
            plan.estimate,
            plan.span,
            capped,
            self._stores.url(allocation),
            reserve,
            timeout,
            epochs=plan.epochs,
            start_s=start_s,
        )

    def _rounds(self, trial: TrialState, allocation: Allocation) -> int:
        """Rounds of one epoch of ``trial`` on ``allocation``."""
        batch_size = self._recipe_of(trial).batch_size
        return rounds_per_epoch(self._partitions.samples, batch_size)

    def _plan(
        self,
        trial: TrialState,
        allocation: Allocation,
        running: list[Segment],
        until_epoch: int | None,
    ) -> Planned | None:
        """What the next segment trains and its cost; fewer epochs where the budget left
        pays for one only; None when it must wait for the running segments' bills."""
        rounds = self._rounds(trial, allocation)
        stop = None  # a loop's segments never cut an epoch
        if not is_loop(self._recipe_of(trial).model):
            stop = self._stop_batch(trial, allocation, rounds)
        epochs = 1 if stop is not None else self._segment_epochs(trial, allocation, until_epoch)
        span = (stop if stop is not None else rounds) - trial.batch + (epochs - 1) * rounds
        busy = sum(
            s.allocation.n for s in running if s.allocation.memory_mb == allocation.memory_mb
        )
        estimate = self._estimator.cost(allocation, span, busy, epochs)
        left: float | None = None
        if self._budget_usd is not None:
            reserved = sum(s.reserve_usd for s in running)
            left = self._budget_usd - self._biller.spent_usd() - reserved
            if epochs > 1 and not guard_admits(estimate, left):  # one epoch may still fit
                epochs, span = 1, rounds - trial.batch
                estimate = self._estimator.cost(allocation, span, busy)
            if not guard_admits(estimate, left):
                if running:
                    return None  # wait: running segments may cost less than predicted
                refused = self._refusal(trial.trial_id, trial.epoch + 1, estimate, left)
                raise BudgetExhaustedError(f"{refused}; stopped with checkpoints kept")
        return Planned(allocation, stop, epochs, span, estimate, left)

    def _refusal(self, trial: int, epoch: int, estimate: float, left: float) -> str:
        """The budget guard's refusal of ``trial``'s segment from ``epoch``."""
        return (
            f"budget guard: trial {trial} epoch {epoch} needs about "
            f"${estimate * BUDGET_MARGIN:.6f} and ${max(left, 0):.6f} of the "
            f"${self._budget_usd or 0.0:.6f} budget is left"
        )

    def guard_replay(
        self, trials: list[TrialState], allocation: Allocation, epochs: int, left: float
    ) -> tuple[float, str | None]:
        """The budget guard replayed over a stage not started: ``epochs`` more epochs of each
        of ``trials`` on ``allocation``, priced as ``_plan`` prices a segment of one epoch (a
        cold start first where no warm function is known, warm after), each started only
        where ``guard_admits`` it with what the ones before left of ``left``. Returns the
        money then left and the guard's refusal (None: it would start every one), so a
        re-plan prices its choice as the guard will."""
        for trial in trials:
            sized = self._failures.sized(trial, allocation)
            rounds = self._rounds(trial, sized)
            for epoch in range(epochs):
                estimate = self._estimator.cost(sized, rounds, warm=epoch > 0)
                if not guard_admits(estimate, left):
                    number = trial.epochs_done + epoch + 1
                    return left, self._refusal(trial.trial_id, number, estimate, left)
                left -= estimate
        return left, None

    def _invoke(
        self, trial: TrialState, plan: Planned, token: str, out: str, limits: tuple[float, float]
    ) -> list[Invocation] | None:
        """Invoke the segment's n workers (``limits``: their time limit and start bound); None
        when the platform refused one (capacity: the others are cancelled and billed) or one
        could not start (the segment is restarted)."""
        allocation = plan.allocation
        timeout, start_s = limits
        fault = self._take_fault(trial, plan.epochs)
        recipe = self._recipe_of(trial)
        options = self._state.options
        invocations: list[Invocation] = []
        try:
            for worker in range(allocation.n):
                task = WorkerTask(
                    recipe=recipe,
                    object_url=self._objects_url,
                    sync_url=self._stores.url(allocation),
                    scheme=allocation.scheme,
                    namespace=f"{self._state.namespace}/t{trial.trial_id}/{token}",
                    data_prefix=self._partitions.data_prefix,
                    n=allocation.n,
                    worker_id=worker,
                    epoch=trial.epoch,
                    start_batch=trial.batch,
                    stop_batch=plan.stop,
                    round_id=trial.round_id,
                    checkpoint=trial.checkpoint,
                    checkpoint_out=out,
                    sync_timeout_s=options.sync_timeout_s,
                    start_timeout_s=start_s,
                    fault=fault,
                    epochs=plan.epochs,
                    stop_diverged=options.stop_diverged,
                )
                invocations.append(
                    self._platform.invoke(WORKER_FN, task, allocation.memory_mb, timeout)
                )
        except CapacityError:
            for invocation in invocations:
                invocation.cancel()
            for invocation in invocations:
                self._biller.bill(invocation, trial)
            return None
        except FunctionError as err:  # a worker could not be started: restart the segment
            failed = Segment(trial, allocation, invocations, plan.stop, out, token, 0.0, 0.0, 0)
            failed.sync_url = self._stores.url(allocation)
            self._failures.fail(failed, f"a worker could not be started: {err}")
            return None
        return invocations

    def _segment_epochs(
        self, trial: TrialState, allocation: Allocation, until_epoch: int | None
    ) -> int:
        """Whole epochs the next segment of ``trial`` trains: enough that its rounds last
        1/SEGMENT_OVERHEAD_SHARE × its fixed time (measured: the estimator's overhead, and the
        round time on this allocation; the run's record is written after the next launch, off
        the segment's path), or
        ``epochs_per_segment`` where set; never past ``until_epoch`` (a stage's rung, an epoch
        a scheduler decides after) nor ``renew_at`` of the duration limit. One where the fixed
        time is half the synchronisation timeout (the other workers wait in their next round
        while worker 0 evaluates), where nothing
        ran on the allocation yet (a prediction may be far off), after a failure in this
        epoch (a retry redoes little), from the middle of an epoch, or where segments are cut
        by rounds."""
        options = self._state.options
        most = 1 if until_epoch is None else until_epoch - trial.epoch
        if options.epochs_per_segment is not None:
            most = min(most, options.epochs_per_segment)
        if most <= 1 or trial.batch != 0 or options.max_rounds_per_invocation is not None:
            return 1
        if any(f.startswith(f"epoch {trial.epoch + 1} ") for f in trial.failures):
            return 1
        per_round = self._estimator.measured_round_s(allocation)
        if per_round is None or per_round <= 0:
            return 1
        rounds = self._rounds(trial, allocation)
        epoch_s = per_round * rounds + self._estimator.epoch_end_s(allocation)
        fits = math.floor(options.renew_at * self._catalog.platform.max_duration_s / epoch_s)
        if options.epochs_per_segment is None:
            fixed = self._estimator.segment_overhead_s(allocation)
            if fixed > options.sync_timeout_s / 2:  # the others would wait out an evaluation
                return 1
            most = min(most, math.ceil(fixed / (SEGMENT_OVERHEAD_SHARE * epoch_s)))
        return max(1, min(most, fits))

    def _stop_batch(self, trial: TrialState, allocation: Allocation, rounds: int) -> int | None:
        """Where to renew the function: None runs to the epoch's end."""
        limit = self._state.options.max_rounds_per_invocation
        if limit is None:
            per_round = self._estimator.round_seconds(allocation)
            if per_round is None or per_round <= 0:
                return None
            usable = self._state.options.renew_at * self._catalog.platform.max_duration_s
            limit = max(1, math.floor(usable / per_round))
        stop = trial.batch + limit
        return None if stop >= rounds else stop

    def _take_fault(self, trial: TrialState, epochs: int = 1) -> Fault | None:
        """An injected fault for one of the ``epochs`` epochs the segment trains."""
        for item in self._faults:
            if item.trial == trial.trial_id and trial.epoch <= item.epoch < trial.epoch + epochs:
                self._faults.remove(item)
                return item.fault
        return None

    def _start_bound(self, trial: TrialState, allocation: Allocation) -> float:
        """How long the segment's workers have to start: START_SLACK × the predicted start
        (cold start and loading, as measured), at least ``start_allowance_s``, doubled for
        each earlier try of this epoch whose workers did not all start in time (a retry does
        not race the same cold starts against the same bound)."""
        options = self._state.options
        bound = max(options.start_allowance_s, START_SLACK * self._estimator.start_s(allocation))
        epoch = f"epoch {trial.epoch + 1} "
        late = sum(1 for f in trial.failures if f.startswith(epoch) and "did not start" in f)
        return bound * 2**late

    def prewarm(self, allocation: Allocation, count: int | None = None) -> int:
        """Start ``count`` (default n) functions of ``allocation`` now, to take over at the
        next segment (delayed restart, CE-scaling §III-D); returns how many started. Their
        start is billed on its own where the platform bills cold starts; idle, they bill
        nothing (as a warm Lambda instance between invocations)."""
        self._partitions.prepare(allocation.n)
        wanted = allocation.n if count is None else count
        started = self._platform.prewarm(allocation.memory_mb, wanted) if wanted > 0 else 0
        self._estimator.observe_prewarm(allocation.memory_mb, started)
        return started

    def prewarm_next(
        self, then: Prewarm, trials: list[TrialState], running: list[Segment], until: int
    ) -> bool:
        """Start the next stage's functions (``then``) during this stage's last wave: once no
        trial waits to start and the wave's predicted time left is within PREWARM_LEAD × their
        cold start. Only as many as fit beside the running functions within the platform's
        capacity (its vCPUs, memory and concurrency: a prewarmed function's start, CPU-bound,
        takes no share a running trial is entitled to) and the budget left (two starts each,
        as a segment's reservation allows). True when nothing is left to start."""
        left = [t for t in trials if t.status == "running"]
        segments = {id(s.trial): s for s in running}
        if not left or any(id(t) not in segments for t in left):
            return False  # not the last wave (or between its segments)
        memory = then.allocation.memory_mb
        cold = self._estimator.cold_start_s(memory)
        now = self._state.clock.monotonic()
        if any(self._left_s(segments[id(t)], until, now) > PREWARM_LEAD * cold for t in left):
            return False
        warm = self._platform.warm_instances()
        in_use = sum(s.allocation.n for s in running if s.allocation.memory_mb == memory)
        idle = warm.get(memory, 0) if warm is not None else then.started
        if idle + in_use >= then.functions:
            return True
        busy = [(s.allocation.memory_mb, s.allocation.n) for s in running]
        count = 0
        while idle + in_use + count < then.functions and fits_capacity(
            self._catalog, [*busy, (memory, idle + count + 1)]
        ):
            count += 1
        if self._budget_usd is not None:
            platform = self._catalog.platform
            each = 2 * cold * memory / 1024.0 * platform.price_per_gb_s
            reserved = sum(s.reserve_usd for s in running)
            spare = self._budget_usd - self._biller.spent_usd() - reserved
            count = min(count, math.floor(spare / each) if each > 0 else count)
        if count > 0:
            then.started += self.prewarm(then.allocation, count)
        return False

    def _left_s(self, segment: Segment, until: int, now: float) -> float:
        """Predicted seconds until ``segment``'s trial ends its stage (at ``until`` epochs);
        0 where nothing ran on its allocation yet (no prediction to wait on)."""
        per_round = self._estimator.measured_round_s(segment.allocation)
        if per_round is None:
            return 0.0
        overhead = self._estimator.segment_overhead_s(segment.allocation)
        trial = segment.trial
        rounds = self._rounds(trial, segment.allocation)
        current = per_round * segment.rounds + overhead - (now - segment.started)
        after = max(0, until - trial.epochs_done - segment.epochs)
        return max(0.0, current) + after * (per_round * rounds + overhead)
