"""What a run's plots draw, as series computed from its record (pure; ``run_plots`` draws them).

- ``metric_curves``: each trial's ranking metric by epoch (finite values only).
- ``spend_series``: the bill over time; ``planned_spend_series``: the spend the plan predicted
  (what measuring the job cost at the start, then each stage's predicted bill over its time).
- ``allocation_series``: functions and GB in use over the whole run, all trials at once (each
  epoch holds its ``n`` functions of ``memory_mb`` over its measured seconds before its end).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from faasml.reports.run_format import RunMetric
from faasml.runtime.record import RunRecord, StageRecord


@dataclass(frozen=True)
class Curve:
    """A trial's metric by epoch."""

    trial: int
    label: str
    epochs: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class Series:
    """Points of a line: seconds since the run began, and a value at each."""

    t_s: tuple[float, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class AllocationSeries:
    """Functions and GB in use from each time on (a step function over the run)."""

    t_s: tuple[float, ...]
    functions: tuple[int, ...]
    gb: tuple[float, ...]


def metric_curves(record: RunRecord, metric: RunMetric) -> list[Curve]:
    """Each trial with a history: its metric by epoch (a NaN or infinite value is left out)."""
    curves = []
    for trial in record.trials:
        points = [(int(h["epoch"]), metric.value(h)) for h in trial.history]
        finite = [(e, v) for e, v in points if v is not None and math.isfinite(v)]
        if not trial.history:
            continue
        label = f"trial {trial.trial_id}"
        if trial.status == "diverged":
            label += f" (diverged at epoch {trial.diverged_epoch})"
        curves.append(
            Curve(
                trial.trial_id,
                label,
                tuple(e for e, _ in finite),
                tuple(v for _, v in finite),
            )
        )
    return curves


def spend_series(record: RunRecord) -> Series:
    """The bill so far at each charge's time, from $0 at 0 s."""
    total, xs, ys = 0.0, [0.0], [0.0]
    for charge in sorted(record.charges, key=lambda c: c.t_s):
        total += charge.usd
        xs.append(charge.t_s)
        ys.append(total)
    return Series(tuple(xs), tuple(ys))


def _stage_estimate(stage: StageRecord) -> tuple[float, float]:
    """A stage's time and bill as the run predicted it before it ran (the planner's where the
    run made no prediction of its own)."""
    if stage.predicted is not None:
        return stage.predicted.time_s, stage.predicted.cost_usd
    return stage.time_s, stage.cost_usd


def planned_spend_series(record: RunRecord) -> Series | None:
    """The spend the plan predicted: what measuring the job cost at 0 s, then each stage's
    predicted bill spread over its predicted time, stages apart by the plan's time between
    them; None for a run not planned."""
    plan = record.plan
    if plan is None or not plan.stages:
        return None
    spent = record.usd_of("profiling")
    t = 0.0
    xs, ys = [0.0], [spent]
    between = plan.between_stages_s or 0.0
    for index, stage in enumerate(plan.stages):
        if index:
            t += between
            xs.append(t)
            ys.append(spent)
        time_s, cost = _stage_estimate(stage)
        t += time_s
        spent += cost
        xs.append(t)
        ys.append(spent)
    return Series(tuple(xs), tuple(ys))


def _one_ladder(record: RunRecord) -> bool:
    """The plan's stages are one successive halving (a Hyperband run's brackets each start
    their trials from epoch 1 again: no one epoch or time divides them)."""
    tuning = record.job.get("tuning")
    return record.plan is not None and not (isinstance(tuning, dict) and tuning.get("hyperband"))


def stage_epochs(record: RunRecord) -> list[int]:
    """The last epoch of each stage of the plan (a training run's one stage: its epochs);
    none for a Hyperband run."""
    ends, total = [], 0
    for stage in record.plan.stages if record.plan is not None and _one_ladder(record) else []:
        total += stage.epochs
        ends.append(total)
    return ends


def stage_starts(record: RunRecord) -> list[float]:
    """When each stage after the first began (the earliest start of an epoch of it), in
    seconds since the run began: the boundaries the metric's and spend's plots mark."""
    plan = record.plan
    if plan is None or not _one_ladder(record):
        return []
    starts, before = [], 0
    for stage in plan.stages:
        first = before + 1
        before += stage.epochs
        times = [
            float(h["t_s"]) - float(h.get("epoch_s") or 0.0)
            for t in record.trials
            for h in t.history
            if int(h["epoch"]) == first
        ]
        if times and stage.index > 1:
            starts.append(min(times))
    return starts


def allocation_series(record: RunRecord) -> AllocationSeries:
    """Functions and GB in use over the run, every trial at once: each epoch record holds
    ``n`` functions of ``memory_mb`` from ``t_s - epoch_s`` to ``t_s``; the counts change at
    each start and end (a step function, 0 before the first and after the last)."""
    changes: dict[float, tuple[int, float]] = {}
    for trial in record.trials:
        for h in trial.history:
            end = float(h["t_s"])
            start = max(0.0, end - float(h.get("epoch_s") or 0.0))
            n, gb = int(h.get("n", 1)), int(h.get("n", 1)) * float(h.get("memory_mb", 0)) / 1024
            for at, sign in ((start, 1), (end, -1)):
                f, g = changes.get(at, (0, 0.0))
                changes[at] = (f + sign * n, g + sign * gb)
    xs, functions, gbs = [0.0], [0], [0.0]
    for at in sorted(changes):
        f, g = changes[at]
        now_f, now_g = functions[-1] + f, max(gbs[-1] + g, 0.0)
        if at == xs[-1]:
            functions[-1], gbs[-1] = now_f, now_g
        else:
            xs.append(at)
            functions.append(now_f)
            gbs.append(now_g)
    return AllocationSeries(tuple(xs), tuple(functions), tuple(round(g, 9) for g in gbs))
