"""``WorkflowRun``: training whose demands change, each phase deployed by a search (SMLT §3.1–3.2,
§5.5–5.6).

A job's ``workflow:`` splits training into phases: the steps of a batch-size schedule (dynamic
batching), the models of a NAS sequence (one trial each, from scratch), or data chunks
(online learning: each phase trains on every sample landed so far, and no function is held
while the next chunk is awaited). Before the first phase a deployment search
(``faasml.search.deployment``) probes real allocations — short billed runs, the bill's
``search`` line — and picks one; at each later phase whose job changed it is re-triggered,
warm-started from the last posterior with fewer probes. On the local platform every segment is
a new invocation, so functions × memory change at the phase boundary without a restart.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from faasml.exceptions import ConfigError, WorkloadError
from faasml.job import JobSpec
from faasml.job.workflow import WorkflowSpec
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.function.worker import ModelRecipe
from faasml.runtime.profile.deployment_probe import probe_allocation
from faasml.runtime.profile.measure import planning_inputs
from faasml.runtime.record.records import (
    AllocationChange,
    Best,
    Chunk,
    PhaseRecord,
    PlanRecord,
    ProbeRecord,
    Rejected,
    RunRecord,
    SearchGoal,
    StageRecord,
    WorkflowRecord,
)
from faasml.runtime.runs.base import job_workload
from faasml.runtime.runs.chunk_files import await_chunk, join_file
from faasml.runtime.runs.train import TrainRun
from faasml.search import SearchBudget
from faasml.search.deployment import (
    DeploymentGoal,
    DeploymentSearch,
    DeploymentSpace,
    Measurement,
)
from faasml.types import Allocation, Objective
from faasml.workload import Workload
from faasml.workloads.data import Dataset


@dataclass(frozen=True)
class Phase:
    """A stretch of training with one batch size, model and data."""

    index: int
    trial: int
    first_epoch: int
    """The trial's epochs done when the phase starts."""
    epochs: int
    batch_size: int
    model: dict[str, Any]
    samples: int
    """Training samples the phase trains on (online: every chunk landed so far)."""
    arrival_s: float = 0.0
    change: str = ""
    """What changed from the phase before ('' for the first, and where nothing did)."""


def workflow_phases(
    spec: WorkflowSpec, job_batch: int, model: dict[str, Any], samples: int, max_epochs: int
) -> list[Phase]:
    """The phases of a workflow, in order."""
    phases: list[Phase] = []
    if spec.kind == "dynamic-batching":
        steps = list(spec.batch_size_schedule)
        if steps[0][0] > 0:
            steps.insert(0, (0, job_batch))
        for i, (epoch, size) in enumerate(steps):
            end = steps[i + 1][0] if i + 1 < len(steps) else max_epochs
            before = phases[-1].batch_size if phases else size
            change = f"batch size {before} -> {size}" if size != before else ""
            phases.append(Phase(i, 0, epoch, end - epoch, size, model, samples, change=change))
    elif spec.kind == "nas":
        for i, entry in enumerate(spec.models):
            options = {k: v for k, v in entry.items() if k != "name"}
            change = f"model {i + 1} of {len(spec.models)}: {entry['name']} {options}" if i else ""
            phases.append(
                Phase(
                    i, i, 0, spec.epochs_per_model, job_batch, dict(entry), samples, change=change
                )
            )
    elif spec.watch is not None:
        # The job's own data first, then one phase per file landing in the folder; a file's
        # size is known when it lands (until then each is taken to be as large as the job's).
        for i in range(spec.watch.files + 1):
            change = f"chunk file {i} of {spec.watch.files}" if i else ""
            phases.append(
                Phase(
                    i,
                    0,
                    i * spec.epochs_per_chunk,
                    spec.epochs_per_chunk,
                    job_batch,
                    model,
                    samples * (i + 1),
                    change=change,
                )
            )
    else:
        landed, epoch = 0.0, 0
        for i, share in enumerate(spec.chunks):
            landed += share
            count = min(samples, max(1, round(landed * samples)))
            change = f"chunk {i + 1} of {len(spec.chunks)} landed ({count:,} samples)" if i else ""
            phases.append(
                Phase(
                    i,
                    0,
                    epoch,
                    spec.epochs_per_chunk,
                    job_batch,
                    model,
                    count,
                    arrival_s=i * spec.every_s,
                    change=change,
                )
            )
            epoch += spec.epochs_per_chunk
    return phases


