"""What the dashboard shows of one run, computed from its typed record alone (pure).

The page only renders: every figure and every text it shows is made here, from the
``RunRecord`` the run wrote, so the live page and the static one (``faasml report --html``)
show the same and the tests can compare the page with the record.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from faasml.reports.run_format import RunMetric, named, run_metric
from faasml.reports.run_series import (
    Curve,
    Series,
    allocation_series,
    metric_curves,
    planned_spend_series,
    spend_series,
    stage_boundaries,
)
from faasml.reports.run_summary import restart_causes, summary_lines
from faasml.runtime.coordinator.ranking import diverged_at, metric_value, rank_key
from faasml.runtime.record.records import Estimate, RunRecord, StageRecord, TrialRecord
from faasml.types import Allocation
from faasml.units import format_duration, format_money

EVENTS_SHOWN = 60
"""The latest events the page lists (a long run logs many)."""


@dataclass(frozen=True)
class Cell:
    """A time and a bill, as numbers and as a reader sees them."""

    time_s: float
    cost_usd: float
    time: str
    bill: str


@dataclass(frozen=True)
class StageRow:
    """One stage: its plan, the run's predictions and the measurement, each a column."""

    index: int
    state: str
    """'done', 'running' or 'to come'."""
    trials: int
    epochs: int
    allocation: str
    planned_allocation: str | None
    """The planner's allocation where the run moved the stage to another."""
    epoch_planned: str
    epoch_measured: str | None
    planned: Cell | None
    predicted: Cell | None
    replanned: Cell | None
    repredicted: Cell | None
    measured: Cell | None


@dataclass(frozen=True)
class TrialRow:
    trial: int
    config: tuple[tuple[str, str], ...]
    status: str
    status_text: str
    metric: float | None
    metric_text: str
    rank: int | None
    best: bool
    epochs: int
    restarts: int
    cost_usd: float
    cost_text: str


@dataclass(frozen=True)
class KindRow:
    kind: str
    usd: float
    text: str


@dataclass(frozen=True)
class Spend:
    """The bill against the budget and the plan, by kind and over time."""

    total_usd: float
    total: str
    budget_usd: float | None
    budget: str | None
    planned_usd: float | None
    planned: str | None
    by_kind: tuple[KindRow, ...]
    spent: Series
    plan: Series


@dataclass(frozen=True)
class Failure:
    trial: int
    text: str


@dataclass(frozen=True)
class Failures:
    restarts: int
    segments: int
    cold_starts: int
    causes: tuple[tuple[str, int], ...]
    items: tuple[Failure, ...]


@dataclass(frozen=True)
class ProfileView:
    summary: str
    rows: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RunView:
    """Everything the page shows of a run."""

    path: str
    name: str
    kind: str
    status: str
    metric: str
    metric_name: str
    mode: str
    elapsed: str
    constraint: str
    platform: str
    planner: str | None
    replans: int
    progress: str
    summary: tuple[str, ...]
    stages: tuple[StageRow, ...]
    spend: Spend
    trials: tuple[TrialRow, ...]
    curves: tuple[Curve, ...]
    stage_epochs: tuple[int, ...]
    usage: Series
    failures: Failures
    profile: ProfileView | None
    events: tuple[tuple[str, str], ...]


def number_text(value: float | None) -> str:
    """A metric's value for a reader: four significant digits; '-' when there is none."""
    if value is None:
        return "-"
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def _cell(value: Estimate | None) -> Cell | None:
    if value is None:
        return None
    return Cell(
        value.time_s, value.cost_usd, format_duration(value.time_s), format_money(value.cost_usd)
    )


def _allocation(a: Allocation) -> str:
    return f"{a.n} × {a.memory_mb} MB, {a.storage}/{a.scheme}"


def stage_rows(record: RunRecord) -> tuple[StageRow, ...]:
    """The plan's stages: the planner's figures, the run's prediction before it ran, its
    re-plan's, its re-prediction and the measurement, never in one another's column."""
    plan = record.plan
    if plan is None:
        return ()
    rows, before = [], 0
    running = record.status == "running"
    for position, stage in enumerate(plan.stages):
        first, last = before + 1, before + stage.epochs
        before = last
        measured = [
            float(h["epoch_s"])
            for t in record.trials
            for h in t.history
            if first <= h["epoch"] <= last
        ]
        state = "done" if stage.measured is not None or position < record.stage else "to come"
        if state == "to come" and running and position == record.stage:
            state = "running"
        rows.append(_stage_row(stage, state, sum(measured) / len(measured) if measured else None))
    return tuple(rows)


