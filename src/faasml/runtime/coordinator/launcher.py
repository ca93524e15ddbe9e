"""The coordinator's launching: starting the n worker functions of a segment (their tasks,
time limit and budget reservation), the platform capacity check, where a function is renewed,
injected faults, and prewarming the next allocation's functions."""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass

from faasml.runtime.coordinator.failures import FailureHandling
from faasml.runtime.coordinator.partitions import DataPartitions
from faasml.runtime.coordinator.state import BudgetExhaustedError, Segment
from faasml.runtime.estimates import BUDGET_MARGIN, fits_capacity, reservation
from faasml.runtime.platform import CapacityError, FunctionError, Invocation
from faasml.runtime.trial import TrialState
from faasml.runtime.worker import Fault, WorkerTask, rounds_per_epoch
from faasml.types import Allocation

WORKER_FN = "faasml.runtime.worker:run_segment"
WORKER_MODULE = WORKER_FN.partition(":")[0]
"""What a function imports to run a segment (on ``local``, as it starts:
``job_profile.platform_options_for``)."""
SEGMENT_OVERHEAD_SHARE = 0.1
"""A segment of several epochs trains at least 1/this × its fixed time (invocation, loading,
checkpoints, evaluation, the coordinator's commit): epochs short against that run several to
an invocation."""
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
    """How many the coordinator started ahead of the stage (``SegmentLaunching._prewarm_next``)."""


