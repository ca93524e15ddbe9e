"""The coordinator (SMLT §4.1 task scheduler): runs trials as groups of worker invocations.

A trial trains in *segments*: one invocation per worker for the rounds of one epoch (or part
of one, when an epoch would outlast the platform's duration limit: the function is renewed from
the checkpoint before its time runs out; or several whole epochs, when they are short against
what a segment costs besides its rounds, ``segments.SEGMENT_OVERHEAD_SHARE``). The
coordinator starts the n workers of a segment together, tracks them (results and
heartbeats), and when a worker fails or falls silent it stops the segment and restarts it
from the last checkpoint: BSP workers cannot go on without the lost one, and the seeded
minibatch order makes the rerun compute the same model. Every
invocation is billed, failed ones too. The budget is a hard guard: a segment whose predicted
cost does not fit what is left is never started; the run stops cleanly with its checkpoints.

This module holds the run loop and the tracking of running segments; the parts it is built
from: ``coordinator_base`` (state, options), ``partitions`` (data), ``segments`` (launching,
prewarming), ``failures`` (restarts), ``results`` (trial history), ``segment_billing`` (bills).
"""

from __future__ import annotations

import dataclasses
import time

from faasml.runtime.coordinator.commits import ResultCommits
from faasml.runtime.coordinator.failures import LOST_STORE
from faasml.runtime.coordinator.launcher import WORKER_FN, Prewarm, SegmentLaunching
from faasml.runtime.coordinator.state import (
    BudgetExhaustedError,
    CoordinatorBase,
    CoordinatorOptions,
    Segment,
)
from faasml.runtime.trial import TrialFault, TrialState
from faasml.runtime.worker import SegmentReport
from faasml.types import Allocation


