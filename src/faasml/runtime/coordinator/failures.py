"""The coordinator's failure handling: a failed or silent segment is stopped, billed and
restarted from its checkpoint; a trial out of memory moves to a bigger memory size; a trial
whose functions keep failing to synchronise moves to fewer, larger ones; a lost store stops
the run with checkpoints kept; too many restarts fail the trial."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from faasml.catalog import Catalog
from faasml.exceptions import StoreUnavailableError
from faasml.runtime.coordinator.billing import SegmentBiller
from faasml.runtime.coordinator.estimates import SegmentEstimator
from faasml.runtime.coordinator.state import CoordinatorState, Segment
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.platforms.contract import FunctionError, Invocation
from faasml.sync.stores import Store
from faasml.types import Allocation

LOST_STORE = "its store was unavailable"
LOOP_ERROR = "LoopError: "
"""In a failure's reason: a training loop failed in its own code (``faasml.loop``)."""
LOOP_UNREPORTED = "did not reach ctx.report within"
"""In a failure's reason: a loop's epoch ran past its function's time limit."""
MOVED = "(moved to"
"""Marks a failure after which the trial moved (memory or functions): the failures before a
move do not count against ``max_restarts`` on the new allocation."""
SYNC_MOVE_AFTER = 2
"""Synchronisation failures of one epoch (a worker that did not start in time, a round that
timed out, a silent worker) after which a trial of several functions moves to fewer: the
plan's width is the likely cause, and a third try on it would likely fail the same way."""


@dataclass(frozen=True)
class FunctionMove:
    """A trial moved to fewer, larger functions after repeated synchronisation failures."""

    trial: int
    before: Allocation
    after: Allocation
    reason: str


def loop_timeout(limit_s: float) -> str:
    """The reason a loop's one-epoch segment that ran past its functions' time limit fails its
    trial with: an invocation ends at an epoch's ``ctx.report``, so a rerun would too."""
    return (
        f"{LOOP_ERROR}the training loop {LOOP_UNREPORTED} the function's time limit of "
        f"{limit_s:g} s: one epoch (to its ctx.report) must fit in one invocation; make an "
        "epoch shorter (fewer rows, a larger batch_size) or faster (more memory or functions)"
    )


def sync_failure(reason: str) -> bool:
    """Whether a failure is one of synchronisation: a worker that did not start in time, a
    round that timed out waiting for a peer, or a worker that fell silent."""
    return "TimeoutError" in reason or "did not start" in reason or " silent for " in reason


