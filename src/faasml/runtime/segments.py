"""The coordinator's launching: starting the n worker functions of a segment (their tasks,
time limit and budget reservation), the platform capacity check, where a function is renewed,
injected faults, and prewarming the next allocation's functions."""

from __future__ import annotations

import math
import time
import uuid

from faasml.runtime.coordinator_base import BudgetExhaustedError, Segment
from faasml.runtime.estimates import BUDGET_MARGIN, reservation
from faasml.runtime.failures import FailureHandling
from faasml.runtime.partitions import DataPartitions
from faasml.runtime.platform import CapacityError, FunctionError, Invocation
from faasml.runtime.trial import TrialState
from faasml.runtime.worker import Fault, WorkerTask, rounds_per_epoch
from faasml.types import Allocation

WORKER_FN = "faasml.runtime.worker:run_segment"


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
        self, trial: TrialState, allocation: Allocation, running: list[Segment]
    ) -> Segment | None:
        allocation = self.sized(trial, allocation)
        rounds = rounds_per_epoch(self.samples, allocation.n, self.recipe_of(trial).batch_size)
        stop = self._stop_batch(trial, allocation, rounds)
        span = (stop if stop is not None else rounds) - trial.batch
        busy = sum(
            s.allocation.n for s in running if s.allocation.memory_mb == allocation.memory_mb
        )
        estimate = self.estimator.cost(allocation, span, busy)
        left: float | None = None
        if self.budget_usd is not None:
            left = self.budget_usd - self.spent_usd() - sum(s.reserve_usd for s in running)
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
        fault = self._take_fault(trial)
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
        return Segment(
            trial,
            allocation,
            invocations,
            stop,
            out,
            token,
            time.monotonic(),
            estimate,
            span,
            capped,
            self._sync_url(allocation),
            reserve,
            timeout,
        )

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

    def _take_fault(self, trial: TrialState) -> Fault | None:
        for item in self.faults:
            if item.trial == trial.trial_id and item.epoch == trial.epoch:
                self.faults.remove(item)
                return item.fault
        return None

    def prewarm(self, allocation: Allocation) -> int:
        """Start the functions of ``allocation`` now, to take over at the next segment
        (delayed restart, CE-scaling §III-D)."""
        self.prepare_partitions(allocation.n)
        return self.platform.prewarm(allocation.memory_mb, allocation.n)