class WorkflowRun(TrainRun):
    """A job with a ``workflow:``: phases deployed by a search, re-triggered on change."""

    kind = "train"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        spec = self.job.search_workflow()
        if spec is None:
            raise ConfigError(
                f"job '{self.job.name}' has no workflow section and planner is not 'search'"
            )
        self.spec: WorkflowSpec = spec
        base = {"name": self.job.model.name, **dict(self.job.model.options)}
        self.phases = workflow_phases(
            self.spec, self.job.batch_size, base, len(self.train), self.job.training.max_epochs
        )
        self.current = self.phases[0]
        self._base_params = self.model.num_params
        self._models: dict[int, Any] = {}
        self._probes = 0
        self._driving = False

    # ------------------------------------------------------------------ pieces

    def recipe(self, trial: TrialState) -> ModelRecipe:
        """The current phase's model and batch size (probes included)."""
        phase = self.current
        options = {k: v for k, v in phase.model.items() if k != "name"}
        return ModelRecipe(
            model=str(phase.model["name"]),
            model_options=options,
            input_shape=tuple(self.train.input_shape),
            num_classes=self.train.num_classes,
            optimizer=self.job.optimizer.name,
            hyperparameters=dict(self.job.optimizer.hyperparameters),
            batch_size=phase.batch_size,
            seed=self.job.seed,
        )

    def _phase_model(self, phase: Phase) -> Any:
        if phase.index not in self._models:
            from faasml.workloads import create_model

            options = {k: v for k, v in phase.model.items() if k != "name"}
            self._models[phase.index] = create_model(
                str(phase.model["name"]),
                self.train.input_shape,
                self.train.num_classes,
                **options,
            )
        return self._models[phase.index]

    def phase_data(self, phase: Phase) -> Dataset:
        return (
            self.train
            if phase.samples >= len(self.train)
            else self.train.subset(slice(0, phase.samples))
        )

    def phase_workload(self, phase: Phase) -> Workload:
        """The phase as the model sees it: its data, model and batch size on the measured
        profile (a NAS model's computation scaled by its parameters against the profiled one)."""
        model = self._phase_model(phase)
        workload = job_workload(self.job, self.phase_data(phase), model, phase.batch_size)
        if self.profile is None:
            return workload
        measured, _ = planning_inputs(self.profile, workload, self.catalog)
        ratio = model.num_params / max(self._base_params, 1)
        if ratio != 1.0:
            points = tuple((m, s * ratio) for m, s in measured.compute.points)
            growth = measured.model_copies * (model.size_mb - measured.model_mb)
            measured = dataclasses.replace(
                measured,
                compute=dataclasses.replace(measured.compute, points=points),
                model_mb=max(model.size_mb, 1e-6),
                runtime_mb=max(measured.runtime_mb + max(growth, 0.0), 0.0),
            )
        return measured

    def phase_goal(self, phase: Phase, spent_usd: float, spent_s: float) -> DeploymentGoal:
        """The constraint left, shared among the phases left by their epochs."""
        c = self.planning_constraint()
        left = sum(p.epochs for p in self.phases[phase.index :])
        share = phase.epochs / max(left, 1)
        if c.goal is Objective.MIN_TIME:
            limit = None if c.budget_usd is None else max(c.budget_usd - spent_usd, 1e-9) * share
        else:
            limit = None if c.deadline_s is None else max(c.deadline_s - spent_s, 1e-9) * share
        return DeploymentGoal(c.goal, phase.epochs, limit)

    def phase_space(self, phase: Phase) -> DeploymentSpace:
        workload = self.phase_workload(phase)
        options = self.spec.search
        return DeploymentSpace.build(
            workload, self.plan_catalog, max_functions=options.max_functions
        )

    def _measure(
        self,
        coordinator: Coordinator,
        phase: Phase,
        trial: TrialState,
        space: DeploymentSpace,
        record: PhaseRecord,
        candidate: Allocation,
    ) -> Measurement:
        """One real probe of ``candidate`` (billed as 'search'), as time and cost per epoch:
        the measured seconds per round × the phase's rounds per epoch, plus the data load;
        the cost at the candidate's price per second."""
        self._probes += 1
        options = self.spec.search
        result = probe_allocation(coordinator, trial, candidate, options.probe_rounds, self._probes)
        index = space.index_of(candidate)
        assert index is not None  # proposed from this space
        rounds = int(space.workload_rounds[index])
        epoch_s = rounds * result.round_s + result.load_s
        ok = result.failed is None and epoch_s > 0
        out = Measurement(
            epoch_s,
            epoch_s * float(space.cost_per_s()[index]),
            result.wall_s,
            result.usd,
            failed=None if ok else (result.failed or "nothing measured"),
        )
        record.probes.append(
            ProbeRecord(
                allocation=candidate,
                epoch_s=epoch_s if ok else None,
                epoch_usd=out.cost_usd if ok else None,
                samples_per_s=phase.samples / epoch_s if ok else None,
                predicted_epoch_s=float(space.table.time_s[index]),
                probe_s=result.wall_s,
                probe_usd=result.usd,
                failed=out.failed,
            )
        )
        return out

    # ------------------------------------------------------------------ plan

    def plan(self) -> PlanRecord:
        """The phases with the model's own choice for each (what the search starts from)."""
        self.measured()
        stages = []
        total_s = total_usd = 0.0
        for phase in self.phases:
            try:
                space = self.phase_space(phase)
            except ConfigError as err:
                raise ConfigError(
                    f"workflow phase {phase.index + 1} ({_describe(phase)}) cannot run: {err}"
                ) from None
            goal = self.phase_goal(phase, 0.0, 0.0)
            best = int(np.argmin(space.prior(goal)))
            time_s = float(space.table.startup_s[best] + phase.epochs * space.table.time_s[best])
            cost = float(space.table.startup_usd[best] + phase.epochs * space.table.cost_usd[best])
            total_s, total_usd = total_s + time_s, total_usd + cost
            stages.append(
                StageRecord(
                    index=phase.index + 1,
                    trials=1,
                    epochs=phase.epochs,
                    allocation=space.allocation(best),
                    epoch_time_s=float(space.table.time_s[best]),
                    epoch_cost_usd=float(space.table.cost_usd[best]),
                    time_s=time_s,
                    cost_usd=cost,
                    batch_size=phase.batch_size,
                    samples=phase.samples,
                    model=dict(phase.model),
                )
            )
        search = self.spec.search
        how = "cold" if self.profile is None else "warm"
        if self.profile is not None and search.searcher == "gp-ei":
            how += f", choice {search.choice}"  # the rule applies to a warm GP + EI search
        plan = PlanRecord(f"search ({search.searcher}, {how})", stages, total_s, total_usd)
        self.record.plan = plan
        self.record.workflow = WorkflowRecord(self.spec.kind)
        self.record.allocation = stages[0].allocation
        self.record.allocations = []
        self.trials = [TrialState(t, {}) for t in sorted({p.trial for p in self.phases})]
        self.save()
        return plan

    # ------------------------------------------------------------------ watched chunks

    def _restore_chunks(self, flow: WorkflowRecord) -> None:
        """The chunk files a run took before a resume, read again in turn (the phases that
        trained on them replay as recorded)."""
        if self.spec.watch is None:
            return
        for index, landed in enumerate(flow.chunks, start=1):
            path = Path(self.spec.watch.folder) / landed.file
            try:
                self.train, _ = join_file(self.spec.watch, self.train, path)
            except WorkloadError as err:
                raise ConfigError(
                    f"the run trained on chunk file {landed.file} before it stopped, and it "
                    f"cannot be read again to resume: {err}"
                ) from None
            self.phases[index] = dataclasses.replace(
                self.phases[index], samples=len(self.train), change=landed.change
            )

    def _waited(self, seconds: float) -> None:
        """Count time spent waiting for data (no function held): the run's summary sets its
        prediction against the time it ran, not the time its data took to come."""
        self.record.waiting_s += max(seconds, 0.0)

    def _land_chunk(self, phase: Phase, flow: WorkflowRecord) -> Phase | None:
        """Wait for the next chunk file (no function is held meanwhile); the phase with the
        data landed so far, or None when none landed in time."""
        assert self.spec.watch is not None
        watch = self.spec.watch
        taken = {c.file for c in flow.chunks} | {r.file for r in flow.rejected}

        def reject(name: str, reason: str) -> None:
            flow.rejected.append(Rejected(name, reason))
            self.event(f"chunk file {name} rejected, not trained on: {reason}")
            self.save()

        self.event(
            f"phase {phase.index + 1}: waiting for chunk file {phase.index} in {watch.folder}"
        )
        began = time.monotonic()
        try:
            landed = await_chunk(watch, self.train, taken, reject)
        finally:
            self._waited(time.monotonic() - began)
        if landed is None:
            return None
        name, self.train, samples = landed
        change = (
            f"chunk file {phase.index} of {watch.files} landed: {name} ({samples:,} samples; "
            f"{len(self.train):,} in all)"
        )
        flow.chunks.append(Chunk(name, samples, change))
        self.phases[phase.index] = dataclasses.replace(
            phase, samples=len(self.train), change=change
        )
        self.save()
        return self.phases[phase.index]

    # ------------------------------------------------------------------ run

    def search_for(
        self,
        phase: Phase,
        last: DeploymentSearch | None,
        space: DeploymentSpace,
        goal: DeploymentGoal,
    ) -> DeploymentSearch:
        """The phase's search (not yet run): the first one, or ``last`` re-triggered (which
        keeps its choice rule, ``workflow.search.choice``)."""
        options = self.spec.search
        budget = SearchBudget(
            max_probes=options.max_probes if last is None else options.retrigger_probes,
            max_usd=options.max_usd,
            ei_threshold=options.ei_threshold,
        )
        warm = self.profile is not None
        costs = space.probe_cost(rounds=options.probe_rounds)
        if last is None:
            return DeploymentSearch(
                space,
                goal,
                searcher=options.searcher,
                budget=budget,
                seed=self.job.seed,
                warm=warm,
                probe_costs=costs,
                choice=options.choice,
            )
        return last.retrigger(
            space, goal, budget=budget, seed=self.job.seed, warm=warm, probe_costs=costs
        )

    def _replay(
        self, phase: Phase, last: DeploymentSearch | None, record: PhaseRecord
    ) -> DeploymentSearch:
        """The search a recorded phase ran, rebuilt from its recorded probes (a resumed run:
        the posterior the next re-trigger starts from; nothing is probed again)."""
        space = self.phase_space(phase)
        search = self.search_for(phase, last, space, _goal_of(record.goal))
        for probe in record.probes:
            search.record(probe.allocation, _measurement_of(probe))
        return search

    def save(self) -> None:
        """The record, with the run's clock up to now while the phases run: a killed run
        resumes on it (online chunks land on it; events stay in order)."""
        if self._driving:
            now = time.monotonic()
            self.record.elapsed_s += now - self._started
            self._started = now
        super().save()

    def _drive(self, coordinator: Coordinator) -> None:
        self._driving = True
        try:
            self._drive_phases(coordinator)
        finally:
            self._driving = False

    def _drive_phases(self, coordinator: Coordinator) -> None:
        if self.record.plan is None or self.record.workflow is None:
            self.plan()
        flow = self.record.workflow
        assert flow is not None  # planned
        done = flow.phases
        options = self.spec.search
        search: DeploymentSearch | None = None
        allocation: Allocation | None = None
        # The run's clock (it goes on across a resume): online chunks land on it.
        if flow.origin_s is None:
            flow.origin_s = coordinator.now()
        origin = flow.origin_s
        self._probes = sum(len(r.probes) for r in done)
        self._restore_chunks(flow)
        for phase in self.phases:
            if self.spec.watch is not None and phase.index > len(flow.chunks):
                landed = self._land_chunk(phase, flow)
                if landed is None:
                    coordinator.stop_reason = (
                        f"no chunk file landed in {self.spec.watch.folder} within "
                        f"{self.spec.watch.timeout_s:g} s (waiting for file {phase.index} of "
                        f"{self.spec.watch.files}); the run ends on the data landed before"
                    )
                    break
                phase = landed
            self.current = phase
            trial = self.trials[[t.trial_id for t in self.trials].index(phase.trial)]
            if phase.index < len(done):  # finished before a resume: its search replayed
                record = done[phase.index]
                if record.searched:
                    search = self._replay(phase, search, record)
                allocation = record.choice
                continue
            current = flow.current
            resumed = current is not None and current.index == phase.index + 1
            wait = phase.arrival_s - (coordinator.now() - origin)
            if wait > 0 and not resumed:
                # online: the chunk has not landed; no function is held meanwhile
                self.event(f"phase {phase.index + 1}: waiting {wait:.1f} s for its data")
                time.sleep(wait)
                self._waited(wait)
            if phase.samples != coordinator.samples:
                coordinator.namespace = f"run/p{phase.index}"
                coordinator.set_data(self.phase_data(phase), self.test)
            space = self.phase_space(phase)
            if current is not None and resumed:
                record = current
                goal = _goal_of(record.goal)
                self._probes += len(record.probes)
                self.event(f"phase {phase.index + 1}: resumed")
            else:
                goal = self.phase_goal(phase, self.meter.total_usd, coordinator.now())
                record = PhaseRecord(
                    index=phase.index + 1,
                    change=phase.change,
                    batch_size=phase.batch_size,
                    samples=phase.samples,
                    model=dict(phase.model),
                    model_mb=float(self._phase_model(phase).size_mb),
                    params=int(self._phase_model(phase).num_params),
                    epochs=phase.epochs,
                    trial=phase.trial,
                    t_start_s=coordinator.now(),
                    goal=SearchGoal(goal.objective, goal.epochs, goal.limit),
                )
                flow.current = record
            first = search is None
            retrigger = not first and bool(phase.change) and options.retrigger
            if record.choice is not None:  # resumed after its search: train on what it chose
                allocation = record.choice
                if record.searched:
                    search = self._replay(phase, search, record)
            elif first or retrigger:
                if resumed:  # the probes done before the resume, then the rest of them
                    search = self._replay(phase, search, record)
                else:
                    search = self.search_for(phase, search, space, goal)
                if retrigger and not resumed:
                    self.event(f"phase {phase.index + 1}: {phase.change}; search re-triggered")
                measure = functools.partial(self._measure, coordinator, phase, trial, space, record)
                while search.step(measure) is not None:
                    self.save()  # each probe kept: a resumed run does not probe it again
                    if coordinator.stop_reason:
                        break
                measured_any = any(p.measurement.failed is None for p in search.probes)
                if measured_any or not search.probes:
                    result = search.result()  # none probed: the model's choice, said so
                    allocation = result.choice
                    record.stop_reason = result.stop_reason
                    if not search.probes:
                        self.event(f"phase {phase.index + 1}: {result.stop_reason}")
                else:
                    allocation = space.allocation(int(np.argmin(space.prior(goal))))
                    record.stop_reason = "no probe measured: the model's choice"
                record.searched = True
                record.retrigger = retrigger
            else:
                record.searched = False
                record.retrigger = False
                record.stop_reason = (
                    "no change" if not phase.change else "re-trigger off: the first choice kept"
                )
            assert allocation is not None
            end_epoch = phase.first_epoch + phase.epochs
            if record.choice is None:
                record.choice = allocation
                record.search_usd = sum(p.probe_usd for p in record.probes)
                record.search_s = sum(p.probe_s for p in record.probes)
                record.train_from_usd = self.meter.total_usd
                self.record.allocation = allocation
                self.record.allocations.append(AllocationChange(trial.epochs_done + 1, allocation))
                self.event(f"phase {phase.index + 1}: runs on {allocation}")
                self.save()
            if coordinator.stop_reason:
                record.t_end_s = coordinator.now()
                return
            coordinator.run([trial], allocation, end_epoch)
            if trial.status == "done":
                trial.status = "running" if phase is not self.phases[-1] else "done"
            record.t_end_s = coordinator.now()
            began_usd = record.train_from_usd if record.train_from_usd is not None else 0.0
            record.epochs_run = [h for h in trial.history if h["epoch"] > phase.first_epoch]
            if coordinator.stop_reason or trial.status == "failed":
                return  # its training goes on from the bill it started at, on a resume
            record.train_usd = self.meter.total_usd - began_usd
            record.train_from_usd = None
            done.append(record)
            flow.current = None
            self.save()
        for t in self.trials:
            if t.status in ("running", "pending") and t.epochs_done > 0:
                t.status = "done"
        best = min(
            (t for t in self.trials if t.history and t.status not in ("failed", "diverged")),
            key=lambda t: _loss(t.last),
            default=None,
        )
        if best is not None:
            phase_of = self.phases[[p.trial for p in self.phases].index(best.trial_id)]
            self.record.best = Best(
                trial=best.trial_id,
                config={"model": phase_of.model},
                metric="loss",
                val_loss=best.last.get("val_loss"),
                val_accuracy=best.last.get("val_accuracy"),
                checkpoint=best.checkpoint,
            )


