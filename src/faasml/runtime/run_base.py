"""What tuning and training runs share: the job's data, platform, stores, meter, coordinator,
record, and the measured job profile the plan is made from.

A run measures the job it will run before it plans (``runtime.job_profile``: footprint, compute
per sample, cold start; billed as 'profiling' and cached), so the planners price the job in the
file, not a paper's workload, and never choose a function smaller than its footprint.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import ConfigError, InfeasibleConstraintError
from faasml.job import JobSpec, apply_config
from faasml.loop import is_loop
from faasml.models.space import evaluate_allocation
from faasml.runtime.billing import Meter, refused_after_profiling
from faasml.runtime.calibration import compute_ratio
from faasml.runtime.config_cost import factor
from faasml.runtime.coordinator import Coordinator, CoordinatorOptions, TrialFault, TrialState
from faasml.runtime.deadline_check import refuse_before_profiling, refused_after_profiling_s
from faasml.runtime.estimates import coordinator_seconds
from faasml.runtime.events import RunCallback, RunEvents, config_names
from faasml.runtime.job_guard import seal_fields, source_path
from faasml.runtime.job_profile import (
    MAX_GROUP,
    JobProfile,
    epochs_checked,
    measure_job,
    planning_inputs,
    platform_options_for,
)
from faasml.runtime.platform import Platform, open_platform
from faasml.runtime.preparing import Planning, PrepareHook
from faasml.runtime.ranking import metric_mode
from faasml.runtime.record import Event, PlanRecord, RunRecord, TrialRecord
from faasml.runtime.record_json import record_to_json
from faasml.runtime.run_dir import RunDir
from faasml.runtime.run_inputs import DEFAULT_PROFILE as DEFAULT_PROFILE
from faasml.runtime.run_inputs import constraint_dict as constraint_dict
from faasml.runtime.run_inputs import constraint_from_dict as constraint_from_dict
from faasml.runtime.run_inputs import job_workload as job_workload
from faasml.runtime.run_inputs import recordable_options
from faasml.runtime.run_inputs import stores_catalog as stores_catalog
from faasml.runtime.run_lock import interrupting, interruption, lock_run
from faasml.runtime.worker import ModelRecipe
from faasml.sync.stores import open_store
from faasml.types import Allocation, Constraint
from faasml.workloads.build import build_model, load_data

Progress = Callable[[dict[str, Any]], None]
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
    ) -> None:
        """``measure`` plans from the job's measured profile (cached; ``reprofile`` measures
        again); without it the plan uses the named workload profile (``profile:``).
        ``outputs`` writes the report, curves and plots from the record at the end
        (``faasml.reports.run_outputs.write_outputs``); without it the run writes its record
        only. ``callbacks`` receive the run's typed events (``runtime.events``)."""
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
            job=job.to_dict(redact=True),
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
        self._counted: tuple[Coordinator, dict[str, int]] | None = None
        self._timings_base: dict[str, float] = {}
        """``timings`` of the record before this process continued it (a resumed run)."""
        self._started = time.monotonic()
        self._synced = 0.0
        """When the record was last made durable (monotonic)."""
        self._lazy = False
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
        if self._counted is not None:  # counts so far, so a killed run's record keeps them
            coordinator, base = self._counted
            self.record.restarts = base["restarts"] + coordinator.restarts
            self.record.segments = base["segments"] + coordinator.segments
            self.record.cold_starts = base["cold_starts"] + coordinator.platform.cold_starts
            previous = self._timings_base
            self.record.timings = {
                key: previous.get(key, 0.0) + value for key, value in coordinator.timings.items()
            }
        self.record.trials = [TrialRecord.of(t) for t in self.trials]
        best = self.record.best
        if best is not None and any(
            t.trial_id == best.trial and t.status in ("failed", "diverged") for t in self.trials
        ):
            self._best_lost()
        self.record.charges = self.meter.snapshot()
        now = time.monotonic()
        durable = not self._lazy or now - self._synced >= DURABLE_EVERY_S
        self.dir.write_record(self.record, durable=durable)
        if durable:
            self._synced = now
            if self._counted is not None:  # the record on disk names their successors now
                self._counted[0].release_replaced()

    def _best_lost(self) -> None:
        """The best trial so far failed (mid-stage): it is no longer the best."""
        self.record.best = None

    def event(self, text: str) -> None:
        self.record.events.append(Event(round(self._elapsed(), 3), text))

    def _elapsed(self) -> float:
        return self.record.elapsed_s + (time.monotonic() - self._started)

    def platform(self) -> Platform:
        """The run's platform, opened once: the probe's warm functions serve the run."""
        if self._platform is None:
            self._platform = open_platform(self.job.platform, self.catalog, **self.platform_options)
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
            began = time.monotonic()
            # A lazy write of the record, as after a segment: of the order of a commit (which
            # updates the trial's history and deletes the segment's keys), a little more.
            self.dir.write_record(record, durable=False)
            seconds = coordinator_seconds([time.monotonic() - began], [], self.options.poll_s)
            record.coordinator_s = seconds
        record.compute_factor = factor = self._compute_factor(profile)
        if profile.config_costs and abs(factor - 1.0) >= 0.005:
            self.compute_note = (
                f"the {self._trained_what()} at {factor:.2f}x the search space's mean cost per "
                "sample (the model configurations as the probe timed them)"
            )
            if not any(e.text == self.compute_note for e in record.events):
                self.event(self.compute_note)  # once: a resumed run measures it again
        self.workload, self.plan_catalog = planning_inputs(
            profile,
            self.workload,
            self.catalog,
            coordinator_s=record.coordinator_s,
            compute_factor=factor,
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
        profile = self.profile
        if self._profiled is None or profile is None or not self.record.profile_cached:
            return
        measured = compute_ratio(
            histories, epochs, profile.compute_points, profile.train_samples, self._profiled
        )
        factor = self.record.compute_factor or 1.0  # the trials' cost, as priced
        line = None if measured is None else epochs_checked(profile, measured / max(factor, 1e-9))
        if line is not None:
            self.event(line)

    def _trained_what(self) -> str:
        return "job's own configuration trains"

    def _compute_factor(self, profile: JobProfile) -> float:
        """The training cost of the configuration this run trains, the job's own, over the
        profile's mean of the search space's (``config_cost``; 1 without one)."""
        own: dict[str, Any] = {"batch_size": self.job.batch_size}
        for text, _ in profile.config_costs:
            for key in json.loads(text):
                if key.startswith("model."):
                    own[key] = self.job.model.options.get(key.split(".", 1)[1])
        return factor(own, profile.config_costs)

    def _probe_warm(self) -> dict[int, int]:
        """Functions the job's probe left warm on this run's platform (none from a cache): as
        the platform counts its idle instances when first asked, before the first stage (a
        bounded machine may have stopped some of the probe's to start the next), kept in the
        record; where the platform cannot tell, as the probe started them."""
        if self.profile is None:
            return {}
        cached = self.record.profile_cached is not False
        if cached and self.profile.check is None:
            return {}  # a re-check's functions are warm as a probe's are
        if self.record.probe_warm is None:
            counted = None if self._platform is None else self._platform.warm_instances()
            check = self.profile.check
            if counted is None and check is not None and cached:
                counted = {check.memory_mb: check.functions}  # what the re-check started
            if counted is None:
                counted = {memory: 1 for memory, _ in self.profile.compute_points}
                if self.profile.side_by_side_ratio > 0:  # a group at the largest size
                    largest = max(counted)
                    fill = int(self.plan_catalog.platform.max_concurrent(largest))
                    counted[largest] = max(1, min(MAX_GROUP, fill))
            self.record.probe_warm = {int(m): int(c) for m, c in counted.items()}
        return dict(self.record.probe_warm)

    def planner_catalog(self) -> Catalog:
        """What the planners price with: ``plan_catalog``, or (``plan_contention`` off, as the
        benchmark compares) the same as if every function had its share of the machine."""
        if self.plan_contention:
            return self.plan_catalog
        platform = dataclasses.replace(self.plan_catalog.platform, delivered_vcpus=None)
        return dataclasses.replace(self.plan_catalog, platform=platform)

    def _deadline_before_profiling(self) -> None:
        """Refuse a deadline that measuring the job is expected to use up, before measuring."""
        if self.constraint.deadline_s is not None:
            refuse_before_profiling(self.job.name, self.constraint.deadline_s, self.catalog)

    def _profiling_s(self) -> float:
        """Seconds of the deadline measuring the job took (none from the cache)."""
        if self.profile is None or self.record.profile_cached is not False:
            spent_s = 0.0
        else:
            spent_s = self.profile.profiling_s
        if self.profile is not None and self.profile.check is not None:
            spent_s += self.profile.check.seconds  # re-checking a cached profile
        return spent_s

    def refused(self, err: InfeasibleConstraintError) -> InfeasibleConstraintError:
        """The planner's refusal ``err`` saying what measuring the job took of the budget
        (``billing.refused_after_profiling``) or of the deadline (``deadline_check``)."""
        c = self.constraint
        if err.least_budget_usd is None:
            return refused_after_profiling_s(err, c.deadline_s, self._profiling_s())
        return refused_after_profiling(err, c.budget_usd, self.meter.total_usd)

    def planning_constraint(self) -> Constraint:
        """The constraint less what measuring the job took (money, and time when measured now)."""
        c = self.constraint
        spent_s = self._profiling_s()
        budget = None if c.budget_usd is None else c.budget_usd - self.meter.total_usd
        deadline = None if c.deadline_s is None else c.deadline_s - spent_s
        if (budget is not None and budget <= 0) or (deadline is not None and deadline <= 0):
            cached = " (its profile is cached now: a run that finds it there spends none)"
            raise ConfigError(
                f"measuring job {self.job.name} used {self.meter.total_usd:.6f} USD and "
                f"{spent_s:.1f} s, leaving nothing of the constraint to run it; give more"
                + (cached if deadline is not None and deadline <= 0 else "")
            )
        return Constraint(budget, deadline, c.objective)

    def _open(self) -> tuple[Platform, Coordinator]:
        if self.profile is None and self.record.profile is not None:
            self.measured()  # a resumed run plans and guards with the profile it was planned on
        self._started = time.monotonic()
        objects = open_store(f"embedded://{self.dir.path.resolve() / 'objects'}")
        sync_url = "embedded://" + str(self.dir.sync_dir())
        stores = {name: url for name, url in self.stores.items() if url is not None}
        platform = self.platform()
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
        )
        coordinator.predicted_round_s = self.predicted_round_s
        # Segment predictions (the budget guard's) start from the measured cold start.
        coordinator.estimator.platform = self.plan_catalog.platform
        r = self.record
        counts = {"restarts": r.restarts, "segments": r.segments, "cold_starts": r.cold_starts}
        self._counted = (coordinator, counts)
        self._timings_base = dict(r.timings)
        coordinator.set_data(self.train, self.test)
        self.record.enforcement = {
            key: str(value) for key, value in dataclasses.asdict(platform.enforcement).items()
        }
        return platform, coordinator

    def save_segment(self) -> None:
        """The record after a segment: written whole, but fsynced only where the last fsync
        is ``DURABLE_EVERY_S`` old (an fsync costs tens of milliseconds on a busy disk, against
        segments of as many)."""
        self._lazy = True
        try:
            self.save()
        finally:
            self._lazy = False

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

    def snapshot(self) -> dict[str, Any]:
        alive = [t for t in self.trials if t.status in ("pending", "running", "done")]
        return {
            "stage": self.record.stage + 1,
            "stages": len(self.record.plan.stages) if self.record.plan is not None else 1,
            "alive": len(alive),
            "epochs_done": sum(t.epochs_done for t in self.trials),
            "spent_usd": self.meter.total_usd,
            "budget_usd": self.constraint.budget_usd,
            "elapsed_s": self._elapsed(),
        }

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
                self._counted = None
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
