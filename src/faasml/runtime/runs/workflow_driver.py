"""``PhaseDriver``: a workflow's phases run in turn on one coordinator.

Each phase gets its data (an online chunk waited for, a watched chunk file landed), then its
deployment: the first search, a search re-triggered where the phase changed, or the last
choice kept; then it trains. Every probe and choice is saved as it is made, so a resumed run
replays the phases it finished (nothing probed again) and takes up the one it stopped in.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from faasml.exceptions import ConfigError, WorkloadError
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.coordinator.ranking import loss_of
from faasml.runtime.profile.deployment_probe import probe_allocation
from faasml.runtime.record.records import (
    AllocationChange,
    Best,
    Chunk,
    PhaseRecord,
    ProbeRecord,
    Rejected,
    SearchGoal,
    WorkflowRecord,
)
from faasml.runtime.runs.chunk_files import await_chunk, join_file
from faasml.runtime.runs.workflow_phases import Phase
from faasml.search.deployment import (
    DeploymentGoal,
    DeploymentSearch,
    DeploymentSpace,
    Measurement,
)
from faasml.types import Allocation

if TYPE_CHECKING:
    from faasml.runtime.runs.workflow import WorkflowRun


class PhaseDriver:
    """Runs a ``WorkflowRun``'s phases on ``coordinator``, recording each in ``flow``.

    It carries from phase to phase the last search (a re-trigger starts from its posterior),
    the allocation in use (kept where a phase does not search) and the probes counted."""

    def __init__(self, run: WorkflowRun, coordinator: Coordinator, flow: WorkflowRecord) -> None:
        self.run = run
        self.coordinator = coordinator
        self.flow = flow
        self.search: DeploymentSearch | None = None
        self.allocation: Allocation | None = None
        # The run's clock (it goes on across a resume): online chunks land on it.
        if flow.origin_s is None:
            flow.origin_s = coordinator.now()
        self.origin = flow.origin_s
        self.probes = sum(len(r.probes) for r in flow.phases)

    def drive(self) -> None:
        """Every phase in turn; the trials done and the best recorded where none stopped
        the run (a budget stop or a failed trial leaves them for a resume)."""
        run, flow = self.run, self.flow
        self._restore_chunks()
        for phase in run.phases:
            if run.spec.watch is not None and phase.index > len(flow.chunks):
                landed = self._land_chunk(phase)
                if landed is None:
                    self.coordinator.stop_reason = (
                        f"no chunk file landed in {run.spec.watch.folder} within "
                        f"{run.spec.watch.timeout_s:g} s (waiting for file {phase.index} of "
                        f"{run.spec.watch.files}); the run ends on the data landed before"
                    )
                    break
                phase = landed
            run.current = phase
            trial = run.trials[[t.trial_id for t in run.trials].index(phase.trial)]
            if phase.index < len(flow.phases):  # finished before a resume: its search replayed
                record = flow.phases[phase.index]
                if record.searched:
                    self.search = self._replay(phase, record)
                self.allocation = record.choice
                continue
            if not self._run_phase(phase, trial):
                return
        self._finish()

    # ------------------------------------------------------------------ one phase

    def _run_phase(self, phase: Phase, trial: TrialState) -> bool:
        """The phase deployed and trained (or taken up where a resume left it); False where
        the run stops in it."""
        run, coordinator = self.run, self.coordinator
        current = self.flow.current
        resumed = current is not None and current.index == phase.index + 1
        self._await_arrival(phase, resumed)
        if phase.samples != coordinator.samples:
            coordinator.namespace = f"run/p{phase.index}"
            coordinator.set_data(run.phase_data(phase), run.test)
        space = run.phase_space(phase)
        if current is not None and resumed:
            record, goal = current, _goal_of(current.goal)
            self.probes += len(record.probes)
            run.event(f"phase {phase.index + 1}: resumed")
        else:
            record, goal = self._open(phase)
        allocation = self._deploy(phase, trial, space, record, goal, resumed)
        if record.choice is None:
            self._commit(phase, trial, record, allocation)
        return self._train(phase, trial, record, allocation)

    def _await_arrival(self, phase: Phase, resumed: bool) -> None:
        """Online: wait until the phase's chunk lands on the run's clock (no function is
        held meanwhile)."""
        wait = phase.arrival_s - (self.coordinator.now() - self.origin)
        if wait > 0 and not resumed:
            self.run.event(f"phase {phase.index + 1}: waiting {wait:.1f} s for its data")
            time.sleep(wait)
            self._waited(wait)

    def _open(self, phase: Phase) -> tuple[PhaseRecord, DeploymentGoal]:
        """The phase's record, begun (the run's current phase), and its goal: the constraint
        left, shared by epochs."""
        run, coordinator = self.run, self.coordinator
        goal = run.phase_goal(phase, run.meter.total_usd, coordinator.now())
        model = run.phase_model(phase)
        record = PhaseRecord(
            index=phase.index + 1,
            change=phase.change,
            batch_size=phase.batch_size,
            samples=phase.samples,
            model=dict(phase.model),
            model_mb=float(model.size_mb),
            params=int(model.num_params),
            epochs=phase.epochs,
            trial=phase.trial,
            t_start_s=coordinator.now(),
            goal=SearchGoal(goal.objective, goal.epochs, goal.limit),
        )
        self.flow.current = record
        return record, goal

    def _deploy(
        self,
        phase: Phase,
        trial: TrialState,
        space: DeploymentSpace,
        record: PhaseRecord,
        goal: DeploymentGoal,
        resumed: bool,
    ) -> Allocation:
        """The phase's allocation: the one it chose before a resume, a search's (the first,
        or re-triggered by a change), or the last phase's kept."""
        first = self.search is None
        retrigger = not first and bool(phase.change) and self.run.spec.search.retrigger
        if record.choice is not None:  # resumed after its search: train on what it chose
            self.allocation = record.choice
            if record.searched:
                self.search = self._replay(phase, record)
        elif first or retrigger:
            self.allocation = self._search(phase, trial, space, record, goal, resumed, retrigger)
            record.searched = True
            record.retrigger = retrigger
        else:
            record.searched = False
            record.retrigger = False
            record.stop_reason = (
                "no change" if not phase.change else "re-trigger off: the first choice kept"
            )
        assert self.allocation is not None
        return self.allocation

    def _search(
        self,
        phase: Phase,
        trial: TrialState,
        space: DeploymentSpace,
        record: PhaseRecord,
        goal: DeploymentGoal,
        resumed: bool,
        retrigger: bool,
    ) -> Allocation:
        """The phase's search run to its end (each probe saved as it is made); its choice,
        or the model's where no probe measured anything."""
        run = self.run
        if resumed:  # the probes done before the resume, then the rest of them
            search = self._replay(phase, record)
        else:
            search = run.search_for(phase, self.search, space, goal)
        self.search = search
        if retrigger and not resumed:
            run.event(f"phase {phase.index + 1}: {phase.change}; search re-triggered")
        measure = functools.partial(self._measure, phase, trial, space, record)
        while search.step(measure) is not None:
            run.save()  # each probe kept: a resumed run does not probe it again
            if self.coordinator.stop_reason:
                break
        measured_any = any(p.measurement.failed is None for p in search.probes)
        if measured_any or not search.probes:
            result = search.result()  # none probed: the model's choice, said so
            record.stop_reason = result.stop_reason
            if not search.probes:
                run.event(f"phase {phase.index + 1}: {result.stop_reason}")
            return result.choice
        record.stop_reason = "no probe measured: the model's choice"
        return space.allocation(int(np.argmin(space.prior(goal))))

    def _commit(
        self, phase: Phase, trial: TrialState, record: PhaseRecord, allocation: Allocation
    ) -> None:
        """The phase's choice recorded, with what its search cost, before it trains."""
        run = self.run
        record.choice = allocation
        record.search_usd = sum(p.probe_usd for p in record.probes)
        record.search_s = sum(p.probe_s for p in record.probes)
        record.train_from_usd = run.meter.total_usd
        run.record.allocation = allocation
        run.record.allocations.append(AllocationChange(trial.epochs_done + 1, allocation))
        run.event(f"phase {phase.index + 1}: runs on {allocation}")
        run.save()

    def _train(
        self, phase: Phase, trial: TrialState, record: PhaseRecord, allocation: Allocation
    ) -> bool:
        """The phase's epochs trained on ``allocation``; False where the run stops in it
        (its training goes on from the bill it started at, on a resume)."""
        run, coordinator = self.run, self.coordinator
        if coordinator.stop_reason:
            record.t_end_s = coordinator.now()
            return False
        coordinator.run([trial], allocation, phase.first_epoch + phase.epochs)
        if trial.status == "done":
            trial.status = "running" if phase is not run.phases[-1] else "done"
        record.t_end_s = coordinator.now()
        began_usd = record.train_from_usd if record.train_from_usd is not None else 0.0
        record.epochs_run = [h for h in trial.history if h["epoch"] > phase.first_epoch]
        if coordinator.stop_reason or trial.status == "failed":
            return False
        record.train_usd = run.meter.total_usd - began_usd
        record.train_from_usd = None
        self.flow.phases.append(record)
        self.flow.current = None
        run.save()
        return True

    def _finish(self) -> None:
        """The trials that trained are done; the best is the lowest loss of those that
        neither failed nor diverged."""
        run = self.run
        for t in run.trials:
            if t.status in ("running", "pending") and t.epochs_done > 0:
                t.status = "done"
        best = min(
            (t for t in run.trials if t.history and t.status not in ("failed", "diverged")),
            key=lambda t: loss_of(t.last),
            default=None,
        )
        if best is not None:
            phase_of = run.phases[[p.trial for p in run.phases].index(best.trial_id)]
            run.record.best = Best(
                trial=best.trial_id,
                config={"model": phase_of.model},
                metric="loss",
                val_loss=best.last.get("val_loss"),
                val_accuracy=best.last.get("val_accuracy"),
                checkpoint=best.checkpoint,
            )

    # ------------------------------------------------------------------ probes

    def _measure(
        self,
        phase: Phase,
        trial: TrialState,
        space: DeploymentSpace,
        record: PhaseRecord,
        candidate: Allocation,
        rounds: int,
    ) -> Measurement:
        """One real probe of ``candidate`` of ``rounds`` rounds (the search's: fewer than
        ``probe_rounds`` where a full probe does not fit its dollars), billed as 'search', as
        time and cost per epoch: the measured seconds per round × the phase's rounds per
        epoch, plus the data load; the cost at the candidate's price per second."""
        self.probes += 1
        result = probe_allocation(self.coordinator, trial, candidate, rounds, self.probes)
        index = space.index_of(candidate)
        assert index is not None  # proposed from this space
        fit = self.search.fit if self.search is not None else None
        short = fit.shortened(index, rounds) if fit is not None else None
        per_epoch = int(space.workload_rounds[index])
        epoch_s = per_epoch * result.round_s + result.load_s
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
                rounds=None if short is None else int(short),
            )
        )
        return out

    def _replay(self, phase: Phase, record: PhaseRecord) -> DeploymentSearch:
        """The search a recorded phase ran, rebuilt from its recorded probes (a resumed run:
        the posterior the next re-trigger starts from; nothing is probed again)."""
        space = self.run.phase_space(phase)
        search = self.run.search_for(phase, self.search, space, _goal_of(record.goal))
        for probe in record.probes:
            search.record(probe.allocation, _measurement_of(probe), probe.rounds)
        return search

    # ------------------------------------------------------------------ watched chunks

    def _restore_chunks(self) -> None:
        """The chunk files a run took before a resume, read again in turn (the phases that
        trained on them replay as recorded)."""
        run, watch = self.run, self.run.spec.watch
        if watch is None:
            return
        for index, landed in enumerate(self.flow.chunks, start=1):
            path = Path(watch.folder) / landed.file
            try:
                run.train, _ = join_file(watch, run.train, path)
            except WorkloadError as err:
                raise ConfigError(
                    f"the run trained on chunk file {landed.file} before it stopped, and it "
                    f"cannot be read again to resume: {err}"
                ) from None
            run.phases[index] = dataclasses.replace(
                run.phases[index], samples=len(run.train), change=landed.change
            )

    def _waited(self, seconds: float) -> None:
        """Count time spent waiting for data (no function held): the run's summary sets its
        prediction against the time it ran, not the time its data took to come."""
        self.run.record.waiting_s += max(seconds, 0.0)

    def _land_chunk(self, phase: Phase) -> Phase | None:
        """Wait for the next chunk file (no function is held meanwhile); the phase with the
        data landed so far, or None when none landed in time."""
        run, flow, watch = self.run, self.flow, self.run.spec.watch
        assert watch is not None
        taken = {c.file for c in flow.chunks} | {r.file for r in flow.rejected}

        def reject(name: str, reason: str) -> None:
            flow.rejected.append(Rejected(name, reason))
            run.event(f"chunk file {name} rejected, not trained on: {reason}")
            run.save()

        run.event(
            f"phase {phase.index + 1}: waiting for chunk file {phase.index} in {watch.folder}"
        )
        began = time.monotonic()
        try:
            landed = await_chunk(watch, run.train, taken, reject)
        finally:
            self._waited(time.monotonic() - began)
        if landed is None:
            return None
        name, run.train, samples = landed
        change = (
            f"chunk file {phase.index} of {watch.files} landed: {name} ({samples:,} samples; "
            f"{len(run.train):,} in all)"
        )
        flow.chunks.append(Chunk(name, samples, change))
        run.phases[phase.index] = dataclasses.replace(phase, samples=len(run.train), change=change)
        run.save()
        return run.phases[phase.index]


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
