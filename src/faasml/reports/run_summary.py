"""The outcome of a run in a few plain lines: what was predicted, what was measured, what failed
and why. The console prints them after a run and the report opens with them (pure)."""

from __future__ import annotations

import re
from collections import Counter

from faasml.reports.run_format import money, seconds
from faasml.runtime.coordinator.ranking import diverged_at, diverged_line
from faasml.runtime.record.records import PlanRecord, RunRecord

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
    if "did not start" in failure:
        return "late start"
    if "TimeoutError" in failure:
        return "sync timeout"
    found = _CAUSE.search(failure)
    return found.group(1) if found else "other"


def restart_causes(record: RunRecord) -> Counter[str]:
    """Restarts by cause ('killed', 'out-of-memory', 'timeout', 'error', ...); a deployment
    search's probe that failed counts as 'search probe: <cause>'."""
    causes: Counter[str] = Counter()
    for trial in record.trials:
        for failure in trial.failures:
            causes[_cause(failure)] += 1
    phases = record.workflow.all_phases() if record.workflow is not None else []
    for phase in phases:
        for probe in phase.probes:
            if probe.failed:
                causes[f"search probe: {_cause(probe.failed)}"] += 1
    return causes


def lost_trials(record: RunRecord) -> list[int]:
    """Trials that failed (restarted past the limit): lost to the search."""
    return [t.trial_id for t in record.trials if t.status == "failed"]


def lost_line(record: RunRecord) -> str | None:
    """One line on the trials lost ("2 of 8 trials failed: trials 3, 5 after repeated
    restarts (8 killed)"); None when none was."""
    lost = [t for t in record.trials if t.status == "failed"]
    if not lost:
        return None
    causes = Counter(_cause(f) for t in lost for f in t.failures)
    why = ", ".join(f"{n} {cause}" for cause, n in causes.most_common())
    ids = ", ".join(str(t.trial_id) for t in lost)
    return (
        f"{len(lost)} of {len(record.trials)} trials failed: trial{'s' if len(lost) > 1 else ''}"
        f" {ids} after repeated restarts" + (f" ({why})" if why else "")
    )


def exit_code(record: RunRecord) -> int:
    """0 when the run finished (or stopped cleanly at its budget) and lost no trial, else 1."""
    if record.status in FAILED_STATUSES or lost_trials(record):
        return 1
    return 0


def _plan_lines(record: RunRecord, plan: PlanRecord) -> list[str]:
    """The plan's time and bill, then the measured ones against it: the run's own prediction
    where it made one beside the planner's (a tuning run, the planner's on a line before),
    else the plan's."""
    profiling = record.usd_of("profiling")
    elapsed = record.elapsed_s
    run_bill = record.bill_usd() - profiling
    waiting = record.waiting_s
    running = elapsed - waiting
    own = plan.predicted
    time_s = plan.time_s if own is None else own.time_s
    cost_usd = plan.cost_usd if own is None else own.cost_usd
    measured = f"{seconds(elapsed)} ({_error(elapsed, time_s)})"
    if waiting > 0:  # data that had not landed yet: not a time any plan predicts
        measured = (
            f"{seconds(running)} running ({_error(running, time_s)}; "
            f"{seconds(waiting)} more waiting for data)"
        )
    searched = record.usd_of("search")
    billed = f"{money(run_bill)} ({_error(run_bill, cost_usd)})"
    if searched > 0:  # a deployment search's probes: a cost the plan leaves to the search
        trained = run_bill - searched
        billed = (
            f"{money(trained)} training ({_error(trained, cost_usd)}) + {money(searched)} searching"
        )
    lines = [
        f"predicted {seconds(time_s)} and {money(cost_usd)}{'' if own is None else ' by the run'}",
        f"measured {measured} and {billed}",
    ]
    if own is None:
        return lines
    return [f"planned {seconds(plan.time_s)} and {money(plan.cost_usd)} by the planner", *lines]


def summary_lines(record: RunRecord) -> list[str]:
    """The run's outcome: status, time and bill against the plan, profiling, trials and
    restarts with their causes, the target when one was set."""
    profiling = record.usd_of("profiling")
    bill = record.bill_usd()
    plan = record.plan
    elapsed = record.elapsed_s
    lines = [
        f"{record.status} in {seconds(elapsed)}, bill {money(bill)}"
        + (f" (profiling {money(profiling)})" if profiling else "")
    ]
    if plan is not None:
        lines += _plan_lines(record, plan)
    if plan is not None and plan.repredictions:  # re-calibrated: the last whole-run re-prediction
        last = plan.repredictions[-1]
        time_s = last.at_s + last.rest_time_s
        usd = last.spent_usd + last.rest_cost_usd
        lines.append(
            f"re-predicted after epoch {last.epoch}: {seconds(time_s)} "
            f"({_error(elapsed, time_s)}) and {money(usd)} ({_error(bill - profiling, usd)})"
        )
    profile = record.profile
    if profile is not None:
        how = "cached" if record.profile_cached else "measured"
        if profile.check is not None:
            how += f", re-checked: {profile.check.action}"
        for event in record.events:  # the run's epochs corrected the cached one
            if "the cached profile's time per sample" in event.text:
                how += (
                    ", stale by the run's epochs"
                    if "stale" in event.text
                    else ", rescaled by the run's epochs"
                )
        lines.append(
            f"job profile {how}: footprint {profile.footprint_mb:.0f} MB, "
            f"{profile.params:,} parameters, cold start {profile.cold_start_s:.2f} s"
        )
    counts = Counter(t.status for t in record.trials)
    trials = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    causes = restart_causes(record)
    restarts = record.restarts
    why = ", ".join(f"{n} {cause}" for cause, n in causes.most_common())
    lines.append(f"trials: {trials or 'none'}; restarts {restarts}" + (f" ({why})" if why else ""))
    lines += _diverged_lines(record)
    lost = lost_line(record)
    if lost is not None:
        lines.append(f"LOST: {lost}")
    target = record.target
    if target is not None and not target.reached:
        lines.append(f"TARGET MISSED: validation loss {target.last:.4g} > target {target.loss:g}")
    if record.stop_reason:  # a failed run without a best says so first (printed in red)
        failed = record.status == "failed" and record.best is None
        lines.append(f"{'NO BEST' if failed else 'stopped'}: {record.stop_reason}")
    return lines


def _diverged_lines(record: RunRecord) -> list[str]:
    """One line per diverged trial; where no trial is left to be the best, a line saying so."""
    trials = record.trials
    diverged = [t for t in trials if t.status == "diverged"]
    if record.kind == "train":  # its one trial: nothing ranks it
        found = [diverged_at(t.history) for t in diverged]
        return [
            f"diverged at epoch {f[0]} ({f[1]}): trained no further (e.g. lower the learning rate)"
            for f in found
            if f is not None
        ]
    lines = [diverged_line(t.trial_id, t.diverged_epoch, t.history) for t in diverged]
    if diverged and record.best is None and record.kind == "tune":
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
