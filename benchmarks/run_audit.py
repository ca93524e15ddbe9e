"""Where a run's time goes, predicted against measured, by component (``--audit``).

A stage's predicted time is CE-scaling eqs. 7–8 with waves (``runtime.stage_pricing.
stage_estimate``): a cold start, then per wave ``epochs`` × t'(θ) (eq. 2: loading, computation
with evaluation folded in, synchronisation, the per-invocation latency) slowed by the wave's
contention. The measured side comes from probes on the coordinator (installed for one run,
class-level, removed after): every segment's launch, its functions' bills (cold start), each
worker's report (loading, computation, synchronisation, what it did after its rounds:
evaluation and the checkpoint write), the coordinator's commit of the record, and each stage's
start and end. A stage's wall time is sliced at every phase boundary; each slice is shared
among the phases running then, so the measured components add up to the stage's time exactly;
a slice where no segment runs and no commit is made is the coordinator's own time between
segments too (launching, polling, waiting for a slot): with the commits, the line
``coordinator``, which the prediction prices as ``FunctionPlatform.coordinator_s`` per
invocation.
Between stages (ranking, re-calibration, re-planning, the record) no stage runs: a line of the
run.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from faasml.models.space import evaluate_allocation
from faasml.planners.tuning import trials_per_wave
from faasml.runtime.record.records import StageRecord
from faasml.runtime.runs.stage_pricing import warm_pool, wave_demand

COMPONENTS = (
    "cold start",
    "loading (data, model, checkpoint)",
    "computation",
    "evaluation + checkpoint write",
    "synchronisation",
    "invocation round trip",
    "coordinator (commit, launch, poll)",
)
"""Measured components; the prediction's terms map onto them (``predicted_parts``)."""


@dataclass
class SegmentTrace:
    stage: int
    trial: int
    n: int
    memory_mb: int
    epochs: int
    started: float
    ended: float
    committed: float
    cold_s: float
    load_s: float
    compute_s: float
    sync_s: float
    tail_s: float
    worker_s: float

    def phases(self) -> list[tuple[str, float, float]]:
        """(component, begin, end): laid end to end from the segment's start (the round trip
        first: its parts before and after the worker's run are not told apart)."""
        trip = max(self.ended - self.started - self.cold_s - self.worker_s, 0.0)
        out, at = [], self.started
        for name, seconds in (
            ("cold start", self.cold_s),
            ("invocation round trip", trip),
            ("loading (data, model, checkpoint)", self.load_s),
            ("computation", self.compute_s),
            ("synchronisation", self.sync_s),
            ("evaluation + checkpoint write", self.tail_s),
        ):
            end = min(at + seconds, self.ended)
            if end > at:
                out.append((name, at, end))
            at = end
        out.append(("coordinator (commit, launch, poll)", self.ended, self.committed))
        return out


@dataclass
class RunTrace:
    stages: list[tuple[float, float]] = field(default_factory=list)
    segments: list[SegmentTrace] = field(default_factory=list)
    repredicted: dict[int, tuple[Any, Any, list[StageRecord]]] = field(default_factory=dict)
    """Stage index -> (workload, catalog, stages) its re-prediction was made with."""


