"""The coordinator (SMLT §4.1 task scheduler): runs trials as groups of worker invocations.

A trial trains in *segments*: one invocation per worker for the rounds of one epoch (or part
of one, when an epoch would outlast the platform's duration limit: the function is renewed from
the checkpoint before its time runs out). The coordinator starts the n workers of a segment
together, tracks them (results and heartbeats), and when a worker fails or falls silent it
stops the segment and restarts it from the last checkpoint: BSP workers cannot go on without
the lost one, and the seeded minibatch order makes the rerun compute the same model. Every
invocation is billed, failed ones too. The budget is a hard guard: a segment whose predicted
cost does not fit what is left is never started; the run stops cleanly with its checkpoints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faasml.catalog import Catalog, StorageService
from faasml.exceptions import FaasmlError, StoreUnavailableError
from faasml.runtime.billing import Meter
from faasml.runtime.estimates import BUDGET_MARGIN, SegmentEstimator, reservation
from faasml.runtime.platform import CapacityError, FunctionError, Invocation, Platform
from faasml.runtime.trial import TrialFault, TrialState
from faasml.runtime.worker import Fault, ModelRecipe, SegmentReport, WorkerTask, rounds_per_epoch
from faasml.sync.stores import Store
from faasml.types import Allocation
from faasml.workloads._dataset import dataset_to_bytes, partition
from faasml.workloads.data import Dataset

WORKER_FN = "faasml.runtime.worker:run_segment"
LOST_STORE = "its store was unavailable"


@dataclass(frozen=True)
class CoordinatorOptions:
    max_restarts: int = 3
    """Restarts of one segment before its trial is marked failed."""
    silent_after_s: float = 30.0
    """A worker whose heartbeat is older than this (while its segment runs) is restarted."""
    start_allowance_s: float = 30.0
    """Extra time a worker has for its first heartbeat: a cold start (a process importing
    numpy or torch on a loaded machine) is slow, not silent."""
    sync_timeout_s: float = 30.0
    max_rounds_per_invocation: int | None = None
    """Renew functions after this many rounds (None: from the duration limit)."""
    renew_at: float = 0.7
    """Renew when a segment would use more than this share of the duration limit."""
    poll_s: float = 0.005


@dataclass
class _Segment:
    trial: TrialState
    allocation: Allocation
    invocations: list[Invocation]
    stop_batch: int | None
    checkpoint_out: str
    token: str
    started: float
    estimate_usd: float
    rounds: int
    budget_capped: bool = False
    sync_url: str = ""
    reserve_usd: float = 0.0
    """Most this segment can still bill (its functions are stopped at ``timeout_s``)."""
    timeout_s: float = 0.0


class BudgetExhaustedError(FaasmlError):
    """Internal: the next segment does not fit the budget."""


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
        on_segment: Callable[[TrialState, _Segment | None], None] | None = None,
        clock_origin: float | None = None,
        stores: Mapping[str, str] | None = None,
    ) -> None:
        """``sync_url`` is the store gradients go through; ``stores`` maps catalog storage
        names to the stores of those names, for allocations the planner put on them."""
        self.platform = platform
        self.catalog = catalog
        self.meter = meter
        self.objects = objects
        self.sync_url = sync_url
        self.stores = dict(stores or {})
        self.recipe_of = recipe_of
        self.namespace = namespace.rstrip("/")
        self.budget_usd = budget_usd
        self.options = options or CoordinatorOptions()
        self.faults = list(faults or [])
        self.on_segment = on_segment
        self.origin = time.monotonic() if clock_origin is None else clock_origin
        self.samples = 0
        self._prepared: set[int] = set()
        self.estimator = SegmentEstimator(catalog.platform)
        self.stop_reason: str | None = None
        self._server: Any = None
        self._in_use_since: dict[str, float] = {}
        """First use of each storage service, for time-priced ones (billed while in use)."""
        self._silent_checked = 0.0
        self.segments = 0
        self.restarts = 0
        self.memory_of: dict[int, int] = {}
        """Trial -> the memory it was moved to after running out (kept for later stages)."""
        self.memory_moves: list[tuple[int, int, int]] = []
        """(trial, from MB, to MB) of every move after running out of memory."""
        self.busy_s = 0.0
        """Wall seconds some segment was running (for the coordinator overhead figure)."""

    # ------------------------------------------------------------------ data

    @property
    def data_prefix(self) -> str:
        return f"{self.namespace}/data"

    def set_data(self, train: Dataset, test: Dataset) -> None:
        """Put the test set in the object store; partitions are written per n when needed."""
        self._train = train
        self.samples = len(train)
        self.objects.put(f"{self.data_prefix}/test", dataset_to_bytes(test))

    def prepare_partitions(self, n: int) -> None:
        """Write the n partitions of the training data to the object store (once per n)."""
        if n in self._prepared:
            return
        prefix = f"{self.data_prefix}/n{n}"
        if self.objects.get(f"{prefix}/samples") is None:
            for worker in range(n):
                part = partition(self._train, worker, n)
                self.objects.put(f"{prefix}/part-{worker}", dataset_to_bytes(part))
            self.objects.put(f"{prefix}/samples", str(self.samples).encode())
        self._prepared.add(n)

    # ------------------------------------------------------------------ time

    def now(self) -> float:
        return time.monotonic() - self.origin

    def spent_usd(self) -> float:
        """Billed so far, plus what time-priced services in use have run up (billed at close)."""
        return self.meter.total_usd + sum(
            (self.now() - since) / 3600.0 * service.hourly_usd
            for service, since in self._time_priced()
        )

    def _time_priced(self) -> list[tuple[StorageService, float]]:
        services = ((self.catalog.storages.get(name), t) for name, t in self._in_use_since.items())
        return [(s, t) for s, t in services if s is not None and s.pricing == "time"]

    # ------------------------------------------------------------------ running

    def run(self, trials: list[TrialState], allocation: Allocation, until_epoch: int) -> None:
        """Train every trial in ``trials`` on ``allocation`` until it has ``until_epoch``
        epochs done, running as many at once as the platform's capacity allows. Trials the
        budget cannot pay for are marked 'stopped' and ``stop_reason`` says why."""
        self.prepare_partitions(allocation.n)
        running: list[_Segment] = []
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
                try:
                    segment = self._launch(trial, allocation, running)
                except BudgetExhaustedError as stop:
                    self.stop_reason = str(stop)
                    continue
                if segment is not None:
                    running.append(segment)
                    launched = True
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
            for segment in list(running):
                if self._poll(segment):
                    running.remove(segment)
            self.busy_s += time.monotonic() - beat
            self._check_silent(running)
            self._collect_standalone()
        self._collect_standalone()
        for trial in waiting:
            if trial.status == "running":
                trial.status = "stopped" if self.stop_reason else trial.status

    def _collect_standalone(self) -> None:
        for billed in self.platform.take_standalone_bills():
            self.meter.standalone(billed, self.now())

    def _fits(self, running: list[_Segment], allocation: Allocation) -> bool:
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

    @property
    def predicted_round_s(self) -> Callable[[Allocation], float] | None:
        """The performance model's seconds per round, used until a run measures them."""
        return self.estimator.predicted_round_s

    @predicted_round_s.setter
    def predicted_round_s(self, value: Callable[[Allocation], float] | None) -> None:
        self.estimator.predicted_round_s = value

    def _launch(
        self, trial: TrialState, allocation: Allocation, running: list[_Segment]
    ) -> _Segment | None:
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
        timeout, capped, reserve = reservation(self.catalog.platform, allocation, estimate, left)
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
            failed = _Segment(trial, allocation, invocations, stop, out, token, 0.0, 0.0, 0)
            failed.sync_url = self._sync_url(allocation)
            self._fail(failed, f"a worker could not be started: {err}")
            return None
        self.segments += 1
        return _Segment(
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

    def _bill(self, invocation: Invocation, trial: TrialState) -> None:
        # The platform sets the bill when the invocation ends; wait for that.
        with contextlib.suppress(FunctionError, TimeoutError):
            invocation.result(timeout=60)
        billed = invocation.billed
        if billed is not None:
            self.meter.invocation(billed, self.now(), trial.trial_id)
            self.estimator.observe_billed(billed)

    def _poll(self, segment: _Segment) -> bool:
        """Handle a segment whose invocations ended; True when it is finished with."""
        failed = [i for i in segment.invocations if i.billed is not None and not i.billed.ok]
        if not failed and not all(i.done() for i in segment.invocations):
            return False
        trial = segment.trial
        if failed:
            self._fail(segment, self._reason(failed[0]), _kind(failed[0]))
            return True
        reports: list[SegmentReport] = [i.result() for i in segment.invocations]
        for invocation in segment.invocations:
            self._bill(invocation, trial)
        self._bill_requests(segment, reports)
        self._commit(segment, reports)
        return True

    @staticmethod
    def _reason(invocation: Invocation) -> str:
        try:
            invocation.result(timeout=0)
        except FunctionError as err:
            return str(err)
        except TimeoutError:
            return "no result"
        return "ok"

    def _fail(self, segment: _Segment, reason: str, kind: str = "") -> None:
        trial = segment.trial
        for invocation in segment.invocations:
            invocation.cancel()
        for invocation in segment.invocations:
            self._bill(invocation, trial)
        lost = self._cleanup(segment)
        self.restarts += 1
        trial.restarts += 1
        trial.failures.append(
            f"epoch {trial.epoch + 1} batch {trial.batch}: {reason} at {self.now():.2f} s"
        )
        if lost is not None:
            # Not the trial's fault, and no restart can succeed: stop (not counted).
            self._store_lost(segment, lost)
            trial.failures[-1] += f" ({LOST_STORE})"
        elif kind == "out-of-memory" and self._grow(segment):
            # Restarting at the same size would fail again: the trial moves up (not counted).
            trial.failures[-1] += f" (moved to {self.memory_of[trial.trial_id]} MB)"
        elif segment.budget_capped and "timeout" in reason:
            # It spent its reservation: predict at least twice as long next time; the budget
            # guard then decides whether a retry still fits. Not counted against max_restarts.
            self.estimator.ran_out(segment.allocation, segment.timeout_s)
            trial.failures[-1] += " (its budget reservation ran out)"
        elif sum(
            1
            for f in trial.failures
            if f.startswith(f"epoch {trial.epoch + 1} ")
            and "reservation" not in f
            and LOST_STORE not in f
        ) > (self.options.max_restarts):
            trial.status = "failed"
        if self.on_segment is not None:
            self.on_segment(trial, None)

    def _grow(self, segment: _Segment) -> bool:
        """Give the segment's trial the next memory size that may fit (×1.5, on the catalog's
        grid); False when it already has the most the platform allows."""
        platform = self.catalog.platform
        now = segment.allocation.memory_mb
        step = platform.memory_step_mb
        bigger = min(platform.memory_max_mb, math.ceil(now * 1.5 / step) * step)
        if bigger <= now:
            return False
        self.memory_of[segment.trial.trial_id] = bigger
        self.memory_moves.append((segment.trial.trial_id, now, bigger))
        return True

    def sized(self, trial: TrialState, allocation: Allocation) -> Allocation:
        """``allocation`` with the memory the trial was moved to after running out of it."""
        memory = self.memory_of.get(trial.trial_id, 0)
        if memory <= allocation.memory_mb:
            return allocation
        return dataclasses.replace(allocation, memory_mb=memory)

    def _cleanup(self, segment: _Segment) -> str | None:
        """Delete the segment's keys; what went wrong when its sync store (after the store
        client's retries) cannot be reached, else None."""
        from faasml.sync.stores import open_store

        prefix = f"{self.namespace}/t{segment.trial.trial_id}/{segment.token}/"
        self.objects.delete(prefix)
        try:
            with open_store(segment.sync_url) as sync:
                sync.delete(prefix)
        except StoreUnavailableError as err:
            return str(err)
        return None

    def _store_lost(self, segment: _Segment, error: str) -> None:
        """Stop the run: the store its gradients go through is gone (the first cause only)."""
        if self.stop_reason is None:
            self.stop_reason = (
                f"the {segment.allocation.storage} store (the gradients' store) is unavailable: "
                f"{error.rstrip('.')}; stopped with checkpoints kept: when the store is back, "
                "continue the run with `faasml resume RUN_DIR`"
            )

    def _bill_requests(self, segment: _Segment, reports: list[SegmentReport]) -> None:
        data_service = self.catalog.storage(self.catalog.platform.data_store)
        sync_service = self.catalog.storages.get(segment.allocation.storage, data_service)
        for report in reports:
            self.meter.requests(
                data_service, report.object_stats, self.now(), segment.trial.trial_id
            )
            self.meter.requests(sync_service, report.sync_stats, self.now(), segment.trial.trial_id)

    def _commit(self, segment: _Segment, reports: list[SegmentReport]) -> None:
        trial = segment.trial
        lead = reports[0]
        elapsed = time.monotonic() - segment.started
        if lead.rounds:
            busy = max(r.compute_s + r.sync_s for r in reports) / lead.rounds
            self.estimator.observe_round(segment.allocation, busy, self._overhead(segment, busy))
        previous = trial.checkpoint
        trial.checkpoint = lead.checkpoint
        trial.round_id += lead.rounds
        trial.partial["loss_sum"] = trial.partial.get("loss_sum", 0.0) + sum(
            r.loss_sum for r in reports
        )
        trial.partial["samples"] = trial.partial.get("samples", 0.0) + sum(
            r.samples for r in reports
        )
        trial.partial["seconds"] = trial.partial.get("seconds", 0.0) + elapsed
        trial.partial["compute_s"] = trial.partial.get("compute_s", 0.0) + max(
            r.compute_s for r in reports
        )
        trial.partial["sync_s"] = trial.partial.get("sync_s", 0.0) + max(r.sync_s for r in reports)
        trial.partial["load_s"] = trial.partial.get("load_s", 0.0) + max(r.load_s for r in reports)
        trial.partial["invocations"] = trial.partial.get("invocations", 0.0) + 1
        if lead.epoch_done:
            samples = trial.partial["samples"]
            seconds = trial.partial["seconds"]
            trial.history.append(
                {
                    "epoch": trial.epoch + 1,
                    "loss": trial.partial["loss_sum"] / max(samples, 1.0),
                    "val_loss": lead.val.get("loss"),
                    "val_accuracy": lead.val.get("accuracy"),
                    "epoch_s": seconds,
                    "compute_s": trial.partial["compute_s"],
                    "sync_s": trial.partial["sync_s"],
                    "load_s": trial.partial["load_s"],
                    "samples_per_s": samples / seconds if seconds > 0 else 0.0,
                    "batch_size": lead.batch_size,
                    "reported": {k: v for r in reports for k, v in r.reported.items()},
                    "invocations": int(trial.partial["invocations"]),
                    "n": segment.allocation.n,
                    "memory_mb": segment.allocation.memory_mb,
                    "scheme": segment.allocation.scheme,
                    "t_s": self.now(),
                    "spent_usd": self.spent_usd(),
                }
            )
            trial.partial = {}
            trial.epochs_done += 1
            trial.epoch += 1
            trial.batch = 0
        else:
            trial.batch = segment.stop_batch or 0
        lost = self._cleanup(segment)
        if lost is not None:  # the segment is done, but the next one cannot be
            self._store_lost(segment, lost)
        if self.on_segment is not None:
            self.on_segment(trial, segment)
        # Only now: on_segment records the new checkpoint, and a run killed before that resumes
        # from the previous one.
        if previous is not None and previous != trial.checkpoint:
            self.objects.delete(previous)

    def _overhead(self, segment: _Segment, per_round: float) -> float:
        """Billed seconds of the segment's longest function outside its rounds and start."""
        billed_init = self.catalog.platform.bills_cold_start
        spans = [
            b.duration_s - (b.init_s if b.cold and billed_init else 0.0)
            for b in (i.billed for i in segment.invocations)
            if b is not None
        ]
        return max(spans, default=0.0) - per_round * segment.rounds

    def _check_silent(self, running: list[_Segment]) -> None:
        """Restart a segment with a worker whose heartbeat is older than the bound (checked
        at most once a second: each check reads n heartbeat keys)."""
        if time.monotonic() - self._silent_checked < 1.0:
            return
        self._silent_checked = time.monotonic()
        bound = self.options.silent_after_s
        for segment in list(running):
            if time.monotonic() - segment.started < bound:
                continue
            prefix = f"{self.namespace}/t{segment.trial.trial_id}/{segment.token}/hb/"
            age = time.monotonic() - segment.started
            for worker in range(segment.allocation.n):
                value = self.objects.get(f"{prefix}w{worker}")
                if value is None:
                    silent = age > bound + self.options.start_allowance_s
                else:
                    silent = time.time() - float(value.split()[0]) > bound
                if silent:
                    running.remove(segment)
                    self._fail(segment, f"worker {worker} silent for over {bound:g} s")
                    break

    def _sync_url(self, allocation: Allocation) -> str:
        """The store of ``allocation``: the one configured under its storage's name, else a
        parameter-server process this coordinator starts on loopback for 'param-server' (the
        VM-PS case), else the default store."""
        configured = self.stores.get(allocation.storage)
        if configured is not None:
            return configured
        if allocation.scheme != "param-server":
            return self.sync_url
        if self._server is None:
            from faasml.sync.param_server import ParameterServer

            self._server = ParameterServer().start()
        return self._server.url

    def close(self) -> None:
        """Stop the parameter server and bill the time-priced services used (per second,
        from first use: a node the run needed is paid while the run holds it)."""
        self._collect_standalone()
        now = self.now()
        for service, since in self._time_priced():
            self.meter.server(service, now - since, now)
        self._in_use_since.clear()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def prewarm(self, allocation: Allocation) -> int:
        """Start the functions of ``allocation`` now, to take over at the next segment
        (delayed restart, CE-scaling §III-D)."""
        self.prepare_partitions(allocation.n)
        return self.platform.prewarm(allocation.memory_mb, allocation.n)


__all__ = [
    "WORKER_FN",
    "BudgetExhaustedError",
    "Coordinator",
    "CoordinatorOptions",
    "TrialFault",
    "TrialState",
]


def _kind(invocation: Invocation) -> str:
    """Why an invocation failed (a ``FunctionError`` kind), '' when it did not."""
    try:
        invocation.result(timeout=0)
    except FunctionError as err:
        return err.kind
    except TimeoutError:
        return ""
    return ""