class FailurePolicy:
    """Restarts, memory moves, lost stores and silent workers."""

    def __init__(
        self,
        catalog: Catalog,
        objects: Store,
        estimator: SegmentEstimator,
        biller: SegmentBiller,
        state: CoordinatorState,
        on_segment: Callable[[TrialState, Segment | None], None] | None = None,
    ) -> None:
        """``on_segment`` is told of each failed segment (with None for the segment)."""
        self._catalog = catalog
        self._objects = objects
        self._estimator = estimator
        self._biller = biller
        self._state = state
        self._on_segment = on_segment
        self._silent_checked = 0.0
        self.restarts = 0
        self.memory_moves: list[tuple[int, int, int]] = []
        """(trial, from MB, to MB) of every move after running out of memory."""
        self.function_moves: list[FunctionMove] = []
        """Every move to fewer functions after repeated synchronisation failures."""

    def fail(self, segment: Segment, reason: str, kind: str = "") -> None:
        """Stop, bill and clean up ``segment``; its trial restarts from its checkpoint, moves
        up in memory, stops the run (a lost store) or fails (too many restarts)."""
        trial = segment.trial
        for invocation in segment.invocations:
            invocation.cancel()
        for invocation in segment.invocations:
            self._biller.bill(invocation, trial)
        lost = self.cleanup(segment)
        self.restarts += 1
        trial.restarts += 1
        trial.failures.append(
            f"epoch {trial.epoch + 1} batch {trial.batch}: {reason} at {self._state.now():.2f} s"
        )
        if lost is not None:
            # Not the trial's fault, and no restart can succeed: stop (not counted).
            self.store_lost(segment, lost)
            trial.failures[-1] += f" ({LOST_STORE})"
        elif kind == "out-of-memory" and self._grow(segment):
            # Restarting at the same size would fail again: the trial moves up (not counted).
            trial.failures[-1] += f" (moved to {trial.memory_mb} MB)"
        elif segment.budget_capped and "timeout" in reason:
            # It spent its reservation: predict at least twice as long next time; the budget
            # guard then decides whether a retry still fits. Not counted against max_restarts.
            self._estimator.ran_out(segment.allocation, segment.timeout_s)
            trial.failures[-1] += " (its budget reservation ran out)"
        elif LOOP_ERROR in reason:  # the user's loop failed in its own code: a rerun would too
            trial.status = "failed"
        elif sync_failure(reason) and self._fewer(segment):
            # The plan's width keeps failing to meet: fewer, larger functions (not counted).
            move = self.function_moves[-1]
            trial.failures[-1] += (
                f" {MOVED} {move.after.n} × {move.after.memory_mb} MB: {move.reason})"
            )
        elif self._counted(trial) > self._state.options.max_restarts:
            trial.status = "failed"
        if self._on_segment is not None:
            self._on_segment(trial, None)

    @staticmethod
    def _counted(trial: TrialState) -> int:
        """Failures of the trial's epoch since it last moved that count against
        ``max_restarts`` (not a spent reservation, not a lost store)."""
        count = 0
        for failure in trial.failures:
            if not failure.startswith(f"epoch {trial.epoch + 1} "):
                continue
            if MOVED in failure:
                count = 0
            elif "reservation" not in failure and LOST_STORE not in failure:
                count += 1
        return count

    def _fewer(self, segment: Segment) -> bool:
        """Move the segment's trial to half its functions, each with the memory of two (on the
        catalog's grid, at most the platform's), after SYNC_MOVE_AFTER synchronisation
        failures of this epoch on its allocation; False when it stays (one function already,
        fewer failures, or mid-epoch, where the data position depends on the count)."""
        trial, now = segment.trial, segment.allocation
        epoch = f"epoch {trial.epoch + 1} "
        failed = 0
        for failure in trial.failures:
            if failure.startswith(epoch):
                failed = 0 if MOVED in failure else failed + sync_failure(failure)
        if now.n <= 1 or trial.batch != 0 or failed < SYNC_MOVE_AFTER:
            return False
        trial.functions = now.n // 2
        after = self.sized(trial, now)
        reason = f"{failed} synchronisation failures with {now.n} functions"
        self.function_moves.append(FunctionMove(trial.trial_id, now, after, reason))
        return True

    def _grow(self, segment: Segment) -> bool:
        """Give the segment's trial the next memory size that may fit (×1.5, on the catalog's
        grid); False when it already has the most the platform allows."""
        platform = self._catalog.platform
        now = segment.allocation.memory_mb
        step = platform.memory_step_mb
        bigger = min(platform.memory_max_mb, math.ceil(now * 1.5 / step) * step)
        if bigger <= now:
            return False
        segment.trial.memory_mb = bigger
        self.memory_moves.append((segment.trial.trial_id, now, bigger))
        return True

    def sized(self, trial: TrialState, allocation: Allocation) -> Allocation:
        """``allocation`` with the memory the trial was moved to after running out of it, and
        at most the functions it was moved to, each with the memory of the ones it replaces
        (on the catalog's grid, at most the platform's): the trial keeps its total memory."""
        memory = max(trial.memory_mb, allocation.memory_mb)
        n = allocation.n
        if 0 < trial.functions < n:
            platform = self._catalog.platform
            step = platform.memory_step_mb
            larger = math.ceil(allocation.memory_mb * n / trial.functions / step) * step
            memory = max(memory, min(platform.memory_max_mb, larger))
            n = trial.functions
        if memory == allocation.memory_mb and n == allocation.n:
            return allocation
        return dataclasses.replace(allocation, memory_mb=memory, n=n)

    def cleanup(self, segment: Segment) -> str | None:
        """Delete the segment's keys; what went wrong when its sync store (after the store
        client's retries) cannot be reached, else None."""
        from faasml.sync.stores import open_store

        prefix = f"{self._state.namespace}/t{segment.trial.trial_id}/{segment.token}/"
        self._objects.delete(prefix)
        try:
            with open_store(segment.sync_url) as sync:
                sync.delete(prefix)
        except StoreUnavailableError as err:
            return str(err)
        return None

    def store_lost(self, segment: Segment, error: str) -> None:
        """Stop the run: the store its gradients go through is gone (the first cause only)."""
        if self._state.stop_reason is None:
            self._state.stop_reason = (
                f"the {segment.allocation.storage} store (the gradients' store) is unavailable: "
                f"{error.rstrip('.')}; stopped with checkpoints kept: when the store is back, "
                "continue the run with `faasml resume RUN_DIR`"
            )

    def check_silent(self, running: list[Segment]) -> None:
        """Restart a segment with a worker whose heartbeat is older than the bound, or that
        has not started within its start bound and the silence bound (checked at most once a
        second: each check reads n heartbeat keys)."""
        if self._state.clock.monotonic() - self._silent_checked < 1.0:
            return
        self._silent_checked = self._state.clock.monotonic()
        options = self._state.options
        bound = options.silent_after_s
        for segment in list(running):
            if self._state.clock.monotonic() - segment.started < bound:
                continue
            prefix = f"{self._state.namespace}/t{segment.trial.trial_id}/{segment.token}/hb/"
            age = self._state.clock.monotonic() - segment.started
            for worker in range(segment.allocation.n):
                value = self._objects.get(f"{prefix}w{worker}")
                if value is None:
                    start = segment.start_s or options.start_allowance_s
                    silent = age > bound + start
                else:
                    silent = time.time() - float(value.split()[0]) > bound
                if silent:
                    running.remove(segment)
                    self.fail(segment, f"worker {worker} silent for over {bound:g} s")
                    break

    @staticmethod
    def reason(invocation: Invocation) -> str:
        """What a failed invocation reported ("ok" when it did not fail)."""
        try:
            invocation.result(timeout=0)
        except FunctionError as err:
            return str(err)
        except TimeoutError:
            return "no result"
        return "ok"

    @staticmethod
    def kind(invocation: Invocation) -> str:
        """Why an invocation failed (a ``FunctionError`` kind), '' when it did not."""
        try:
            invocation.result(timeout=0)
        except FunctionError as err:
            return err.kind
        except TimeoutError:
            return ""
        return ""
