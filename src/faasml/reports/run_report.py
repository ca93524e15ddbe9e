"""The Markdown report of a run: plan against actual, best configuration, restarts, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faasml.units import format_duration, format_money


def _money(value: float | None) -> str:
    return "-" if value is None else format_money(value)


def _error(actual: float, predicted: float) -> str:
    return f"{(actual - predicted) / predicted:+.0%}" if predicted else "-"


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
    if state.get("stop_reason"):
        lines.append(f"\nStopped: {state['stop_reason']}")
    spent = sum(c["usd"] for c in state.get("charges", []))
    elapsed = float(state.get("elapsed_s", 0.0))
    lines += [
        "",
        "## Plan against actual",
        "",
        "| | predicted | actual | error |",
        "|---|---:|---:|---:|",
        f"| time | {format_duration(plan.get('time_s', 0.0))} | {format_duration(elapsed)} | "
        f"{_error(elapsed, plan.get('time_s', 0.0))} |",
        f"| bill | {_money(plan.get('cost_usd'))} | {format_money(spent)} | "
        f"{_error(spent, plan.get('cost_usd', 0.0))} |",
        "",
        f"Planner: {plan.get('planner', '-')}.",
        "",
        "| stage | trials | epochs | allocation | predicted epoch | measured epoch (mean) |",
        "|---:|---:|---:|---|---:|---:|",
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
            f"{'-' if mean is None else format_duration(mean)} |"
        )
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
            f"| {t['trial_id']} | {t['status']} | {t['epochs_done']} | "
            f"{last.get('val_loss', '-')} | `{t['config']}` |"
        )
    events = state.get("events", [])
    if events:
        lines += ["", "## Events", ""]
        lines += [f"- {e['t_s']:.1f} s: {e['text']}" for e in events]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.as_posix()})" for p in plots]
    return "\n".join(lines) + "\n"
