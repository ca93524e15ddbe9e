"""One plain line per trial result, as piped ``faasml tune`` and ``Tuner.fit(verbose=1)`` print
them: ``trial 3  epoch 2  val_loss 0.412  $0.0012``, never over 80 columns (pure but for the
callback's ``write``)."""

from __future__ import annotations

from collections.abc import Callable

from faasml.reports.run_format import money
from faasml.runtime.runs.events import RunCallback, RunEnd, StageEnd, TrialResult

WIDTH = 80
"""The widest line printed: a terminal's default width, and a log's that nothing wraps."""
ENDED = ("diverged", "failed", "stopped")
"""A trial's statuses that a line names (running and done are the usual)."""
_NAME = 24
"""The longest metric name shown whole (a reported metric may have a long one)."""


def _number(value: float | None) -> str:
    """Four significant digits, at most 10 characters ('-1.235e+05')."""
    return "-" if value is None else f"{value:.4g}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def trial_line(result: TrialResult) -> str:
    """``trial 3  epoch 2  val_loss 0.412  $0.0012``: the ranking metric's value and the
    trial's cost so far, and its status where the epoch ended it (diverged, failed)."""
    metric = f"{_cut(result.metric, _NAME)} {_number(result.value)}"
    parts = [f"trial {result.trial_id}", f"epoch {result.epoch}", metric]
    parts.append(money(result.cost_usd))
    if result.status in ENDED:
        parts.append(result.status)
    return _cut("  ".join(parts), WIDTH)


def stage_line(event: StageEnd) -> str:
    """``stage 1/2 done: kept 0 2, pruned 1 3; spent $0.0031``, within 80 columns."""
    kept = " ".join(str(t) for t in event.kept) or "none"
    pruned = " ".join(str(t) for t in event.pruned) or "none"
    spent = money(event.spent_usd)
    head = f"stage {event.stage}/{event.stages} done: "
    tail = f"; spent {spent}"
    body = f"kept {kept}, pruned {pruned}"
    return head + _cut(body, WIDTH - len(head) - len(tail)) + tail


def end_line(event: RunEnd) -> str:
    """``run finished: best trial 2 (val_loss 0.401); spent $0.0042``, within 80 columns."""
    text = f"run {event.status}"
    if event.best is not None:
        best = next((t for t in event.trials if t.trial_id == event.best.trial), None)
        value = "" if best is None else f" ({best.metric} {_number(best.value)})"
        text += f": best trial {event.best.trial}{value}"
    tail = f"; spent {money(event.spent_usd)}"
    if event.reason and event.status != "finished":
        tail += f"; {event.reason}"
    return _cut(text + tail, WIDTH)


class TrialLines(RunCallback):
    """Writes ``trial_line`` for every trial result (with ``stages``, a line at each stage's
    end and at the run's end too)."""

    def __init__(self, write: Callable[[str], None], *, stages: bool = False) -> None:
        self.write = write
        self.stages = stages

    def on_trial_result(self, event: TrialResult) -> None:
        self.write(trial_line(event))

    def on_stage_end(self, event: StageEnd) -> None:
        if self.stages:
            self.write(stage_line(event))

    def on_run_end(self, event: RunEnd) -> None:
        if self.stages:
            self.write(end_line(event))
