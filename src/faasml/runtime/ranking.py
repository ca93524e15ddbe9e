"""Ranking trials by their validation metric, and telling a diverged trial (pure).

A trial diverged at the first epoch whose training loss, validation loss or validation
accuracy is NaN or infinite: it ranks last whatever the metric's mode (a NaN compares false
with everything, so a plain sort could put it first), and successive halving never keeps it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faasml.runtime.trial import TrialState

_CHECKED = (
    ("loss", "loss"),
    ("val_loss", "validation loss"),
    ("val_accuracy", "validation accuracy"),
)


def divergence(record: Mapping[str, Any]) -> str | None:
    """Why an epoch's record shows divergence ('loss nan', 'validation loss inf', ...): the
    first of its training loss, validation loss and accuracy that is NaN or infinite; None
    when every one it holds is finite."""
    for key, name in _CHECKED:
        value = record.get(key)
        if isinstance(value, numbers.Real) and not math.isfinite(value):
            return f"{name} {float(value)!r}"
    return None


def diverged_at(history: Iterable[Mapping[str, Any]]) -> tuple[int, str] | None:
    """(epoch, why) of the first epoch in ``history`` that diverged; None if none did."""
    for record in history:
        why = divergence(record)
        if why is not None:
            return int(record["epoch"]), why
    return None


def diverged_line(trial_id: int, epoch: int | None, history: Iterable[Mapping[str, Any]]) -> str:
    """The console's, the record's and the report's line for a diverged trial."""
    found = diverged_at(history)
    why = found[1] if found is not None else "NaN or infinite loss"
    if epoch is None and found is not None:
        epoch = found[0]
    return f"trial {trial_id} diverged at epoch {epoch} ({why}); ranked last"


def metric_mode(metric: str) -> str:
    """'max' for accuracy, 'min' for loss."""
    return "max" if metric == "accuracy" else "min"


def metric_value(record: Mapping[str, Any], metric: str) -> float | None:
    """An epoch's value of the ranking metric: validation accuracy, or the validation loss
    (the training loss where the job has no test set); None when it has none."""
    if metric == "accuracy":
        value = record.get("val_accuracy")
    else:
        value = record.get("val_loss")
        value = record.get("loss") if value is None else value
    return None if value is None else float(value)


def rank_key(value: float | None, mode: str) -> tuple[int, float]:
    """Sort key of a metric value, best first: finite values by ``mode`` ('min': smallest
    first, 'max': largest first), then a missing value, then NaN, +inf and -inf (diverged:
    last in either mode)."""
    if value is None:
        return (1, 0.0)
    if not math.isfinite(value):
        return (2, 0.0)
    return (0, value if mode == "min" else -value)


def is_diverged(trial: TrialState) -> bool:
    """Marked diverged, or its last epoch shows it (a trial run without the mark)."""
    return trial.diverged_epoch is not None or divergence(trial.last) is not None


def ranked(trials: Iterable[TrialState], metric: str) -> list[TrialState]:
    """``trials`` best first by their last epoch's ``metric``; a diverged trial (marked, or
    whose last epoch shows it) after every other. Ties keep their order."""
    mode = metric_mode(metric)

    def key(trial: TrialState) -> tuple[bool, tuple[int, float]]:
        return is_diverged(trial), rank_key(metric_value(trial.last, metric), mode)

    return sorted(trials, key=key)
