"""The Markdown report of a run: plan against actual, best configuration, restarts, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faasml.reports.run_summary import summary_lines
from faasml.runtime.ranking import diverged_at
from faasml.units import format_duration, format_money


def _money(value: float | None) -> str:
    return "-" if value is None else format_money(value)


def _error(actual: float, predicted: float) -> str:
    return f"{(actual - predicted) / predicted:+.0%}" if predicted else "-"


def _stage_cell(stage: dict[str, Any], which: str) -> str:
    """'time, bill' of a stage as ``which`` (predicted, repredicted, measured; '' the
    planner's) says, or '-'."""
    prefix = f"{which}_" if which else ""
    time_s, cost = stage.get(f"{prefix}time_s"), stage.get(f"{prefix}cost_usd")
    if time_s is None or cost is None:
        return "-"
    return f"{format_duration(time_s)}, {format_money(cost)}"


def _planned_lines(plan: dict[str, Any]) -> list[str]:
    """The planner's own figures, where the run predicted beside them (a tuning run): its
    model prices every stage's start apart; the run's knows the functions warm between
    stages, the prewarm, the partitions' writes and its own time between stages."""
    if "predicted_time_s" not in plan:
        return []
    return [
        "",
        f"The planner planned {format_duration(plan['time_s'])} and "
        f"{_money(plan.get('cost_usd'))} (stage by stage in the table's planned column).",
    ]


def _between_lines(plan: dict[str, Any]) -> list[str]:
    """The run's own time between stages (ranking, re-calibration, re-planning, the record):
    as the plan priced it and as measured."""
    predicted = plan.get("between_stages_s")
    stages = plan.get("stages", [])
    measured = [s["measured_between_s"] for s in stages[:-1] if "measured_between_s" in s]
    if predicted is None or len(stages) < 2:
        return []
    shown = (
        f"measured {format_duration(sum(measured) / len(measured))} on average over {len(measured)}"
        if measured
        else "not measured"
    )
    return [
        "",
        "Between stages (ranking, re-calibration, re-planning, the record): predicted "
        f"{format_duration(predicted)} each, as planning took; {shown}.",
    ]


def _reprediction_lines(state: dict[str, Any]) -> list[str]:
    """A training run's re-predictions after live re-calibration: the rest of the run as
    re-predicted after an epoch, against what the rest then measured (the rest priced to the
    last epoch allowed; a run stopped before it ran fewer epochs than re-predicted)."""
    repredictions = state.get("plan", {}).get("repredictions", [])
    if not repredictions:
        return []
    elapsed = float(state.get("elapsed_s", 0.0))
    charges = state.get("charges", [])
    run_bill = sum(c["usd"] for c in charges if c.get("kind") != "profiling")
    done = max((t.get("epochs_done", 0) for t in state.get("trials", [])), default=0)
    lines = [
        "",
        "Re-predicted during the run, after re-calibration (the rest of the run from that epoch):",
        "",
        "| after epoch | at | epochs left (run) | re-predicted rest | measured rest | "
        "whole run re-predicted |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in repredictions:
        whole = r["at_s"] + r["rest_time_s"], r["spent_usd"] + r["rest_cost_usd"]
        lines.append(
            f"| {r['epoch']} | {format_duration(r['at_s'])} | {r['rest_epochs']} "
            f"({max(done - r['epoch'], 0)}) | {format_duration(r['rest_time_s'])}, "
            f"{format_money(r['rest_cost_usd'])} | {format_duration(elapsed - r['at_s'])}, "
            f"{format_money(run_bill - r['spent_usd'])} | {format_duration(whole[0])}, "
            f"{format_money(whole[1])} |"
        )
    return lines


def _status_cell(trial: dict[str, Any]) -> str:
    """A trial's status; a diverged one's with the epoch and why (ranked last)."""
    if trial.get("status") != "diverged":
        return str(trial.get("status"))
    found = diverged_at(trial.get("history", []))
    epoch = trial.get("diverged_epoch") or (found[0] if found else "?")
    return f"diverged at epoch {epoch} ({found[1] if found else 'NaN or infinite'}), ranked last"


def render_report(state: dict[str, Any], plots: list[Path]) -> str:
    plan = state.get("plan", {})
    lines = [f"# faasml {state.get('kind', 'run')}: {state.get('job', {}).get('name', '')}", ""]
    constraint = state.get("constraint", {})
    bounds = []
    if constraint.get("budget_usd") is not None:
        bounds.append(f"budget {format_money(constraint['budget_usd'])}")
    if constraint.get("deadline_s") is not None:
        bounds.append(f"deadline {format_duration(constraint['deadline_s'])}")
    lines.append(
        f"Status: **{state.get('status')}**; {', '.join(bounds)}; catalog {state.get('catalog')}."
    )
    lines += ["", "```", *summary_lines(state), "```"]
    charges = state.get("charges", [])
    spent = sum(c["usd"] for c in charges)
    profiling = sum(c["usd"] for c in charges if c.get("kind") == "profiling")
    elapsed = float(state.get("elapsed_s", 0.0))
    # A tuning run's own prediction (``predicted_*``) stands beside the planner's plan.
    time_s = plan.get("predicted_time_s", plan.get("time_s", 0.0))
    cost_usd = plan.get("predicted_cost_usd", plan.get("cost_usd"))
    lines += [
        "",
        "## Plan against actual",
        "",
        "The run predicts itself from the plan; the bill below it also holds what measuring the",
        f"job cost ({format_money(profiling)}), which the plan's budget already left out.",
        "",
        "| | predicted | actual | error |",
        "|---|---:|---:|---:|",
        f"| time | {format_duration(time_s)} | {format_duration(elapsed)} | "
        f"{_error(elapsed, time_s)} |",
        f"| bill (run) | {_money(cost_usd)} | {format_money(spent - profiling)} | "
        f"{_error(spent - profiling, cost_usd or 0.0)} |",
        *_planned_lines(plan),
        "",
        f"Planner: {plan.get('planner', '-')}; re-plans during the run: {plan.get('replans', 0)}.",
        *_between_lines(plan),
        "",
        "| stage | trials | epochs | allocation | predicted epoch | measured epoch (mean) "
        "| planned stage | predicted stage | re-predicted | measured |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    trials = state.get("trials", [])
    epochs_before = 0
    for stage in plan.get("stages", []):
        a = stage["allocation"]
        first, last = epochs_before + 1, epochs_before + stage["epochs"]
        epochs_before = last
        measured = [
            h["epoch_s"]
            for t in trials
            for h in t.get("history", [])
            if first <= h["epoch"] <= last
        ]
        mean = sum(measured) / len(measured) if measured else None
        lines.append(
            f"| {stage['index']} | {stage['trials']} | {stage['epochs']} | "
            f"{a['n']} × {a['memory_mb']} MB, {a['storage']}/{a['scheme']} | "
            f"{format_duration(stage['epoch_time_s'])} | "
            f"{'-' if mean is None else format_duration(mean)} | "
            f"{_stage_cell(stage, '')} | "
            f"{_stage_cell(stage, 'predicted')} | {_stage_cell(stage, 'repredicted')} | "
            f"{_stage_cell(stage, 'measured')} |"
        )
    lines += _reprediction_lines(state)
    by_kind: dict[str, float] = {}
    for charge in state.get("charges", []):
        by_kind[charge["kind"]] = by_kind.get(charge["kind"], 0.0) + charge["usd"]
    lines += ["", "## Bill", "", "| item | US dollars |", "|---|---:|"]
    for kind, usd in sorted(by_kind.items()):
        lines.append(f"| {kind} | {format_money(usd)} |")
    lines.append(f"| **total** | **{format_money(spent)}** |")
    best = state.get("best")
    lines += ["", "## Best configuration", ""]
    if best:
        lines.append(
            f"Trial {best['trial']}: `{best['config']}`; validation loss "
            f"{best.get('val_loss')}, accuracy {best.get('val_accuracy')}; "
            f"checkpoint `{best.get('checkpoint')}` in `objects/`."
        )
    elif any(t.get("status") == "diverged" for t in trials):
        lines.append("None: no trial ended with a finite loss (see the diverged trials below).")
    else:
        lines.append("None finished.")
    lines += [
        "",
        "## Restarts and failures",
        "",
        f"Segments run: {state.get('segments', 0)}; restarts: {state.get('restarts', 0)}; "
        f"cold starts: {state.get('cold_starts', 0)}. "
        f"Enforcement: {state.get('enforcement', {})}.",
        "",
    ]
    failures = [(t["trial_id"], f) for t in trials for f in t.get("failures", [])]
    for trial_id, failure in failures:
        lines.append(f"- trial {trial_id}: {failure}")
    if not failures:
        lines.append("No failures.")
    lines += [
        "",
        "## Trials",
        "",
        "| trial | status | epochs | last val loss | config |",
        "|---:|---|---:|---:|---|",
    ]
    for t in trials:
        last = t["history"][-1] if t.get("history") else {}
        lines.append(
            f"| {t['trial_id']} | {_status_cell(t)} | {t['epochs_done']} | "
            f"{last.get('val_loss', '-')} | `{t['config']}` |"
        )
    from faasml.reports.search_report import workflow_lines

    lines += workflow_lines(state)
    events = state.get("events", [])
    if events:
        lines += ["", "## Events", ""]
        lines += [f"- {e['t_s']:.1f} s: {e['text']}" for e in events]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.as_posix()})" for p in plots]
    return "\n".join(lines) + "\n"