@contextmanager
def traced() -> Iterator[RunTrace]:
    """Probes on ``Coordinator`` (its run and its committer) and ``TuneRun`` for the runs inside
    the block."""
    from faasml.runtime.coordinator import Coordinator
    from faasml.runtime.coordinator.commits import Committer
    from faasml.runtime.runs.tune import TuneRun

    trace = RunTrace()
    originals: list[tuple[type, str, Callable[..., Any]]] = []

    Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]

    def patch(cls: type, name: str, make: Wrap) -> None:
        original = getattr(cls, name)
        originals.append((cls, name, original))
        setattr(cls, name, make(original))

    def run(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            trace.stages.append((began, began))
            try:
                return original(self, *args, **kwargs)
            finally:
                trace.stages[-1] = (began, time.monotonic())

        return wrapper

    def commit(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, segment: Any, reports: list[Any]) -> Any:
            ended = time.monotonic()
            try:
                return original(self, segment, reports)
            finally:
                bills = [i.billed for i in segment.invocations if i.billed is not None]
                cold = max((b.init_s for b in bills if b.cold), default=0.0)
                load = max(r.load_s for r in reports)
                compute = max(r.compute_s for r in reports)
                busy = max(r.compute_s + r.sync_s for r in reports)
                worker = max(r.elapsed_s for r in reports)
                trace.segments.append(
                    SegmentTrace(
                        stage=len(trace.stages) - 1,
                        trial=segment.trial.trial_id,
                        n=segment.allocation.n,
                        memory_mb=segment.allocation.memory_mb,
                        epochs=segment.epochs,
                        started=segment.started,
                        ended=ended,
                        committed=time.monotonic(),
                        cold_s=cold,
                        load_s=load,
                        compute_s=compute,
                        sync_s=busy - compute,
                        tail_s=max(worker - load - busy, 0.0),
                        worker_s=worker,
                    )
                )

        return wrapper

    def recalibrate(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, index: int, *args: Any, **kwargs: Any) -> Any:
            result = original(self, index, *args, **kwargs)
            trace.repredicted[index + 1] = (
                self.workload,
                self.plan_catalog,
                copy.deepcopy(self.record.plan.stages),
            )
            return result

        return wrapper

    patch(Coordinator, "run", run)
    patch(Committer, "commit", commit)
    patch(TuneRun, "_recalibrate", recalibrate)
    try:
        yield trace
    finally:
        for cls, name, original in reversed(originals):
            setattr(cls, name, original)


def measured_parts(trace: RunTrace, stage: int) -> dict[str, float]:
    """The stage's wall time sliced by component (they sum to the stage's time)."""
    begin, end = trace.stages[stage]
    phases = [p for s in trace.segments if s.stage == stage for p in s.phases()]
    cuts = sorted({begin, end, *(t for _, a, b in phases for t in (a, b) if begin < t < end)})
    out = dict.fromkeys(COMPONENTS, 0.0)
    for a, b in itertools.pairwise(cuts):
        active = [name for name, x, y in phases if x < b and y > a]
        if not active:
            out["coordinator (commit, launch, poll)"] += b - a
            continue
        for name in active:
            out[name] += (b - a) / len(active)
    return out


def predicted_parts(
    workload: Any,
    catalog: Any,
    stages: list[StageRecord],
    index: int,
    warm: dict[int, int],
    profile: Any,
) -> dict[str, float]:
    """``stage_estimate``'s time of stage ``index`` split into the measured components: the
    cold start; eq. 2's loading; its computation less the evaluation folded into u(m) (the
    profile's evaluation seconds per test sample, as ``planning_inputs`` folds it in); the
    synchronisation; the per-invocation latency (the probe's dispatch plus a checkpoint's
    save and load) as the round trip and loading's checkpoint part."""
    stage = stages[index]
    allocation = stage.allocation
    trials, epochs = stage.trials, stage.epochs
    pool = warm_pool(workload, catalog, stages[:index], warm)
    table = evaluate_allocation(workload, catalog, allocation)
    out = dict.fromkeys(COMPONENTS, 0.0)
    if len(table) == 0:
        return out
    platform = catalog.platform
    k = int(trials_per_wave(table, catalog)[0])
    first = platform.contention(wave_demand(catalog, allocation, min(trials, k)))
    if min(trials, k) * allocation.n > pool.get(allocation.memory_mb, 0):
        start = float(platform.cold_start_time(allocation.memory_mb))
        out["cold start"] = start * first  # the rest of the start: reading the partition
        out["loading (data, model, checkpoint)"] = (float(table.startup_s[0]) - start) * first
    evals = dict(profile.eval_points) if profile is not None else {}
    eval_share = 0.0
    if evals:
        computes = dict(profile.compute_points)
        m = min(evals, key=lambda x: abs(x - allocation.memory_mb))
        ratio = profile.test_samples / max(profile.train_samples, 1)
        eval_share = evals[m] * ratio / max(computes[m] + evals[m] * ratio, 1e-15)
    dispatch = 0.0 if profile is None else profile.dispatch_s
    left = trials
    while left > 0:
        wave = min(left, k)
        slower = platform.contention(wave_demand(catalog, allocation, wave)) * epochs
        compute = float(table.compute_s[0])
        invoke = float(table.invoke_s[0])
        invocations = invoke / max(platform.warm_start_s + platform.coordinator_s, 1e-12)
        trip = min(invoke, dispatch * invocations)
        coordinator = platform.coordinator_s * invocations
        fixed = float(table.load_s[0]) + invoke - trip - coordinator
        out["coordinator (commit, launch, poll)"] += coordinator * slower
        out["loading (data, model, checkpoint)"] += fixed * slower
        out["computation"] += compute * (1 - eval_share) * slower
        out["evaluation + checkpoint write"] += compute * eval_share * slower
        out["synchronisation"] += float(table.sync_s[0]) * slower
        out["invocation round trip"] += trip * slower
        left -= wave
    return out


def print_audit(run: Any, first: tuple[Any, Any, list[StageRecord]], trace: RunTrace) -> None:
    """Per stage and component: first prediction, re-prediction, measured, and the run's time
    between and after stages."""
    profile = run.profile
    warm = run._probe_warm()
    workload0, catalog0, stages0 = first
    stages = run.record.plan.stages
    total = dict.fromkeys(("pred", "re", "meas"), 0.0)
    for index, stage in enumerate(stages):
        if index >= len(trace.stages):
            break
        shape = f"{stage.trials}x{stage.allocation.n}x{stage.allocation.memory_mb}"
        pred = predicted_parts(workload0, catalog0, stages0, index, warm, profile)
        re = None
        if index in trace.repredicted:
            w, c, s = trace.repredicted[index]
            re = predicted_parts(w, c, s, index, warm, profile)
        meas = measured_parts(trace, index)
        segs = [s for s in trace.segments if s.stage == index]
        epochs = sum(s.epochs for s in segs)
        print(
            f"    audit stage {index + 1} {shape}: {len(segs)} segments, {epochs} epochs "
            f"(pred {stages0[index].trials * stages0[index].epochs}), "
            f"{sum(1 for s in segs if s.cold_s > 0)} cold"
        )
        print(f"      {'component':<36} {'pred s':>7} {'re s':>7} {'meas s':>7} {'meas-pred':>9}")
        for name in COMPONENTS:
            r = "      -" if re is None else f"{re[name]:7.2f}"
            print(
                f"      {name:<36} {pred[name]:7.2f} {r} {meas[name]:7.2f} "
                f"{meas[name] - pred[name]:+9.2f}"
            )
        p, m = sum(pred.values()), sum(meas.values())
        r = "      -" if re is None else f"{sum(re.values()):7.2f}"
        print(f"      {'stage':<36} {p:7.2f} {r} {m:7.2f} {m - p:+9.2f}")
        total["pred"] += p
        total["meas"] += m
    walls = sum(b - a for a, b in trace.stages)
    elapsed = run.record.elapsed_s
    print(
        f"    audit run: stages {walls:.2f} s of {elapsed:.2f} s measured; between and after "
        f"stages (ranking, re-calibration, re-planning, records, closing) {elapsed - walls:.2f} s "
        "(predicted 0)"
    )
