"""The dashboard's time series, from a run record (pure): spend and planned spend over time,
functions and memory in use over time, and each trial's ranking metric by epoch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from faasml.runtime.ranking import metric_value
from faasml.runtime.record import RunRecord


@dataclass(frozen=True)
class Series:
    """Lines over one x axis: ``ys[i][j]`` is line ``labels[i]`` at ``xs[j]``."""

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


def spend_series(record: RunRecord) -> Series:
    """The bill so far, after each charge in time order, from nothing at the start."""
    xs, ys, total = [0.0], [0.0], 0.0
    for charge in sorted(record.charges, key=lambda c: c.t_s):
        total += charge.usd
        at = max(charge.t_s, 0.0)  # measuring the job was billed before the run's clock
        if at == xs[-1]:
            ys[-1] = total
        else:
            xs.append(at)
            ys.append(total)
    return Series(tuple(xs), (tuple(ys),), ("spent",))


def planned_spend(record: RunRecord) -> Series:
    """The spend the run planned: what measuring the job cost, then each stage's predicted
    bill reached at its predicted end (the run's own prediction before it ran where it made
    one, else the planner's), the time between stages as planned. Empty before a plan."""
    plan = record.plan
    if plan is None:
        return Series((), (), ("planned",))
    t, usd = 0.0, record.usd_of("profiling")
    xs, ys = [t], [usd]
    between = plan.between_stages_s or 0.0
    for position, stage in enumerate(plan.stages):
        estimate = stage.predicted
        time_s = stage.time_s if estimate is None else estimate.time_s
        cost = stage.cost_usd if estimate is None else estimate.cost_usd
        t += time_s + (between if position else 0.0)
        usd += cost
        xs.append(t)
        ys.append(usd)
    return Series(tuple(xs), (tuple(ys),), ("planned",))


def usage_series(record: RunRecord) -> Series:
    """Functions and GB of function memory in use over the whole run, every trial's epochs
    together (an epoch holds its n functions of its memory from its start to its end)."""
    changes: dict[float, list[float]] = {}
    for trial in record.trials:
        for h in trial.history:
            end = float(h["t_s"])
            start = max(end - float(h["epoch_s"]), 0.0)
            n, gb = float(h["n"]), float(h["n"]) * float(h["memory_mb"]) / 1024.0
            for at, sign in ((start, 1.0), (end, -1.0)):
                delta = changes.setdefault(at, [0.0, 0.0])
                delta[0] += sign * n
                delta[1] += sign * gb
    xs, functions, memory = [0.0], [0.0], [0.0]
    now = [0.0, 0.0]
    for at in sorted(changes):
        now = [now[0] + changes[at][0], now[1] + changes[at][1]]
        value = (round(now[0], 6), round(now[1], 6))  # sums of floats back to whole counts
        if at == xs[-1]:
            functions[-1], memory[-1] = value
        else:
            xs.append(at)
            functions.append(value[0])
            memory.append(value[1])
    return Series(tuple(xs), (tuple(functions), tuple(memory)), ("functions", "GB in use"))


def curves_of(record: RunRecord, metric: str) -> tuple[Curve, ...]:
    """Each trial's ``metric`` (as ``metric_value`` reads it) at every epoch it finished."""
    curves = []
    for trial in record.trials:
        points = [(int(h["epoch"]), metric_value(h, metric)) for h in trial.history]
        kept = [(e, v) for e, v in points if v is not None and math.isfinite(v)]
        label = f"trial {trial.trial_id}"
        if trial.status == "diverged":
            label += " (diverged)"
        curves.append(
            Curve(trial.trial_id, label, tuple(e for e, _ in kept), tuple(v for _, v in kept))
        )
    return tuple(curves)


def stage_boundaries(record: RunRecord) -> tuple[int, ...]:
    """The epoch each stage but the last ends at (where the curves' stages change)."""
    plan = record.plan
    if plan is None:
        return ()
    ends, total = [], 0
    for stage in plan.stages[:-1]:
        total += stage.epochs
        ends.append(total)
    return tuple(ends)
