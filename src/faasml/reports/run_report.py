"""The Markdown report of a run: plan against actual, best configuration, restarts, failures."""

from __future__ import annotations

from pathlib import Path

from faasml.reports.results_report import pareto_lines
from faasml.reports.run_format import (
    best_value,
    drawn,
    money,
    number,
    run_metric,
    seconds,
    trial_usd,
)
from faasml.reports.run_summary import summary_lines
from faasml.runtime.coordinator.ranking import diverged_at
from faasml.runtime.record.records import Estimate, PlanRecord, RunRecord, TrialRecord
from faasml.types import Allocation


def _money(value: float | None) -> str:
    return "-" if value is None else money(value)


def _error(actual: float, predicted: float) -> str:
    return f"{(actual - predicted) / predicted:+.0%}" if predicted else "-"


def _stage_cell(value: Estimate | None) -> str:
    """'time, bill' of a stage's estimate (the planner's, the run's prediction, re-prediction,
    measurement), or '-'."""
    if value is None:
        return "-"
    return f"{seconds(value.time_s)}, {money(value.cost_usd)}"


def _planned_lines(plan: PlanRecord) -> list[str]:
    """The planner's own figures, where the run predicted beside them (a tuning run): its
    model prices every stage's start apart; the run's knows the functions warm between
    stages, the prewarm, the partitions' writes and its own time between stages."""
    if plan.predicted is None:
        return []
    return [
        "",
        f"The planner planned {seconds(plan.time_s)} and "
        f"{_money(plan.cost_usd)} (stage by stage in the table's planned column).",
    ]


def _between_lines(plan: PlanRecord) -> list[str]:
    """The run's own time between stages (ranking, re-calibration, re-planning, the record):
    as the plan priced it and as measured."""
    predicted = plan.between_stages_s
    stages = plan.stages
    measured = [s.measured_between_s for s in stages[:-1] if s.measured_between_s is not None]
    if predicted is None or len(stages) < 2:
        return []
    shown = (
        f"measured {seconds(sum(measured) / len(measured))} on average over {len(measured)}"
        if measured
        else "not measured"
    )
    return [
        "",
        "Between stages (ranking, re-calibration, re-planning, the record): predicted "
        f"{seconds(predicted)} each, as planning took; {shown}.",
    ]


