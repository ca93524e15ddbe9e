"""A run's numbers as a reader wants them, and the metric the run ranks its trials by (pure).

The report, the plots and the console show the ranking metric of the job (``tuning.metric``
and its mode), never the loss in its place, and round what they print: money to four
significant digits (cents from a dollar up), seconds to a tenth, metrics to four significant
digits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from faasml.job import author_names
from faasml.runtime.coordinator.ranking import metric_mode, metric_value, rank_key
from faasml.runtime.record.records import RunRecord, TrialRecord
from faasml.units import format_duration

_LABELS = {"loss": "validation loss", "accuracy": "validation accuracy"}
"""The built-in metrics' names as a reader knows them (any other is shown by its name)."""
ZERO_USD = 5e-13
"""Amounts below this are a float sum's residue (-1e-19), shown as $0."""


@dataclass(frozen=True)
class RunMetric:
    """The metric a run ranks by: its name and mode ('min' or 'max')."""

    name: str
    mode: str

    @property
    def label(self) -> str:
        """'validation accuracy', 'validation loss', or a reported metric's own name."""
        return _LABELS.get(self.name, self.name)

    @property
    def heading(self) -> str:
        """The label and the direction that ranks first: 'validation accuracy (max)'."""
        return f"{self.label} ({self.mode})"

    def value(self, epoch: Mapping[str, Any]) -> float | None:
        """An epoch record's value of the metric (None: the epoch has none)."""
        return metric_value(epoch, self.name)

    def last(self, trial: TrialRecord) -> float | None:
        return self.value(trial.last) if trial.history else None

    def ranked(self, trials: Iterable[TrialRecord]) -> list[TrialRecord]:
        """Trials best first: the most epochs first (successive halving kept them), then by
        the last epoch's metric in the run's mode; a diverged trial last."""

        def key(t: TrialRecord) -> tuple[bool, int, tuple[int, float]]:
            diverged = t.status == "diverged"
            return diverged, -t.epochs_done, rank_key(self.last(t), self.mode)

        return sorted(trials, key=key)


def run_metric(record: RunRecord) -> RunMetric:
    """The metric and mode the run ranked by: the job's ``tuning`` section (a training run:
    the validation loss, lowest first)."""
    tuning = record.job.get("tuning")
    tuning = tuning if isinstance(tuning, Mapping) else {}
    name = tuning.get("metric")
    name = name if isinstance(name, str) and name else "loss"
    mode = tuning.get("mode")
    return RunMetric(name, metric_mode(name, mode if mode in ("min", "max") else None))


def best_value(record: RunRecord, metric: RunMetric) -> float | None:
    """The best trial's value of the run's metric: as the record's ``best`` holds it, else its
    last epoch's (a record written before ``best.value``)."""
    best = record.best
    if best is None:
        return None
    if best.value is not None and best.metric == metric.name:
        return best.value
    trial = next((t for t in record.trials if t.trial_id == best.trial), None)
    if trial is not None and trial.history:
        return metric.last(trial)
    return {"loss": best.val_loss, "accuracy": best.val_accuracy}.get(metric.name)


def money(usd: float | None) -> str:
    """'$1,234.57' from a dollar up, else four significant digits ('$0.0001235'); '-' for
    None; a residue of a float sum as '$0', never '$-0.000000'."""
    if usd is None or not math.isfinite(usd):
        return "-"
    amount = abs(usd)
    if amount < ZERO_USD:
        return "$0"
    text = f"{amount:,.2f}" if amount >= 1 else format(Decimal(f"{amount:.4g}"), "f")
    return f"{'-' if usd < 0 else ''}${text}"


def seconds(value: float | None) -> str:
    """'0.2 s', '42.0 s' (to a tenth), '12m 05s' from a minute up; '-' for None."""
    if value is None:
        return "-"
    if math.isfinite(value) and abs(value) < 60:
        return f"{value:.1f} s"
    return format_duration(value)


def number(value: float | None) -> str:
    """A metric to four significant digits; '-' for None."""
    if value is None:
        return "-"
    return f"{value:.4g}"


def config(values: Mapping[str, Any]) -> str:
    """A configuration as 'key=value, ...', floats to four significant digits."""
    return ", ".join(f"{k}={number(v) if isinstance(v, float) else v}" for k, v in values.items())


def named(record: RunRecord, values: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's drawn configuration by the names its author wrote (``author_names``): a
    training function's or loop's plain names (``lr``), a job file's paths."""
    model = record.job.get("model")
    name = model.get("name") if isinstance(model, Mapping) else None
    return author_names(str(name), values)


def drawn(record: RunRecord, values: Mapping[str, Any]) -> str:
    """``named`` as 'key=value, ...' (``config``)."""
    return config(named(record, values))


def trial_usd(record: RunRecord) -> dict[int, float]:
    """Each trial's bill so far (the charges the meter attributed to it)."""
    out: dict[int, float] = {}
    for charge in record.charges:
        if charge.trial >= 0:
            out[charge.trial] = out.get(charge.trial, 0.0) + charge.usd
    return out