def train_workflow(
    job: str | Path | JobSpec,
    *,
    budget_usd: float | None = None,
    deadline_s: float | None = None,
    run_dir: str | Path | None = None,
) -> RunRecord:
    """Run a job with a ``workflow:`` (a file or a ``JobSpec``) within a budget or deadline;
    returns the run's record (``record.workflow.phases`` holds the searches)."""
    from faasml.job import load_job
    from faasml.types import Constraint

    spec = job if isinstance(job, JobSpec) else load_job(job)
    folder = (
        Path(run_dir)
        if run_dir is not None
        else Path("runs") / (f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    flow = WorkflowRun(spec, Constraint(budget_usd, deadline_s), folder)
    flow.plan()
    return flow.execute()


def _goal_of(goal: SearchGoal) -> DeploymentGoal:
    return DeploymentGoal(goal.objective, goal.epochs, goal.limit)


def _measurement_of(probe: ProbeRecord) -> Measurement:
    """A recorded probe as the search observed it."""
    failed = probe.failed
    return Measurement(
        probe.epoch_s if failed is None and probe.epoch_s is not None else math.inf,
        probe.epoch_usd if failed is None and probe.epoch_usd is not None else math.inf,
        probe.probe_s,
        probe.probe_usd,
        failed=failed,
    )


def _describe(phase: Phase) -> str:
    return f"batch size {phase.batch_size}, {phase.samples:,} samples, model {phase.model}"


def _loss(record: dict[str, Any]) -> float:
    value = record.get("val_loss")
    return float(value if value is not None else record.get("loss", math.inf))