class Coordinator(SegmentLaunching, ResultCommits):
    """Starts, tracks, restarts and bills the workers of trials (see the module docstring)."""

    def run(
        self,
        trials: list[TrialState],
        allocation: Allocation,
        until_epoch: int,
        then: Prewarm | None = None,
    ) -> None:
        """Train every trial in ``trials`` on ``allocation`` until it has ``until_epoch``
        epochs done, running as many at once as the platform's capacity allows. Trials the
        budget cannot pay for are marked 'stopped' and ``stop_reason`` says why. ``then``: the
        next stage's functions, started during this one's last wave (``_prewarm_next``)."""
        entered = time.monotonic()
        try:
            self._run(trials, allocation, until_epoch, then)
        finally:
            self.timings["run_s"] += time.monotonic() - entered

    def _run(
        self,
        trials: list[TrialState],
        allocation: Allocation,
        until_epoch: int,
        then: Prewarm | None = None,
    ) -> None:
        self.prepare_partitions(allocation.n)
        running: list[Segment] = []
        waiting = [t for t in trials if t.status in ("pending", "running", "done")]
        for trial in waiting:
            trial.status = "running" if trial.epochs_done < until_epoch else "done"
        while True:
            launched = False
            # The least advanced trial first, so trials progress together within a stage.
            for trial in sorted(waiting, key=lambda t: (t.epochs_done, t.batch, t.trial_id)):
                if trial.status != "running" or any(s.trial is trial for s in running):
                    continue
                if trial.epochs_done >= until_epoch:
                    trial.status = "done"
                    continue
                sized = self.sized(trial, allocation)
                if self.stop_reason is not None or not self._fits(running, sized):
                    continue
                began = time.monotonic()
                try:
                    segment = self._launch(trial, allocation, running, until_epoch)
                except BudgetExhaustedError as stop:
                    self.stop_reason = str(stop)
                    continue
                finally:
                    self.timings["launch_s"] += time.monotonic() - began
                if segment is not None:
                    running.append(segment)
                    launched = True
            self._record()  # the segments committed last: after the next ones started
            if (
                then is not None
                and running
                and self._prewarm_next(then, waiting, running, until_epoch)
            ):
                then = None
            if not running:
                if (
                    not launched
                    and self.stop_reason is None
                    and any(t.status == "running" for t in waiting)
                ):
                    self.stop_reason = (
                        f"{allocation} cannot start on {self.platform.name}: the platform "
                        "refused its functions (capacity); checkpoints kept"
                    )
                break
            beat = time.monotonic()
            time.sleep(self.options.poll_s)
            self._count_demand(running, time.monotonic() - beat)
            for segment in list(running):
                if self._poll(segment):
                    running.remove(segment)
            self._check_silent(running)
            self._collect_standalone()
        self._collect_standalone()
        for trial in waiting:
            if trial.status == "running":
                trial.status = "stopped" if self.stop_reason else trial.status

    def run_segment(self, trial: TrialState, allocation: Allocation, max_rounds: int) -> bool:
        """Run one segment of ``trial`` on ``allocation`` — at most ``max_rounds`` rounds —
        and wait for it (a deployment search's probe); billed like any segment. False when
        the platform refused it; a failure is in ``trial.failures``."""
        options = self.options
        self.options = dataclasses.replace(options, max_rounds_per_invocation=max_rounds)
        try:
            self.prepare_partitions(allocation.n)
            segment = self._launch(trial, allocation, [])
            if segment is None:
                return False
            while not self._poll(segment):
                time.sleep(options.poll_s)
            return True
        finally:
            self.options = options
            self._record()
            self._collect_standalone()

    def _count_demand(self, running: list[Segment], seconds: float) -> None:
        """Add ``seconds`` of the running functions' summed vCPU demand to each segment."""
        vcpus = self.catalog.platform.vcpus
        demand = sum(float(vcpus(s.allocation.memory_mb)) * s.allocation.n for s in running)
        for segment in running:
            segment.demand_vcpu_s += demand * seconds

    def _poll(self, segment: Segment) -> bool:
        """Handle a segment whose invocations ended; True when it is finished with."""
        failed = [i for i in segment.invocations if i.billed is not None and not i.billed.ok]
        if not failed and not all(i.done() for i in segment.invocations):
            return False
        trial = segment.trial
        if failed:
            self._fail(segment, self._reason(failed[0]), self._kind(failed[0]))
            return True
        reports: list[SegmentReport] = [i.result() for i in segment.invocations]
        for invocation in segment.invocations:
            self._bill(invocation, trial)
        self._account(segment, reports)
        self._bill_requests(segment, reports)
        began = time.monotonic()
        self._commit(segment, reports)
        self.timings["commit_s"] += time.monotonic() - began
        return True

    def _account(self, segment: Segment, reports: list[SegmentReport]) -> None:
        """Add a finished segment's parts to ``timings`` (``coordinator_base.TIMINGS``)."""
        wall = time.monotonic() - segment.started
        bills = [i.billed for i in segment.invocations if i.billed is not None]
        billed = max((b.duration_s for b in bills), default=0.0)
        cold = max((b.init_s for b in bills if b.cold), default=0.0)
        in_bill = cold if self.catalog.platform.bills_cold_start else 0.0
        parts = {
            "segments_s": wall,
            "load_s": max(r.load_s for r in reports),
            "train_s": max(r.compute_s + r.sync_s for r in reports),
            "end_s": max(r.elapsed_s - r.load_s - r.compute_s - r.sync_s for r in reports),
            "invoke_s": max(billed - in_bill - max(r.elapsed_s for r in reports), 0.0),
            "cold_start_s": cold,
            "notice_s": max(wall - billed - (cold - in_bill), 0.0),
        }
        for key, value in parts.items():
            self.timings[key] += value

    def close(self) -> None:
        """Stop the parameter server and bill the time-priced services used (per second,
        from first use: a node the run needed is paid while the run holds it). The last
        record is written first; if that fails, the services are still billed and stopped."""
        try:
            self._record()
        finally:
            self._collect_standalone()
            self._bill_servers()
            self._stop_server()


__all__ = [
    "LOST_STORE",
    "WORKER_FN",
    "BudgetExhaustedError",
    "Coordinator",
    "CoordinatorBase",
    "CoordinatorOptions",
    "Prewarm",
    "Segment",
    "TrialFault",
    "TrialState",
]
