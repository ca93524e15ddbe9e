"""What tuning and training runs share: the job's data, platform, stores, meter, coordinator,
record, and the measured job profile the plan is made from (what it plans with is worked out
in ``run_planning``; the record is written by a ``record_writer.RecordWriter``).

A run measures the job it will run before it plans (``runtime.job_profile``: footprint, compute
per sample, cold start; billed as 'profiling' and cached), so the planners price the job in the
file, not a paper's workload, and never choose a function smaller than its footprint.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import InfeasibleConstraintError
from faasml.job import JobSpec, apply_config
from faasml.loop import is_loop
from faasml.models.space import evaluate_allocation
from faasml.runtime.coordinator import Coordinator, CoordinatorOptions, TrialFault, TrialState
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.coordinator.ranking import metric_mode
from faasml.runtime.coordinator.state import SYSTEM_CLOCK, RunClock
from faasml.runtime.function.worker import ModelRecipe
from faasml.runtime.platforms.contract import Platform, open_platform
from faasml.runtime.profile.measure import (
    JobProfile,
    measure_job,
    planning_inputs,
    platform_options_for,
)
from faasml.runtime.profile.preparing import Planning, PrepareHook
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.record.function_file import kept_apart
from faasml.runtime.record.records import Event, PlanRecord, RunRecord, TrialRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.record.run_lock import interrupting, interruption, lock_run
from faasml.runtime.record.writer import RecordWriter
from faasml.runtime.runs import planning as run_planning
from faasml.runtime.runs.deadline_check import refuse_before_profiling
from faasml.runtime.runs.events import RunCallback, RunEvents, config_names
from faasml.runtime.runs.inputs import DEFAULT_PROFILE as DEFAULT_PROFILE
from faasml.runtime.runs.inputs import constraint_dict as constraint_dict
from faasml.runtime.runs.inputs import constraint_from_dict as constraint_from_dict
from faasml.runtime.runs.inputs import job_workload as job_workload
from faasml.runtime.runs.inputs import recordable_options
from faasml.runtime.runs.inputs import stores_catalog as stores_catalog
from faasml.runtime.runs.job_guard import seal_fields, source_path
from faasml.sync.stores import open_store
from faasml.types import Allocation, Constraint
from faasml.workloads.build import build_model, load_data


@dataclass(frozen=True)
class Snapshot:
    """A run's progress after a segment, for a console or a caller watching it."""

    stage: int
    """The stage under way, 1-based."""
    stages: int
    alive: int
    """Trials still pending, running or done (a tuning run: in the bracket under way)."""
    epochs_done: int
    spent_usd: float
    budget_usd: float | None
    elapsed_s: float


Progress = Callable[[Snapshot], None]
Outputs = Callable[[RunDir, RunRecord], object]
"""Writes a run's report, curves and plots from its record (``reports.run_outputs``)."""

DURABLE_EVERY_S = 1.0
"""The record is rewritten after every segment, and made durable (fsync) at most this often
then; always at a stage's end, on a stop and at the run's end. A killed coordinator loses none
of it (the kernel holds what was written); a crash of the machine at most this much of the
run's progress, never a checkpoint the record on disk names (a replaced checkpoint is deleted
only after a durable write)."""