class SegmentLaunching(FailureHandling, DataPartitions):
    """Starts segments within the platform's capacity and the budget."""

    def _fits(self, running: list[Segment], allocation: Allocation) -> bool:
        platform = self.catalog.platform
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

    def _launch(
        self,
        trial: TrialState,
        allocation: Allocation,
        running: list[Segment],
        until_epoch: int | None = None,
    ) -> Segment | None:
        """Start the next segment of ``trial`` (whole epochs up to ``until_epoch`` where they
        are short, ``_segment_epochs``); None when it must wait (capacity, budget in use)."""
        entered = time.monotonic()
        allocation = self.sized(trial, allocation)
        rounds = rounds_per_epoch(self.samples, allocation.n, self.recipe_of(trial).batch_size)
        stop = self._stop_batch(trial, allocation, rounds)
        epochs = 1 if stop is not None else self._segment_epochs(trial, allocation, until_epoch)
        span = (stop if stop is not None else rounds) - trial.batch + (epochs - 1) * rounds
        busy = sum(
            s.allocation.n for s in running if s.allocation.memory_mb == allocation.memory_mb
        )
        estimate = self.estimator.cost(allocation, span, busy, epochs)
        left: float | None = None
        if self.budget_usd is not None:
            left = self.budget_usd - self.spent_usd() - sum(s.reserve_usd for s in running)
            if epochs > 1 and estimate * BUDGET_MARGIN > left:  # one epoch may still fit
                epochs, span = 1, rounds - trial.batch
                estimate = self.estimator.cost(allocation, span, busy)
            if estimate * BUDGET_MARGIN > left:
                if running:
                    return None  # wait: running segments may cost less than predicted
                raise BudgetExhaustedError(
                    f"budget guard: trial {trial.trial_id} epoch {trial.epoch + 1} needs about "
                    f"${estimate * BUDGET_MARGIN:.6f} and ${max(left, 0):.6f} of the "
                    f"${self.budget_usd:.6f} budget is left; stopped with checkpoints kept"
                )
        timeout, capped, reserve = reservation(self.estimator.platform, allocation, estimate, left)
        token = uuid.uuid4().hex[:8]
        out = (
            f"{self.namespace}/t{trial.trial_id}/ckpt/e{trial.epoch:04d}-"
            f"b{stop if stop is not None else rounds:06d}-{token}"
        )
        fault = self._take_fault(trial, epochs)
        recipe = self.recipe_of(trial)
        self._in_use_since.setdefault(allocation.storage, self.now())
        invocations: list[Invocation] = []
        try:
            for worker in range(allocation.n):
                task = WorkerTask(
                    recipe=recipe,
                    object_url=self.objects.url,
                    sync_url=self._sync_url(allocation),
                    scheme=allocation.scheme,
                    namespace=f"{self.namespace}/t{trial.trial_id}/{token}",
                    data_prefix=self.data_prefix,
                    n=allocation.n,
                    worker_id=worker,
                    epoch=trial.epoch,
                    start_batch=trial.batch,
                    stop_batch=stop,
                    round_id=trial.round_id,
                    checkpoint=trial.checkpoint,
                    checkpoint_out=out,
                    sync_timeout_s=self.options.sync_timeout_s,
                    fault=fault,
                    epochs=epochs,
                    stop_diverged=self.options.stop_diverged,
                )
                invocations.append(
                    self.platform.invoke(WORKER_FN, task, allocation.memory_mb, timeout)
                )
        except CapacityError:
            for invocation in invocations:
                invocation.cancel()
            for invocation in invocations:
                self._bill(invocation, trial)
            return None
        except FunctionError as err:  # a worker could not be started: restart the segment
            failed = Segment(trial, allocation, invocations, stop, out, token, 0.0, 0.0, 0)
            failed.sync_url = self._sync_url(allocation)
            self._fail(failed, f"a worker could not be started: {err}")
            return None
        self.segments += 1
        started = time.monotonic()
        self.launches_s.append(started - entered)
        return Segment(
            trial,
            allocation,
            invocations,
            stop,
            out,
            token,
            started,
            estimate,
            span,
            capped,
            self._sync_url(allocation),
            reserve,
            timeout,
            epochs=epochs,
        )

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
        options = self.options
        most = 1 if until_epoch is None else until_epoch - trial.epoch
        if options.epochs_per_segment is not None:
            most = min(most, options.epochs_per_segment)
        if most <= 1 or trial.batch != 0 or options.max_rounds_per_invocation is not None:
            return 1
        if any(f.startswith(f"epoch {trial.epoch + 1} ") for f in trial.failures):
            return 1
        per_round = self.estimator.measured_round_s(allocation)
        if per_round is None or per_round <= 0:
            return 1
        rounds = rounds_per_epoch(self.samples, allocation.n, self.recipe_of(trial).batch_size)
        epoch_s = per_round * rounds + self.estimator.epoch_end_s(allocation)
        fits = math.floor(options.renew_at * self.catalog.platform.max_duration_s / epoch_s)
        if options.epochs_per_segment is None:
            fixed = self.estimator.segment_overhead_s(allocation)
            if fixed > options.sync_timeout_s / 2:  # the others would wait out an evaluation
                return 1
            most = min(most, math.ceil(fixed / (SEGMENT_OVERHEAD_SHARE * epoch_s)))
        return max(1, min(most, fits))

    def _stop_batch(self, trial: TrialState, allocation: Allocation, rounds: int) -> int | None:
        """Where to renew the function: None runs to the epoch's end."""
        limit = self.options.max_rounds_per_invocation
        if limit is None:
            per_round = self.estimator.round_seconds(allocation)
            if per_round is None or per_round <= 0:
                return None
            usable = self.options.renew_at * self.catalog.platform.max_duration_s
            limit = max(1, math.floor(usable / per_round))
        stop = trial.batch + limit
        return None if stop >= rounds else stop

    def _take_fault(self, trial: TrialState, epochs: int = 1) -> Fault | None:
        """An injected fault for one of the ``epochs`` epochs the segment trains."""
        for item in self.faults:
            if item.trial == trial.trial_id and trial.epoch <= item.epoch < trial.epoch + epochs:
                self.faults.remove(item)
                return item.fault
        return None

    def prewarm(self, allocation: Allocation, count: int | None = None) -> int:
        """Start ``count`` (default n) functions of ``allocation`` now, to take over at the
        next segment (delayed restart, CE-scaling §III-D); returns how many started. Their
        start is billed on its own where the platform bills cold starts; idle, they bill
        nothing (as a warm Lambda instance between invocations)."""
        self.prepare_partitions(allocation.n)
        wanted = allocation.n if count is None else count
        started = self.platform.prewarm(allocation.memory_mb, wanted) if wanted > 0 else 0
        self.estimator.observe_prewarm(allocation.memory_mb, started)
        return started

    def _prewarm_next(
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
        cold = self.estimator.cold_start_s(memory)
        now = time.monotonic()
        if any(self._left_s(segments[id(t)], until, now) > PREWARM_LEAD * cold for t in left):
            return False
        warm = self.platform.warm_instances()
        in_use = sum(s.allocation.n for s in running if s.allocation.memory_mb == memory)
        idle = warm.get(memory, 0) if warm is not None else then.started
        if idle + in_use >= then.functions:
            return True
        busy = [(s.allocation.memory_mb, s.allocation.n) for s in running]
        count = 0
        while idle + in_use + count < then.functions and fits_capacity(
            self.catalog, [*busy, (memory, idle + count + 1)]
        ):
            count += 1
        if self.budget_usd is not None:
            platform = self.catalog.platform
            each = 2 * cold * memory / 1024.0 * platform.price_per_gb_s
            spare = self.budget_usd - self.spent_usd() - sum(s.reserve_usd for s in running)
            count = min(count, math.floor(spare / each) if each > 0 else count)
        if count > 0:
            then.started += self.prewarm(then.allocation, count)
        return False

    def _left_s(self, segment: Segment, until: int, now: float) -> float:
        """Predicted seconds until ``segment``'s trial ends its stage (at ``until`` epochs);
        0 where nothing ran on its allocation yet (no prediction to wait on)."""
        per_round = self.estimator.measured_round_s(segment.allocation)
        if per_round is None:
            return 0.0
        overhead = self.estimator.segment_overhead_s(segment.allocation)
        trial = segment.trial
        rounds = rounds_per_epoch(
            self.samples, segment.allocation.n, self.recipe_of(trial).batch_size
        )
        current = per_round * segment.rounds + overhead - (now - segment.started)
        after = max(0, until - trial.epochs_done - segment.epochs)
        return max(0.0, current) + after * (per_round * rounds + overhead)
