"""Ranking trials by their metric in its mode, and telling a diverged trial (pure).

A trial diverged at the first epoch whose training loss, validation loss or validation
accuracy is NaN or infinite: it ranks last whatever the metric's mode (a NaN compares false
with everything, so a plain sort could put it first), and successive halving never keeps it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from faasml.job.spec import implied_mode

if TYPE_CHECKING:
    from faasml.runtime.coordinator.trial import TrialState

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


def metric_mode(metric: str, mode: str | None = None) -> str:
    """``mode`` when given, else the one ``metric`` implies ('max' for an accuracy, 'min'
    for a loss and, where nothing is implied, for a record written before modes)."""
    return mode if mode is not None else (implied_mode(metric) or "min")


def metric_value(record: Mapping[str, Any], metric: str) -> float | None:
    """An epoch's value of the ranking metric; None when it has none. ``accuracy`` is the
    validation accuracy, ``loss`` the validation loss (the training loss where the job has no
    test set); any other name is the epoch's own field of that name, else the metric of that
    name the trial reported (``faasml.report``) or evaluated (``val``, or ``val_<name>``)."""
    if metric == "accuracy":
        return _number(record.get("val_accuracy"))
    if metric == "loss":
        value = _number(record.get("val_loss"))
        return _number(record.get("loss")) if value is None else value
    for where in (record, record.get("reported"), record.get("val")):
        if isinstance(where, Mapping) and _number(where.get(metric)) is not None:
            return _number(where.get(metric))
    return _number(record.get(f"val_{metric}"))


def loss_of(record: Mapping[str, Any]) -> float:
    """An epoch's validation loss, else its training loss (``metric_value``'s 'loss'); +inf
    where it has neither (a training loop that reports no loss)."""
    value = metric_value(record, "loss")
    return math.inf if value is None else value


def metric_names(record: Mapping[str, Any]) -> list[str]:
    """The metric names an epoch's record can rank by (for a message naming them)."""
    names = {"loss"} if metric_value(record, "loss") is not None else set()
    if record.get("val_accuracy") is not None:
        names.add("accuracy")
    names.update(k for k in record if k.startswith("val_") and _number(record[k]) is not None)
    for key in ("reported", "val"):
        found = record.get(key)
        if isinstance(found, Mapping):
            names.update(k for k, v in found.items() if _number(v) is not None)
    return sorted(names)


def missing_line(trial_id: int, metric: str, record: Mapping[str, Any]) -> str:
    """The event of a trial whose last epoch lacks the ranking metric."""
    names = ", ".join(metric_names(record)) or "none"
    return f"trial {trial_id} reported no {metric!r} (it reported: {names}); ranked last"


def _number(value: object) -> float | None:
    """A real number as float (never a bool); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


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


def ranked(trials: Iterable[TrialState], metric: str, mode: str | None = None) -> list[TrialState]:
    """``trials`` best first by their last epoch's ``metric`` in ``mode`` (default: the one
    the metric implies); one lacking the metric after those that have it, and a diverged
    trial (marked, or whose last epoch shows it) after every other. Ties keep their order."""
    mode = metric_mode(metric, mode)

    def key(trial: TrialState) -> tuple[bool, tuple[int, float]]:
        return is_diverged(trial), rank_key(metric_value(trial.last, metric), mode)

    return sorted(trials, key=key)


def pareto_ids(entries: Iterable[tuple[int, float | None, float]], mode: str) -> list[int]:
    """The ids of the (id, metric, dollars) entries on the Pareto front of the metric (by
    ``mode``) and dollars, cheapest first; an entry without a finite metric is on no front."""
    from faasml.planners.pareto import pareto_indices

    kept = [(i, v, c) for i, v, c in entries if v is not None and math.isfinite(v)]
    costs = [c for _, _, c in kept]
    values = [v if mode == "min" else -v for _, v, _ in kept]
    return [kept[int(k)][0] for k in pareto_indices(costs, values)]