class BaseRun:
    """What tuning and training share: data, platform, stores, meter, coordinator, record."""

    kind = ""
    plan_contention = True
    """Plans priced with the contention the probe measured (False: ``planner_catalog``)."""

    def __init__(
        self,
        job: JobSpec,
        constraint: Constraint,
        run_dir: str | Path,
        *,
        record: RunRecord | None = None,
        faults: list[TrialFault] | None = None,
        options: CoordinatorOptions | None = None,
        progress: Progress | None = None,
        platform_options: dict[str, Any] | None = None,
        catalog: Catalog | None = None,
        measure: bool = True,
        reprofile: bool = False,
        outputs: Outputs | None = None,
        callbacks: Sequence[RunCallback] = (),
        platform: Platform | None = None,
        clock: RunClock | None = None,
    ) -> None:
        """``measure`` plans from the job's measured profile (cached; ``reprofile`` measures
        again); without it the plan uses the named workload profile (``profile:``).
        ``outputs`` writes the report, curves and plots from the record at the end
        (``faasml.reports.run_outputs.write_outputs``); without it the run writes its record
        only. ``callbacks`` receive the run's typed events (``runtime.events``). ``platform``
        runs the job in place of the one it names (a simulator's); ``clock`` is the run's time
        (a simulator's virtual clock; the machine's by default)."""
        self.job = job
        self.constraint = constraint
        self.dir = RunDir(run_dir)
        self.progress = progress
        self.on_prepare: PrepareHook | None = None
        """Hears of each call of the job's probe, then that the planner runs (a console's)."""
        self.events = RunEvents(callbacks, self.event, names=config_names(job))
        self.stores = job.sync_stores()
        self.catalog = stores_catalog(catalog or load_catalog(job.catalog), self.stores)
        self.train, self.test = load_data(job.dataset)
        self.model = build_model(job.model, self.train.input_shape, self.train.num_classes)
        self.workload = job_workload(job, self.train, self.model)
        self.plan_catalog = self.catalog
        """The catalog the planners price with: the measured cold start and per-invocation
        overhead in place of the catalog's (prices unchanged)."""
        self.measure, self.reprofile = measure, reprofile
        self.outputs = outputs
        self.profile: JobProfile | None = None
        self._profiled: Catalog | None = None
        """The catalog as the profile priced it (the run's epochs are checked with it)."""
        self.compute_note: str | None = None
        """What the configurations this run trains cost against the profile's mean, where it
        is not the mean (one console line; an event in the record)."""
        self.record = record or RunRecord(
            kind=self.kind,
            job=kept_apart(job.to_dict(redact=True), Path(run_dir)),
            job_source=source_path(job.source),
            constraint=constraint,
            catalog=self.catalog.name,
            platform=job.platform,
            platform_options=recordable_options(platform_options or {}),
        )
        if not record:  # a new record: what it may run again is the user's own (job_guard)
            sealed = seal_fields(record_to_json(self.record))
            self.record.job_file_sha256 = sealed.get("job_file_sha256")
            self.record.job_signature = sealed.get("job_signature")
        self.meter = Meter(self.catalog, list(self.record.charges))
        self.faults = faults or []
        self.options = options or CoordinatorOptions()
        self.platform_options = platform_options_for(job, self.model, platform_options or {})
        self._platform: Platform | None = None
        self._given_platform = platform
        self.clock: RunClock = clock or SYSTEM_CLOCK
        self._writer = RecordWriter(self.dir)
        self._started = self.clock.monotonic()
        self._recipes: dict[int, ModelRecipe] = {}
        self.trials: list[TrialState] = [t.state() for t in self.record.trials]

    # ------------------------------------------------------------------ pieces

    def recipe(self, trial: TrialState) -> ModelRecipe:
        if trial.trial_id not in self._recipes:
            job = apply_config(self.job, trial.config) if trial.config else self.job
            options = job.model_options()
            if is_loop(job.model.name):  # a loop's ctx.max_epochs: the most a trial trains
                options["max_epochs"] = self._loop_epochs()
            self._recipes[trial.trial_id] = ModelRecipe(
                model=job.model.name,
                model_options=options,
                input_shape=tuple(self.train.input_shape),
                num_classes=self.train.num_classes,
                optimizer=job.optimizer.name,
                hyperparameters=dict(job.optimizer.hyperparameters),
                batch_size=job.batch_size,
                seed=job.seed,
            )
        return self._recipes[trial.trial_id]

    def _loop_epochs(self) -> int:
        """The epochs a trial trains at most: the plan's stages' (tuning), else ``max_epochs``."""
        plan = self.record.plan
        if self.kind != "train" and plan is not None and plan.stages:
            return sum(stage.epochs for stage in plan.stages)
        return int(self.job.training.max_epochs)

    def predicted_round_s(self, allocation: Allocation) -> float:
        """t'(θ) / k of the performance model (CE-scaling eq. 2) for ``allocation``."""
        table = evaluate_allocation(self.workload, self.plan_catalog, allocation)
        if len(table) == 0:
            return 0.0
        k = int(self.workload.iterations_per_epoch(allocation.n))
        return float(table.time_s[0]) / max(k, 1)

    def save(self) -> None:
        """Write the record (atomically; durably, but for ``save_segment``'s)."""
        self._writer.count(self.record)
        self.record.trials = [TrialRecord.of(t) for t in self.trials]
        best = self.record.best
        if best is not None and any(
            t.trial_id == best.trial and t.status in ("failed", "diverged") for t in self.trials
        ):
            self._best_lost()
        self.record.charges = self.meter.snapshot()
        self._writer.write(self.record, DURABLE_EVERY_S)

    def _best_lost(self) -> None:
        """The best trial so far failed (mid-stage): it is no longer the best."""
        self.record.best = None

    def event(self, text: str) -> None:
        self.record.events.append(Event(round(self._elapsed(), 3), text))

    def _elapsed(self) -> float:
        return self.record.elapsed_s + (self.clock.monotonic() - self._started)

    def platform(self) -> Platform:
        """The run's platform, opened once: the probe's warm functions serve the run."""
        if self._platform is None:
            self._platform = self._given_platform or open_platform(
                self.job.platform, self.catalog, **self.platform_options
            )
            # Plans and launches within what the back-end really runs at once.
            limit = self._platform.max_concurrency
            self.catalog = self.catalog.with_concurrency(limit)
            self.plan_catalog = self.plan_catalog.with_concurrency(limit)
        return self._platform

    def measured(self) -> None:
        """Plan from the job's measured profile: the one in the record (a resumed run), the
        cached one, or a new measurement on the run's platform (billed as 'profiling')."""
        record = self.record
        if not self.measure and record.profile is None:
            return
        if record.profile is not None:
            profile = record.profile
        else:
            platform = self.platform()  # first: it may narrow the catalog's concurrency
            profile = measure_job(
                self.job,
                self.catalog,
                platform,
                meter=self.meter,
                platform_options=self.platform_options,
                refresh=self.reprofile,
                before_probe=self._deadline_before_profiling,
                on_step=self.on_prepare,
            )
            record.profile, record.profile_cached = profile, profile.cached
            where = "from the cache" if profile.cached else f"in {profile.profiling_s:.1f} s"
            self.event(f"job profile {where}: {profile.summary()}")
            if profile.check is not None:
                self.event(profile.check.line())
        self.profile = profile
        if record.coordinator_s is None or not record.coordinator_s < 60:
            # Measured once (a resumed run keeps its figure; an implausible one is measured again).
            self.save()  # durable: the profile is kept whatever follows
            record.coordinator_s = run_planning.coordinator_write_s(
                self.dir, record, self.options.poll_s
            )
        record.compute_factor = cost = self._compute_factor(profile)
        note = run_planning.compute_note(profile, cost, self._trained_what())
        if note is not None:
            self.compute_note = note
            if not any(e.text == note for e in record.events):
                self.event(note)  # once: a resumed run measures it again
        self.workload, self.plan_catalog = planning_inputs(
            profile,
            self.workload,
            self.catalog,
            coordinator_s=record.coordinator_s,
            compute_factor=cost,
        )
        self._profiled = self.plan_catalog
        if record.calibration is not None:  # corrections a resumed run had made
            self.workload, self.plan_catalog = record.calibration.recalibrated(
                self.workload, self.plan_catalog
            )
        if self.on_prepare is not None:
            self.on_prepare(Planning(cached=record.profile_cached is not False))

    def _check_profile(self, histories: list[list[dict[str, Any]]], epochs: range) -> None:
        """Correct a cached profile the run's own ``epochs`` disagree with, for the next run
        (``job_profile.epochs_checked``); this one is corrected by its calibration."""
        line = run_planning.profile_check_line(
            self.profile, self._profiled, self.record, histories, epochs
        )
        if line is not None:
            self.event(line)

    def _trained_what(self) -> str:
        return "job's own configuration trains"

    def _compute_factor(self, profile: JobProfile) -> float:
        """The training cost of the configuration this run trains (``config_factor``)."""
        return run_planning.config_factor(self.job, profile)

    def _probe_warm(self) -> dict[int, int]:
        """Functions the job's probe left warm on this run's platform (``probe_warm``)."""
        return run_planning.probe_warm(self.profile, self.record, self._platform, self.plan_catalog)

    def planner_catalog(self) -> Catalog:
        """What the planners price with (``run_planning.planner_catalog``)."""
        return run_planning.planner_catalog(self.plan_catalog, self.plan_contention)

    def _deadline_before_profiling(self) -> None:
        """Refuse a deadline that measuring the job is expected to use up, before measuring."""
        if self.constraint.deadline_s is not None:
            refuse_before_profiling(self.job.name, self.constraint.deadline_s, self.catalog)

    def refused(self, err: InfeasibleConstraintError) -> InfeasibleConstraintError:
        """The planner's refusal ``err`` saying what measuring the job took of the constraint."""
        spent_s = run_planning.profiling_s(self.profile, self.record)
        return run_planning.refused(err, self.constraint, spent_s, self.meter.total_usd)

    def planning_constraint(self) -> Constraint:
        """The constraint less what measuring the job took (money, and time when measured now)."""
        spent_s = run_planning.profiling_s(self.profile, self.record)
        return run_planning.planning_constraint(
            self.job.name, self.constraint, self.meter.total_usd, spent_s
        )

    def _open(self) -> tuple[Platform, Coordinator]:
        if self.profile is None and self.record.profile is not None:
            self.measured()  # a resumed run plans and guards with the profile it was planned on
        platform = self.platform()
        platform.ready()  # the platform's own start-up is before the run's clock
        self._started = self.clock.monotonic()
        objects = open_store(f"embedded://{self.dir.path.resolve() / 'objects'}")
        sync_url = "embedded://" + str(self.dir.sync_dir())
        stores = {name: url for name, url in self.stores.items() if url is not None}
        coordinator = Coordinator(
            platform,
            self.catalog,
            self.meter,
            objects,
            sync_url,
            self.recipe,
            namespace="run",
            budget_usd=self.constraint.budget_usd,
            options=self.options,
            faults=self.faults,
            on_segment=self._on_segment,
            clock_origin=self._started - self.record.elapsed_s,
            stores=stores,
            clock=self.clock,
        )
        coordinator.predicted_round_s = self.predicted_round_s
        # Segment predictions (the budget guard's) start from the measured cold start.
        coordinator.estimator.platform = self.plan_catalog.platform
        self._writer.follow(coordinator, self.record)
        coordinator.set_data(self.train, self.test)
        self.record.enforcement = {
            key: str(value) for key, value in dataclasses.asdict(platform.enforcement).items()
        }
        return platform, coordinator

    def save_segment(self) -> None:
        """The record after a segment: written whole, but fsynced only where the last fsync
        is ``DURABLE_EVERY_S`` old (an fsync costs tens of milliseconds on a busy disk, against
        segments of as many)."""
        self._writer.lazy = True
        try:
            self.save()
        finally:
            self._writer.lazy = False

    def _on_segment(self, trial: TrialState, segment: object) -> None:
        self.save_segment()
        if self.progress is not None:
            self.progress(self.snapshot())
        self._send_results()

    def _metric(self) -> str:
        """The job's ranking metric ('loss' for a job that does not tune)."""
        return self.job.tuning.metric if self.job.tuning is not None else "loss"

    def _start_events(self) -> None:
        """``on_run_start`` (a resumed run's epochs so far are not sent again)."""
        metric, tuning = self._metric(), self.job.tuning
        mode = metric_mode(metric, tuning.mode if tuning is not None else None)
        self.events.start(str(self.dir.path), self.job.name, self.kind, metric, mode, self.trials)

    def _send_results(self) -> None:
        """The epochs committed since the last call, to the callbacks (``runtime.events``)."""
        if self.events.callbacks:
            stage, elapsed = self.record.stage + 1, self._elapsed()
            self.events.results(self.trials, self.meter, stage, self._metric(), elapsed)

    def snapshot(self) -> Snapshot:
        """The run's progress now (``Snapshot``)."""
        return Snapshot(
            stage=self.record.stage + 1,
            stages=len(self.record.plan.stages) if self.record.plan is not None else 1,
            alive=self._alive(),
            epochs_done=sum(t.epochs_done for t in self.trials),
            spent_usd=self.meter.total_usd,
            budget_usd=self.constraint.budget_usd,
            elapsed_s=self._elapsed(),
        )

    def _alive(self) -> int:
        """Trials still pending, running or done."""
        return sum(t.status in ("pending", "running", "done") for t in self.trials)

    def execute(self) -> RunRecord:
        """Run (or continue) to the end, holding the run directory's lock; returns the final
        record. Its ``outputs`` (report, curves, plots) are written before the record says how
        the run ended; a Ctrl-C or a full disk leaves it 'interrupted', to resume."""
        with lock_run(self.dir.path):
            self._start_events()
            try:
                record = self._execute()
            except BaseException as err:
                self._run_end(err)
                raise
            self._run_end(None)
            return record

    def _run_end(self, err: BaseException | None) -> None:
        """``on_run_end`` with how the run ended (``err``: what stopped it, if anything)."""
        noted, path = len(self.record.events), str(self.dir.path)
        if self.events.callbacks:
            self.events.run_end(self.trials, self.meter, self.record, err, path, self._metric())
        if err is None and len(self.record.events) > noted:  # a callback failed: recorded too
            self.save()

    def _execute(self) -> RunRecord:
        platform, coordinator = self._open()
        record = self.record
        record.status = "running"
        ended = ""
        try:
            self._drive(coordinator)
            if coordinator.stop_reason:
                ended = "stopped"
                record.stop_reason = coordinator.stop_reason
                self.event(coordinator.stop_reason)
            elif record.status == "running":
                done = any(t.status == "done" for t in self.trials)
                missed = record.outcome == "target-missed"
                ended = ("target-missed" if missed else "finished") if done else "failed"
        except BaseException as err:
            if interrupting(err):
                record.status = "interrupted"
                self.event(f"interrupted: {interruption(err)}")
            raise
        finally:
            try:
                try:  # bills the time-priced services up to now, so before the run's time is taken
                    coordinator.close()
                finally:
                    record.elapsed_s = self._elapsed()
                    self.save()
            finally:  # even where the record cannot be written (a full disk)
                self._writer.unfollow()
                platform.close()
                self._platform = None
                coordinator.objects.close()
                # The parameter store holds only rounds in flight (each segment has its own
                # namespace, a resumed segment starts a new one): nothing in it is needed later.
                shutil.rmtree(self.dir.sync_dir(), ignore_errors=True)
            if not ended:  # else written once more below, after the outputs
                self.save()
        if ended:
            record.status = ended
        if self.outputs is not None:  # first: a run killed now still has its report
            self.outputs(self.dir, record)
        self.save()
        return record

    def plan(self) -> PlanRecord:
        """Measure the job and plan the run; the record keeps the plan."""
        raise NotImplementedError

    def _drive(self, coordinator: Coordinator) -> None:
        raise NotImplementedError