def _reprediction_lines(record: RunRecord) -> list[str]:
    """A training run's re-predictions after live re-calibration: the rest of the run as
    re-predicted after an epoch, against what the rest then measured (the rest priced to the
    last epoch allowed; a run stopped before it ran fewer epochs than re-predicted)."""
    repredictions = record.plan.repredictions if record.plan is not None else []
    if not repredictions:
        return []
    elapsed = record.elapsed_s
    run_bill = record.run_usd()
    done = max((t.epochs_done for t in record.trials), default=0)
    lines = [
        "",
        "Re-predicted during the run, after re-calibration (the rest of the run from that epoch):",
        "",
        "| after epoch | at | epochs left (run) | re-predicted rest | measured rest | "
        "whole run re-predicted |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in repredictions:
        whole = r.at_s + r.rest_time_s, r.spent_usd + r.rest_cost_usd
        lines.append(
            f"| {r.epoch} | {seconds(r.at_s)} | {r.rest_epochs} "
            f"({max(done - r.epoch, 0)}) | {seconds(r.rest_time_s)}, "
            f"{money(r.rest_cost_usd)} | {seconds(elapsed - r.at_s)}, "
            f"{money(run_bill - r.spent_usd)} | {seconds(whole[0])}, "
            f"{money(whole[1])} |"
        )
    return lines


def _status_cell(trial: TrialRecord) -> str:
    """A trial's status; a diverged one's with the epoch and why (ranked last)."""
    if trial.status != "diverged":
        return trial.status
    found = diverged_at(trial.history)
    epoch = trial.diverged_epoch or (found[0] if found else "?")
    return f"diverged at epoch {epoch} ({found[1] if found else 'NaN or infinite'}), ranked last"


def _plan_lines(record: RunRecord) -> list[str]:
    """The plan against the run: totals (the run's own prediction where it made one beside
    the planner's), then stage by stage."""
    plan = record.plan
    spent, profiling = record.bill_usd(), record.usd_of("profiling")
    elapsed = record.elapsed_s
    own = plan.predicted if plan is not None else None
    time_s = (plan.time_s if own is None else own.time_s) if plan is not None else 0.0
    cost = (plan.cost_usd if own is None else own.cost_usd) if plan is not None else None
    lines = [
        "",
        "## Plan against actual",
        "",
        "The run predicts itself from the plan; the bill below it also holds what measuring the",
        f"job cost ({money(profiling)}), which the plan's budget already left out.",
        "",
        "| | predicted | actual | error |",
        "|---|---:|---:|---:|",
        f"| time | {seconds(time_s)} | {seconds(elapsed)} | {_error(elapsed, time_s)} |",
        f"| bill (run) | {_money(cost)} | {money(spent - profiling)} | "
        f"{_error(spent - profiling, cost or 0.0)} |",
        *(_planned_lines(plan) if plan is not None else []),
        "",
    ]
    if plan is None:
        return [*lines, "Not planned yet."]
    lines += [
        f"Planner: {plan.planner}; re-plans during the run: {plan.replans}.",
        *_between_lines(plan),
        *_stage_table(record, plan),
    ]
    return lines


def _allocation_cell(a: Allocation) -> str:
    return f"{a.n} × {a.memory_mb} MB, {a.storage}/{a.scheme}"


def _stage_table(record: RunRecord, plan: PlanRecord) -> list[str]:
    """Stage by stage, three groups that never mix: as planned (the planner's allocation and
    figures, and the run's own prediction before it ran), as re-planned during the run (the
    re-plan's allocation and prediction; '-' where the stage kept its plan), as measured."""
    lines = [
        "",
        "| stage | trials × epochs | planned allocation | planned (planner) | planned (run) "
        "| re-planned allocation | re-planned | measured epoch (mean) | measured |",
        "|---:|---:|---|---:|---:|---|---:|---:|---:|",
    ]
    repredicted = []
    epochs_before = 0
    for stage in plan.stages:
        first, last = epochs_before + 1, epochs_before + stage.epochs
        epochs_before = last
        measured = [
            h["epoch_s"] for t in record.trials for h in t.history if first <= h["epoch"] <= last
        ]
        mean = sum(measured) / len(measured) if measured else None
        replanned = stage.replanned is not None
        planned_at = stage.planned_allocation if replanned else None
        planned_at = planned_at or stage.allocation
        planner_at = stage.planned_allocation or stage.allocation
        planner = _stage_cell(Estimate(stage.time_s, stage.cost_usd))
        if planner_at != planned_at:  # the run moved the stage onto warm functions
            planner += f" (on {_allocation_cell(planner_at)})"
        lines.append(
            f"| {stage.index} | {stage.trials} × {stage.epochs} | {_allocation_cell(planned_at)} "
            f"| {planner} | {_stage_cell(stage.predicted)} "
            f"| {_allocation_cell(stage.allocation) if replanned else '-'} "
            f"| {_stage_cell(stage.replanned)} | {seconds(mean)} "
            f"| {_stage_cell(stage.measured)} |"
        )
        if stage.repredicted is not None and stage.repredicted != stage.replanned:
            repredicted.append(f"stage {stage.index} {_stage_cell(stage.repredicted)}")
    if repredicted:
        lines += [
            "",
            "Re-predicted during the run after re-calibration, on the allocation the stage "
            "then had: " + "; ".join(repredicted) + ".",
        ]
    return lines


def _best_lines(record: RunRecord) -> list[str]:
    """The best trial by the run's metric, with that metric first."""
    best = record.best
    if best is None:
        if any(t.status == "diverged" for t in record.trials):
            return ["None: no trial ended with a finite loss (see the diverged trials below)."]
        if record.status == "failed" and record.stop_reason:  # e.g. no trial had the metric
            return [f"None: {record.stop_reason}."]
        return ["None finished."]
    metric = run_metric(record)
    value = best_value(record, metric)
    others = [
        f"{label} {number(v)}"
        for name, label, v in (
            ("loss", "validation loss", best.val_loss),
            ("accuracy", "validation accuracy", best.val_accuracy),
        )
        if name != metric.name and v is not None
    ]
    return [
        f"Trial {best.trial}: {metric.label} **{number(value)}**, ranked by {metric.name} "
        f"({metric.mode}){''.join('; ' + o for o in others)}; "
        + (f"`{drawn(record, best.config)}`; " if best.config else "")
        + f"checkpoint `{best.checkpoint}` in `objects/`."
    ]


def _trial_lines(record: RunRecord) -> list[str]:
    """The trials best first by the run's metric and mode (the most epochs first), with the
    last epoch's metric and each trial's bill."""
    metric = run_metric(record)
    usd = trial_usd(record)
    lines = [
        "",
        "## Trials",
        "",
        f"Best first: the most epochs, then the last epoch's {metric.heading}.",
        "",
        f"| trial | status | {metric.label} | epochs | bill | config |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for t in metric.ranked(record.trials):
        lines.append(
            f"| {t.trial_id} | {_status_cell(t)} | {number(metric.last(t))} | "
            f"{t.epochs_done} | {money(usd.get(t.trial_id, 0.0))} | `{drawn(record, t.config)}` |"
        )
    return lines


def render_report(record: RunRecord, plots: list[Path]) -> str:
    c = record.constraint
    lines = [f"# faasml {record.kind}: {record.job_name}", ""]
    bounds = []
    if c.budget_usd is not None:
        bounds.append(f"budget {money(c.budget_usd)}")
    if c.deadline_s is not None:
        bounds.append(f"deadline {seconds(c.deadline_s)}")
    lines.append(f"Status: **{record.status}**; {', '.join(bounds)}; catalog {record.catalog}.")
    lines += ["", "```", *summary_lines(record), "```"]
    lines += _plan_lines(record)
    lines += _reprediction_lines(record)
    by_kind: dict[str, float] = {}
    for charge in record.charges:
        by_kind[charge.kind] = by_kind.get(charge.kind, 0.0) + charge.usd
    lines += ["", "## Bill", "", "| item | US dollars |", "|---|---:|"]
    for kind, usd in sorted(by_kind.items()):
        lines.append(f"| {kind} | {money(usd)} |")
    lines.append(f"| **total** | **{money(record.bill_usd())}** |")
    lines += ["", "## Best configuration", "", *_best_lines(record)]
    lines += [
        "",
        "## Restarts and failures",
        "",
        f"Segments run: {record.segments}; restarts: {record.restarts}; "
        f"cold starts: {record.cold_starts}. "
        f"Enforcement: {record.enforcement or {}}.",
        "",
    ]
    failures = [(t.trial_id, f) for t in record.trials for f in t.failures]
    for trial_id, failure in failures:
        lines.append(f"- trial {trial_id}: {failure}")
    if not failures:
        lines.append("No failures.")
    lines += _trial_lines(record)
    from faasml.reports.search_report import workflow_lines

    if record.kind == "tune":
        lines += pareto_lines(record)
    lines += workflow_lines(record)
    if record.events:
        lines += ["", "## Events", ""]
        lines += [f"- {e.t_s:.1f} s: {e.text}" for e in record.events]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.as_posix()})" for p in plots]
    return "\n".join(lines) + "\n"
