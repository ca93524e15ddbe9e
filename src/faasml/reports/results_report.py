"""The report's words for a tuning run's ranking: the best trial's figure by the run's metric
and mode, and the Pareto front of that metric against the dollars each trial was billed."""

from __future__ import annotations

from faasml.job import implied_mode
from faasml.reports.run_format import drawn, money
from faasml.runtime.coordinator.ranking import divergence, metric_value, pareto_ids
from faasml.runtime.record.records import Best, RunRecord


def best_figure(best: Best) -> str:
    """'validation loss 0.41' for the default metric, else 'f1 0.83 (max)'."""
    if best.metric == "loss" and best.mode in (None, "min"):
        loss = best.val_loss if best.val_loss is not None else best.value
        return f"validation loss {_number(loss)}"
    mode = best.mode or implied_mode(best.metric) or "min"
    value = best.value
    if value is None and best.metric == "accuracy":  # a record written before ``value``
        value = best.val_accuracy
    return f"{best.metric} {_number(value)} ({mode})"


def ranked_by(best: Best) -> str:
    """'f1 0.83 (max); ' where the run ranked by other than the validation loss, else ''."""
    figure = best_figure(best)
    return "" if figure.startswith("validation loss") else f"ranked by {figure}; "


def run_metric(record: RunRecord) -> tuple[str, str]:
    """The metric and mode a tuning record ranked by (its job's ``tuning``)."""
    tuning = record.job.get("tuning") or {}
    found = tuning.get("metric")
    metric = found if isinstance(found, str) else "loss"
    mode = tuning.get("mode")
    return metric, mode if mode in ("min", "max") else implied_mode(metric) or "min"


def trial_costs(record: RunRecord) -> dict[int, float]:
    """Dollars billed to each trial (its functions, invocations and storage)."""
    costs: dict[int, float] = {}
    for charge in record.charges:
        costs[charge.trial] = costs.get(charge.trial, 0.0) + charge.usd
    return costs


def pareto_lines(record: RunRecord) -> list[str]:
    """A short table of the trials on the (metric, dollars) Pareto front, cheapest first;
    nothing for a run of fewer than two trials with the metric."""
    metric, mode = run_metric(record)
    costs = trial_costs(record)
    entries = [
        (t.trial_id, metric_value(t.last, metric), costs.get(t.trial_id, 0.0))
        for t in record.trials
        if t.history and t.status not in ("failed", "diverged") and divergence(t.last) is None
    ]
    if sum(1 for e in entries if e[1] is not None) < 2:
        return []
    front = pareto_ids(entries, mode)
    by_id = {t.trial_id: t for t in record.trials}
    lines = [
        "",
        f"## Pareto front: {metric} ({mode}) against dollars",
        "",
        "No other trial is both cheaper and better than one of these.",
        "",
        f"| trial | {metric} | US dollars | epochs | config |",
        "|---:|---:|---:|---:|---|",
    ]
    for trial_id in front:
        t = by_id[trial_id]
        lines.append(
            f"| {trial_id} | {_number(metric_value(t.last, metric))} | "
            f"{money(costs.get(trial_id, 0.0))} | {t.epochs_done} | `{drawn(record, t.config)}` |"
        )
    return lines


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
