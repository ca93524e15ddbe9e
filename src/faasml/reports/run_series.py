"""A run's time series, computed from its record in one place (pure): the plots
(``run_plots``) draw them and the dashboard (``dashboard.view``) sends them to its page, so the
two show the same numbers.

- ``metric_curves``: each trial's ranking metric by epoch (finite values only), and
  ``stage_boundaries``: the epochs the stages end at (none for a Hyperband run).
- ``spend_series``: the bill over time; ``planned_spend_series``: the spend the plan predicted.
- ``allocation_series``: functions and GB in use over the whole run, all trials at once.
- ``stage_starts``: when each stage after the first began.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from faasml.reports.run_format import RunMetric
from faasml.runtime.coordinator.ranking import diverged_at
from faasml.runtime.record.records import RunRecord, StageRecord, TrialRecord


@dataclass(frozen=True)
class Series:
    """Lines over one x axis (seconds since the run began): ``ys[i][j]`` is line
    ``labels[i]`` at ``xs[j]``; no points (``xs`` empty) when there is nothing to draw."""

    xs: tuple[float, ...]
    ys: tuple[tuple[float, ...], ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Curve:
    """A trial's ranking metric by epoch (finite values only: a diverged epoch is left out)."""

    trial: int
    label: str
    epochs: tuple[int, ...]
    values: tuple[float, ...]


def _label(trial: TrialRecord) -> str:
    """'trial 3', or 'trial 3 (diverged at epoch 2)' (the epoch where the record names one)."""
    label = f"trial {trial.trial_id}"
    if trial.status != "diverged":
        return label
    found = diverged_at(trial.history)
    epoch = trial.diverged_epoch or (found[0] if found else None)
    return label + (" (diverged)" if epoch is None else f" (diverged at epoch {epoch})")


def metric_curves(record: RunRecord, metric: RunMetric) -> tuple[Curve, ...]:
    """Each trial with a history: its metric by epoch (a NaN or infinite value is left out;
    a trial with no epoch yet has nothing to draw and no curve)."""
    curves = []
    for trial in record.trials:
        if not trial.history:
            continue
        points = [(int(h["epoch"]), metric.value(h)) for h in trial.history]
        kept = [(e, v) for e, v in points if v is not None and math.isfinite(v)]
        curves.append(
            Curve(
                trial.trial_id,
                _label(trial),
                tuple(e for e, _ in kept),
                tuple(v for _, v in kept),
            )
        )
    return tuple(curves)


def spend_series(record: RunRecord) -> Series:
    """The bill so far after each charge in time order, from $0 at 0 s: one point per time
    (charges at one time summed), a charge before the run's clock (measuring the job is
    billed before it starts) counted at 0 s."""
    xs, ys, total = [0.0], [0.0], 0.0
    for charge in sorted(record.charges, key=lambda c: c.t_s):
        total += charge.usd
        at = max(charge.t_s, 0.0)
        if at == xs[-1]:
            ys[-1] = total
        else:
            xs.append(at)
            ys.append(total)
    return Series(tuple(xs), (tuple(ys),), ("spent",))


def _stage_estimate(stage: StageRecord) -> tuple[float, float]:
    """A stage's time and bill as the run predicted it before it ran (the planner's where the
    run made no prediction of its own)."""
    if stage.predicted is not None:
        return stage.predicted.time_s, stage.predicted.cost_usd
    return stage.time_s, stage.cost_usd


def planned_spend_series(record: RunRecord) -> Series:
    """The spend the plan predicted: what measuring the job cost at 0 s, then each stage's
    predicted bill spread over its predicted time; the plan's time between stages spends
    nothing (the line is flat there). No points for a run not planned."""
    plan = record.plan
    if plan is None or not plan.stages:
        return Series((), ((),), ("planned",))
    spent, t = record.usd_of("profiling"), 0.0
    xs, ys = [0.0], [spent]
    between = plan.between_stages_s or 0.0
    for index, stage in enumerate(plan.stages):
        if index and between:
            t += between
            xs.append(t)
            ys.append(spent)
        time_s, cost = _stage_estimate(stage)
        t += time_s
        spent += cost
        xs.append(t)
        ys.append(spent)
    return Series(tuple(xs), (tuple(ys),), ("planned",))


def _one_ladder(record: RunRecord) -> bool:
    """The plan's stages are one successive halving (a Hyperband run's brackets each start
    their trials from epoch 1 again: no one epoch or time divides them)."""
    tuning = record.job.get("tuning")
    return record.plan is not None and not (isinstance(tuning, dict) and tuning.get("hyperband"))


def stage_boundaries(record: RunRecord) -> tuple[int, ...]:
    """The last epoch of each stage but the last (where the curves' stages change); none for
    a run not planned or a Hyperband run."""
    plan = record.plan
    if plan is None or not _one_ladder(record):
        return ()
    ends, total = [], 0
    for stage in plan.stages[:-1]:
        total += stage.epochs
        ends.append(total)
    return tuple(ends)


def stage_starts(record: RunRecord) -> tuple[float, ...]:
    """When each stage after the first began (the earliest start of an epoch of it), in
    seconds since the run began: the boundaries the spend's plot marks."""
    plan = record.plan
    if plan is None or not _one_ladder(record):
        return ()
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
    return tuple(starts)


def allocation_series(record: RunRecord) -> Series:
    """Functions and GB in use over the run, every trial at once: each epoch record holds its
    ``n`` functions of ``memory_mb`` from ``t_s - epoch_s`` (at 0 s at the earliest) to
    ``t_s``; the counts change at each start and end (a step function, 0 before the first
    epoch and after the last)."""
    changes: dict[float, list[float]] = {}
    for trial in record.trials:
        for h in trial.history:
            end = float(h["t_s"])
            start = max(end - float(h.get("epoch_s") or 0.0), 0.0)
            n = float(h.get("n", 1))
            gb = n * float(h.get("memory_mb", 0)) / 1024
            for at, sign in ((start, 1.0), (end, -1.0)):
                delta = changes.setdefault(at, [0.0, 0.0])
                delta[0] += sign * n
                delta[1] += sign * gb
    xs, functions, memory = [0.0], [0.0], [0.0]
    now = [0.0, 0.0]
    for at in sorted(changes):
        now = [now[0] + changes[at][0], now[1] + changes[at][1]]
        # sums of floats back to whole counts, and no -0.0 where all have ended
        value = (round(now[0], 6) + 0.0, max(round(now[1], 9), 0.0))
        if at == xs[-1]:
            functions[-1], memory[-1] = value
        else:
            xs.append(at)
            functions.append(value[0])
            memory.append(value[1])
    return Series(tuple(xs), (tuple(functions), tuple(memory)), ("functions", "GB in use"))