def _stage_row(stage: StageRecord, state: str, epoch_mean: float | None) -> StageRow:
    planned_at = stage.planned_allocation
    if planned_at == stage.allocation:  # a re-plan that kept the planner's allocation
        planned_at = None
    return StageRow(
        index=stage.index,
        state=state,
        trials=stage.trials,
        epochs=stage.epochs,
        allocation=_allocation(stage.allocation),
        planned_allocation=None if planned_at is None else _allocation(planned_at),
        epoch_planned=format_duration(stage.epoch_time_s),
        epoch_measured=None if epoch_mean is None else format_duration(epoch_mean),
        planned=_cell(Estimate(stage.time_s, stage.cost_usd)),
        predicted=_cell(stage.predicted),
        replanned=_cell(stage.replanned),
        repredicted=_cell(stage.repredicted),
        measured=_cell(stage.measured),
    )


def _status_text(trial: TrialRecord) -> str:
    if trial.status != "diverged":
        return trial.status
    found = diverged_at(trial.history)
    epoch = trial.diverged_epoch or (found[0] if found else "?")
    return f"diverged at epoch {epoch} ({found[1] if found else 'NaN or infinite'})"


def _shown(value: Any) -> str:
    """A configuration value as text (the page escapes it; it is never markup)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def trial_rows(record: RunRecord, metric: RunMetric) -> tuple[TrialRow, ...]:
    """Every trial with its last value of the run's metric, its rank by the run's mode
    (diverged trials last) and its own bill."""
    cost: dict[int, float] = {}
    for charge in record.charges:
        cost[charge.trial] = cost.get(charge.trial, 0.0) + charge.usd
    values = {t.trial_id: metric_value(t.last, metric.name) for t in record.trials}
    ranked = sorted(
        (t for t in record.trials if t.history),
        key=lambda t: (t.status == "diverged", rank_key(values[t.trial_id], metric.mode)),
    )
    rank = {t.trial_id: i + 1 for i, t in enumerate(ranked)}
    best = record.best.trial if record.best is not None else None
    rows = []
    for t in record.trials:
        value = values[t.trial_id]
        usd = cost.get(t.trial_id, 0.0)
        rows.append(
            TrialRow(
                trial=t.trial_id,
                config=tuple(
                    (str(k), _shown(v)) for k, v in sorted(named(record, t.config).items())
                ),
                status=t.status,
                status_text=_status_text(t),
                metric=value if value is not None and math.isfinite(value) else None,
                metric_text=number_text(value),
                rank=rank.get(t.trial_id),
                best=t.trial_id == best,
                epochs=t.epochs_done,
                restarts=t.restarts,
                cost_usd=usd,
                cost_text=format_money(usd),
            )
        )
    return tuple(rows)


def spend_of(record: RunRecord) -> Spend:
    """The bill by kind and over time, the budget, and the spend the plan predicted."""
    by_kind: dict[str, float] = {}
    for charge in record.charges:
        by_kind[charge.kind] = by_kind.get(charge.kind, 0.0) + charge.usd
    total = record.bill_usd()
    budget = record.constraint.budget_usd
    plan = planned_spend_series(record)
    planned = plan.ys[0][-1] if plan.xs else None
    return Spend(
        total_usd=total,
        total=format_money(total),
        budget_usd=budget,
        budget=None if budget is None else format_money(budget),
        planned_usd=planned,
        planned=None if planned is None else format_money(planned),
        by_kind=tuple(KindRow(k, v, format_money(v)) for k, v in sorted(by_kind.items())),
        spent=spend_series(record),
        plan=plan,
    )


def failures_of(record: RunRecord) -> Failures:
    causes = restart_causes(record)
    items = [Failure(t.trial_id, text) for t in record.trials for text in t.failures]
    return Failures(
        restarts=record.restarts,
        segments=record.segments,
        cold_starts=record.cold_starts,
        causes=tuple(causes.most_common()),
        items=tuple(items),
    )


def profile_of(record: RunRecord) -> ProfileView | None:
    """The job profile the plan's predictions rest on, and the run's re-calibration."""
    p = record.profile
    if p is None:
        return None
    how = "cached" if record.profile_cached else "measured"
    rows = [
        ("source", how + (f" at {p.measured_at}" if p.measured_at else "")),
        ("parameters", f"{p.params:,} ({p.model_mb:.3g} MB)"),
        ("footprint", f"{p.footprint_mb:.0f} MB (plans use >= {p.memory_floor_mb():.0f} MB)"),
        (
            "data",
            f"{p.bytes_per_sample:.0f} B/sample; {p.train_samples:,} train, "
            f"{p.test_samples:,} test",
        ),
        *((f"compute per sample at {m} MB", f"{s * 1e3:.3g} ms") for m, s in p.compute_points),
        ("cold start", f"{p.cold_start_s:.2f} s at 1 vCPU"),
        ("checkpoint", format_duration(p.checkpoint_s)),
    ]
    if p.side_by_side_ratio > 0:
        rows.append(
            (
                "side by side",
                f"{p.side_by_side_ratio:.2f}x slower ({p.delivered_vcpus:.2f} vCPUs delivered)",
            )
        )
    for scheme, transfer, wait in p.sync_rounds:
        rows.append(
            (
                f"{scheme} round of 2",
                f"{transfer * 1e3:.3g} ms + {wait * 1e3:.3g} ms waiting via {p.sync_storage}",
            )
        )
    rows.append(
        ("measuring it cost", f"{format_money(p.profiling_usd)}, {format_duration(p.profiling_s)}")
    )
    calibration = record.calibration
    if calibration is not None:
        for memory, samples in sorted(calibration.samples.items()):
            rows.append((f"re-calibrated at {memory} MB", f"{len(samples)} epoch(s) measured"))
    return ProfileView(summary=p.summary(), rows=tuple(rows))


def _constraint(record: RunRecord) -> str:
    c = record.constraint
    parts = [f"budget {format_money(c.budget_usd)}"] if c.budget_usd is not None else []
    if c.deadline_s is not None:
        parts.append(f"deadline {format_duration(c.deadline_s)}")
    parts.append(c.goal.value)
    return ", ".join(parts)


def _progress(record: RunRecord) -> str:
    plan = record.plan
    if plan is None:
        return "not planned yet"
    stages = len(plan.stages)
    if record.kind != "tune" or stages <= 1:
        done = max((t.epochs_done for t in record.trials), default=0)
        planned = sum(s.epochs for s in plan.stages)
        cap = (record.job.get("training") or {}).get("max_epochs")
        if record.kind == "train" and isinstance(cap, int) and cap != planned:
            # A run to a target loss plans the epochs it expects, up to its max_epochs.
            return f"epoch {done} ({planned} expected, at most {cap})"
        return f"epoch {done} of {planned}"
    return f"stage {min(record.stage + 1, stages)} of {stages}"


def _summary(record: RunRecord) -> tuple[str, ...]:
    """The run summary the console prints; while the run runs, without the lines that set
    its time and bill so far against the whole plan's (an error only once it has ended)."""
    lines = summary_lines(record)
    if record.status == "running":
        ends = ("planned ", "predicted ", "measured ", "re-predicted ")
        lines = [line for line in lines if not line.startswith(ends)]
    return tuple(lines)


