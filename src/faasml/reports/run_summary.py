"""The outcome of a run in a few plain lines: what was predicted, what was measured, what failed
and why. The console prints them after a run and the report opens with them (pure)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from faasml.runtime.ranking import diverged_line
from faasml.units import format_duration, format_money

FAILED_STATUSES = ("failed", "target-missed")
"""Run statuses that end the command with a non-zero exit code (as do trials lost)."""

_CAUSE = re.compile(r"function ([a-z-]+):")


def _error(measured: float, predicted: float) -> str:
    if predicted <= 0:
        return "n/a"
    return f"{(measured - predicted) / predicted:+.0%}"


def _cause(failure: str) -> str:
    if "reservation ran out" in failure:
        return "budget reservation"
    found = _CAUSE.search(failure)
    return found.group(1) if found else "other"


def restart_causes(state: dict[str, Any]) -> Counter[str]:
    """Restarts by cause ('killed', 'out-of-memory', 'timeout', 'error', ...); a deployment
    search's probe that failed counts as 'search probe: <cause>'."""
    causes: Counter[str] = Counter()
    for trial in state.get("trials", []):
        for failure in trial.get("failures", []):
            causes[_cause(failure)] += 1
    flow = state.get("workflow") or {}
    phases = [*flow.get("phases", []), *([flow["current"]] if flow.get("current") else [])]
    for phase in phases:
        for probe in phase.get("probes", []):
            if probe.get("failed"):
                causes[f"search probe: {_cause(probe['failed'])}"] += 1
    return causes


def lost_trials(state: dict[str, Any]) -> list[int]:
    """Trials that failed (restarted past the limit): lost to the search."""
    return [t["trial_id"] for t in state.get("trials", []) if t.get("status") == "failed"]


def exit_code(state: dict[str, Any]) -> int:
    """0 when the run finished (or stopped cleanly at its budget) and lost no trial, else 1."""
    if state.get("status") in FAILED_STATUSES or lost_trials(state):
        return 1
    return 0


def summary_lines(state: dict[str, Any]) -> list[str]:
    """The run's outcome: status, time and bill against the plan, profiling, trials and
    restarts with their causes, the target when one was set."""
    charges = state.get("charges", [])
    profiling = sum(c["usd"] for c in charges if c.get("kind") == "profiling")
    bill = sum(c["usd"] for c in charges)
    plan = state.get("plan", {})
    elapsed = float(state.get("elapsed_s", 0.0))
    lines = [
        f"{state.get('status', '?')} in {format_duration(elapsed)}, bill {format_money(bill)}"
        + (f" (profiling {format_money(profiling)})" if profiling else "")
    ]
    if plan:
        run_bill = bill - profiling
        waiting = float(state.get("waiting_s", 0.0))
        running = elapsed - waiting
        # The run's own prediction where it made one beside the planner's (a tuning run).
        time_s = float(plan.get("predicted_time_s", plan["time_s"]))
        cost_usd = float(plan.get("predicted_cost_usd", plan["cost_usd"]))
        measured = f"{format_duration(elapsed)} ({_error(elapsed, time_s)})"
        if waiting > 0:  # data that had not landed yet: not a time any plan predicts
            measured = (
                f"{format_duration(running)} running ({_error(running, time_s)}; "
                f"{format_duration(waiting)} more waiting for data)"
            )
        searched = sum(c["usd"] for c in charges if c.get("kind") == "search")
        billed = f"{format_money(run_bill)} ({_error(run_bill, cost_usd)})"
        if searched > 0:  # a deployment search's probes: a cost the plan leaves to the search
            trained = run_bill - searched
            billed = (
                f"{format_money(trained)} training ({_error(trained, cost_usd)}) + "
                f"{format_money(searched)} searching"
            )
        planned = ""
        if "predicted_time_s" in plan:
            planned = (
                f"planned {format_duration(plan['time_s'])} and "
                f"{format_money(plan['cost_usd'])} by the planner; the run "
            )
        lines.append(
            f"{planned}predicted {format_duration(time_s)} and {format_money(cost_usd)};"
            f" measured {measured} and {billed}"
        )
    repredictions = plan.get("repredictions") if plan else None
    if repredictions:  # a training run re-calibrated: its last re-prediction of the whole run
        last = repredictions[-1]
        time_s = last["at_s"] + last["rest_time_s"]
        usd = last["spent_usd"] + last["rest_cost_usd"]
        run_bill = bill - profiling
        lines.append(
            f"re-predicted after epoch {last['epoch']}: {format_duration(time_s)} "
            f"({_error(elapsed, time_s)}) and {format_money(usd)} ({_error(run_bill, usd)})"
        )
    profile = state.get("profile")
    if profile:
        how = "cached" if state.get("profile_cached") else "measured"
        check = profile.get("check")
        if isinstance(check, dict) and "action" in check:
            how += f", re-checked: {check['action']}"
        lines.append(
            f"job profile {how}: footprint {profile['footprint_mb']:.0f} MB, "
            f"{profile['params']:,} parameters, cold start {profile['cold_start_s']:.2f} s"
        )
    counts = Counter(t.get("status", "?") for t in state.get("trials", []))
    trials = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    causes = restart_causes(state)
    restarts = int(state.get("restarts", sum(causes.values())))
    why = ", ".join(f"{n} {cause}" for cause, n in causes.most_common())
    lines.append(f"trials: {trials or 'none'}; restarts {restarts}" + (f" ({why})" if why else ""))
    lines += _diverged_lines(state)
    lost = lost_trials(state)
    if lost:
        lines.append(f"LOST: trial(s) {lost} failed after repeated restarts (see the report)")
    target = state.get("target")
    if target and not target.get("reached"):
        lines.append(
            f"TARGET MISSED: validation loss {target['last']:.4g} > target {target['loss']:g}"
        )
    if state.get("stop_reason"):
        lines.append(f"stopped: {state['stop_reason']}")
    return lines


def _diverged_lines(state: dict[str, Any]) -> list[str]:
    """One line per diverged trial; where no trial is left to be the best, a line saying so."""
    trials = state.get("trials", [])
    diverged = [t for t in trials if t.get("status") == "diverged"]
    lines = [
        diverged_line(t["trial_id"], t.get("diverged_epoch"), t.get("history", []))
        for t in diverged
    ]
    if diverged and not state.get("best") and state.get("kind") == "tune":
        what = (
            "every trial diverged"
            if len(diverged) == len(trials)
            else f"no trial ended with a finite loss ({len(diverged)} diverged)"
        )
        lines.append(
            f"NO BEST: {what} (a NaN or infinite loss); narrow the search space "
            "(e.g. lower learning rates)"
        )
    return lines
