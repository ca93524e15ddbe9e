"""The coordinator (SMLT §4.1 task scheduler): runs trials as groups of worker invocations.

A trial trains in *segments*: one invocation per worker for the rounds of one epoch (or part
of one, when an epoch would outlast the platform's duration limit: the function is renewed from
the checkpoint before its time runs out; or several whole epochs, when they are short against
what a segment costs besides its rounds, ``launcher.SEGMENT_OVERHEAD_SHARE``). The
coordinator starts the n workers of a segment together, tracks them (results and
heartbeats), and when a worker fails or falls silent it stops the segment and restarts it
from the last checkpoint: BSP workers cannot go on without the lost one, and the seeded
minibatch order makes the rerun compute the same model. Every
invocation is billed, failed ones too. The budget is a hard guard: a segment whose predicted
cost does not fit what is left is never started; the run stops cleanly with its checkpoints.

This module holds the run loop and the tracking of running segments; the parts it owns and
wires: ``partitions`` (data), ``stores`` (where workers synchronise), ``launcher`` (launching,
prewarming, the budget guard), ``failures`` (restarts), ``commits`` (trial history) and
``billing`` (bills), sharing ``state.CoordinatorState`` (options, namespace, clock, timings).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from faasml.catalog import Catalog
from faasml.loop import is_loop
from faasml.runtime.coordinator.billing import SegmentBiller
from faasml.runtime.coordinator.commits import Committer
from faasml.runtime.coordinator.estimates import SegmentEstimator
from faasml.runtime.coordinator.failures import FailurePolicy, FunctionMove, loop_timeout
from faasml.runtime.coordinator.launcher import Launcher, LaunchParts, Prewarm
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.coordinator.partitions import Partitions
from faasml.runtime.coordinator.state import (
    SYSTEM_CLOCK,
    BudgetExhaustedError,
    CoordinatorOptions,
    CoordinatorState,
    RunClock,
    Segment,
)
from faasml.runtime.coordinator.stores import SyncStores
from faasml.runtime.coordinator.trial import TrialFault, TrialState
from faasml.runtime.function.task import sent_recipe
from faasml.runtime.function.worker import ModelRecipe, SegmentReport
from faasml.runtime.platforms.contract import Platform
from faasml.sync.stores import Store
from faasml.types import Allocation
from faasml.workloads.data import Dataset


class Coordinator:
    """Starts, tracks, restarts and bills the workers of trials (see the module docstring)."""

    def __init__(
        self,
        platform: Platform,
        catalog: Catalog,
        meter: Meter,
        objects: Store,
        sync_url: str,
        recipe_of: Callable[[TrialState], ModelRecipe],
        *,
        namespace: str,
        budget_usd: float | None = None,
        options: CoordinatorOptions | None = None,
        faults: list[TrialFault] | None = None,
        on_segment: Callable[[TrialState, Segment | None], None] | None = None,
        clock_origin: float | None = None,
        stores: Mapping[str, str] | None = None,
        clock: RunClock | None = None,
    ) -> None:
        """``sync_url`` is the store gradients go through; ``stores`` maps catalog storage
        names to the stores of those names, for allocations the planner put on them;
        ``on_segment`` writes the run record (after committed segments, and failed ones);
        ``clock`` is the run's time (a simulator's virtual clock; the machine's by default)."""
        self.platform = platform
        self.catalog = catalog
        self.meter = meter
        self.objects = objects
        self.recipe_of = recipe_of
        self._budget_usd = budget_usd
        self.estimator = SegmentEstimator(catalog.platform)
        clock = clock or SYSTEM_CLOCK
        origin = clock.monotonic() if clock_origin is None else clock_origin
        self._state = CoordinatorState(
            options or CoordinatorOptions(), namespace.rstrip("/"), origin, clock=clock
        )
        state = self._state
        self._partitions = Partitions(objects, state)
        sync_stores = SyncStores(sync_url, stores)
        self._biller = SegmentBiller(
            platform, catalog, meter, self.estimator, sync_stores, state.now
        )
        self._failures = FailurePolicy(
            catalog, objects, self.estimator, self._biller, state, on_segment
        )
        self._committer = Committer(
            catalog,
            objects,
            self.estimator,
            self._failures,
            self._biller.spent_usd,
            state,
            on_segment,
        )
        parts = LaunchParts(self._partitions, sync_stores, self._biller, self._failures)
        self._shipped: set[str] = set()
        self._launcher = Launcher(
            platform,
            catalog,
            objects.url,
            self.estimator,
            parts,
            self.sent_recipe,
            state,
            budget_usd=budget_usd,
            faults=faults,
        )

    def sent_recipe(self, trial: TrialState) -> ModelRecipe:
        """The recipe the trial's workers are sent: a training function in it by reference,
        put once in the run's object store (``task.sent_recipe``)."""
        return sent_recipe(self.recipe_of(trial), self.objects, self._shipped)

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
        next stage's functions, started during this one's last wave (``Launcher.prewarm_next``)."""
        entered = self._state.clock.monotonic()
        try:
            self._run(trials, allocation, until_epoch, then)
        finally:
            self.timings["run_s"] += self._state.clock.monotonic() - entered

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
                sized = self._failures.sized(trial, allocation)
                if self.stop_reason is not None or not self._launcher.fits(running, sized):
                    continue
                began = self._state.clock.monotonic()
                try:
                    segment = self._launcher.launch(trial, allocation, running, until_epoch)
                except BudgetExhaustedError as stop:
                    self.stop_reason = str(stop)
                    continue
                finally:
                    self.timings["launch_s"] += self._state.clock.monotonic() - began
                if segment is not None:
                    running.append(segment)
                    launched = True
            self._committer.record()  # the segments committed last: after the next ones started
            if (
                then is not None
                and running
                and self._launcher.prewarm_next(then, waiting, running, until_epoch)
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
            beat = self._state.clock.monotonic()
            self._state.clock.sleep(self.options.poll_s)
            self._count_demand(running, self._state.clock.monotonic() - beat)
            for segment in list(running):
                if self._poll(segment):
                    running.remove(segment)
            self._failures.check_silent(running)
            self._biller.collect_standalone()
        self._biller.collect_standalone()
        for trial in waiting:
            if trial.status == "running":
                trial.status = "stopped" if self.stop_reason else trial.status

    def guard_refusal(
        self, stages: list[tuple[Allocation, int, int]], trials: list[TrialState]
    ) -> str | None:
        """What the budget guard would refuse of stages still to run, each (allocation, trials,
        epochs): stage by stage as a run starts them, each training that many of ``trials``
        (the best first; ``Launcher.guard_replay``). None where it would start them all, or
        without a budget."""
        if self._budget_usd is None or not trials:
            return None
        left = self._budget_usd - self._biller.spent_usd()
        for allocation, count, epochs in stages:
            chosen = trials[: max(1, min(count, len(trials)))]
            left, refused = self._launcher.guard_replay(chosen, allocation, epochs, left)
            if refused is not None:
                return refused
        return None

    def run_segment(self, trial: TrialState, allocation: Allocation, max_rounds: int) -> bool:
        """Run one segment of ``trial`` on ``allocation`` — at most ``max_rounds`` rounds —
        and wait for it (a deployment search's probe); billed like any segment. False when
        the platform refused it; a failure is in ``trial.failures``."""
        options = self.options
        self.options = dataclasses.replace(options, max_rounds_per_invocation=max_rounds)
        try:
            self.prepare_partitions(allocation.n)
            segment = self._launcher.launch(trial, allocation, [])
            if segment is None:
                return False
            while not self._poll(segment):
                self._state.clock.sleep(options.poll_s)
            return True
        finally:
            self.options = options
            self._committer.record()
            self._biller.collect_standalone()

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
            reason, kind = FailurePolicy.reason(failed[0]), FailurePolicy.kind(failed[0])
            if (
                kind == "timeout"
                and segment.epochs == 1
                and not segment.budget_capped
                and is_loop(self.recipe_of(trial).model)
            ):  # a loop's one epoch outlasted the limit: a rerun would too
                reason = loop_timeout(segment.timeout_s)
            self._failures.fail(segment, reason, kind)
            return True
        reports: list[SegmentReport] = [i.result() for i in segment.invocations]
        for invocation in segment.invocations:
            self._biller.bill(invocation, trial)
        self._account(segment, reports)
        self._biller.bill_requests(segment, reports)
        began = self._state.clock.monotonic()
        self._committer.commit(segment, reports)
        self.timings["commit_s"] += self._state.clock.monotonic() - began
        return True

    def _account(self, segment: Segment, reports: list[SegmentReport]) -> None:
        """Add a finished segment's parts to ``timings`` (``state.TIMINGS``)."""
        wall = self._state.clock.monotonic() - segment.started
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
            self._committer.record()
        finally:
            self._biller.collect_standalone()
            self._biller.close_services()

    # What runs read and set between stages (the parts share it through ``CoordinatorState``).

    @property
    def options(self) -> CoordinatorOptions:
        return self._state.options

    @options.setter
    def options(self, value: CoordinatorOptions) -> None:
        self._state.options = value

    @property
    def namespace(self) -> str:
        """The prefix of the run's keys in the stores (a workflow's phase has its own)."""
        return self._state.namespace

    @namespace.setter
    def namespace(self, value: str) -> None:
        self._state.namespace = value

    @property
    def budget_usd(self) -> float | None:
        """The budget the launcher guards (None: no budget)."""
        return self._budget_usd

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped (None while it may go on)."""
        return self._state.stop_reason

    @stop_reason.setter
    def stop_reason(self, value: str | None) -> None:
        self._state.stop_reason = value

    @property
    def timings(self) -> dict[str, float]:
        """Where the run's time went, summed over segments (``state.TIMINGS``)."""
        return self._state.timings

    @property
    def predicted_round_s(self) -> Callable[[Allocation], float] | None:
        """The performance model's seconds per round, used until a run measures them."""
        return self.estimator.predicted_round_s

    @predicted_round_s.setter
    def predicted_round_s(self, value: Callable[[Allocation], float] | None) -> None:
        self.estimator.predicted_round_s = value

    @property
    def samples(self) -> int:
        """Samples in the training set (``set_data``)."""
        return self._partitions.samples

    @property
    def data_prefix(self) -> str:
        """Where the run's data is in the object store."""
        return self._partitions.data_prefix

    @property
    def segments(self) -> int:
        """Segments started."""
        return self._launcher.segments

    @property
    def launches_s(self) -> list[float]:
        """The coordinator's own seconds launching each segment."""
        return self._launcher.launches_s

    @property
    def commits_s(self) -> list[float]:
        """The coordinator's own seconds committing each finished segment."""
        return self._committer.commits_s

    @property
    def restarts(self) -> int:
        """Segments restarted after a failure."""
        return self._failures.restarts

    @property
    def memory_moves(self) -> list[tuple[int, int, int]]:
        """(trial, from MB, to MB) of every move after running out of memory."""
        return self._failures.memory_moves

    @property
    def function_moves(self) -> list[FunctionMove]:
        """Every move to fewer functions after repeated synchronisation failures."""
        return self._failures.function_moves

    def now(self) -> float:
        """Seconds since the run's time zero."""
        return self._state.now()

    def spent_usd(self) -> float:
        """Billed so far, with what services in use have run up (billed at close)."""
        return self._biller.spent_usd()

    def set_data(self, train: Dataset, test: Dataset) -> None:
        """Put the test set in the object store; training partitions are written per n when
        needed (new data, under a new ``namespace``, gets its own)."""
        self._partitions.set_data(train, test)

    def prepare_partitions(self, n: int) -> None:
        """Write the n partitions of the training data to the object store (once per n)."""
        self._partitions.prepare(n)

    def partition_write_mbps(self) -> float | None:
        """MB a second the partitions were written at (None before any was written)."""
        return self._partitions.write_mbps()

    def prewarm(self, allocation: Allocation, count: int | None = None) -> int:
        """Start ``count`` (default n) functions of ``allocation`` now, to take over at the
        next segment; returns how many started (``Launcher.prewarm``)."""
        return self._launcher.prewarm(allocation, count)

    def release_replaced(self) -> None:
        """Delete the checkpoints replaced by segments the run's record names (the run calls
        it after each durable write of its record, ``Committer.release_replaced``)."""
        self._committer.release_replaced()