def so_far(record: RunRecord) -> RunRecord:
    """``record`` with its time so far: a run sets ``elapsed_s`` as it ends, so while it runs
    its time is the latest its record holds (a charge, an epoch's end, an event)."""
    times = [c.t_s for c in record.charges] + [e.t_s for e in record.events]
    times += [float(h["t_s"]) for t in record.trials for h in t.history]
    latest = max(times, default=0.0)
    if latest <= record.elapsed_s:
        return record
    return dataclasses.replace(record, elapsed_s=latest)


def run_view(record: RunRecord, path: str) -> RunView:
    """The page's view of ``record``, the run in ``path``."""
    record = so_far(record)
    metric = run_metric(record)
    plan = record.plan
    return RunView(
        path=path,
        name=record.job_name or path,
        kind=record.kind,
        status=record.status,
        metric=metric.name,
        metric_name=metric.label,
        mode=metric.mode,
        elapsed=format_duration(record.elapsed_s),
        constraint=_constraint(record),
        platform=f"{record.platform} (catalog {record.catalog})",
        planner=None if plan is None else plan.planner,
        replans=0 if plan is None else plan.replans,
        progress=_progress(record),
        summary=_summary(record),
        stages=stage_rows(record),
        spend=spend_of(record),
        trials=trial_rows(record, metric),
        curves=metric_curves(record, metric),
        stage_epochs=stage_boundaries(record),
        usage=allocation_series(record),
        failures=failures_of(record),
        profile=profile_of(record),
        events=tuple((f"{e.t_s:.1f} s", e.text) for e in record.events[-EVENTS_SHOWN:]),
    )
