"""Plots of a run: the ranking metric's curves, spend over time against the planned spend,
functions and GB in use over time (matplotlib, optional). ``run_series`` computes what they
draw from the record."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from faasml.reports.run_format import RunMetric, money, run_metric
from faasml.reports.run_series import (
    allocation_series,
    metric_curves,
    planned_spend_series,
    spend_series,
    stage_boundaries,
    stage_starts,
)
from faasml.runtime.record.records import RunRecord


def write_plots(record: RunRecord, folder: Path) -> list[Path]:
    """PNG plots of a run record; none (and no error) when matplotlib is not installed. The
    curves' file is named after the ranking metric (``loss.png``, ``accuracy.png``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    metric = run_metric(record)
    starts = stage_starts(record)
    out = [
        _metric_plot(plt, record, metric, folder),
        _spend_plot(plt, record, starts, folder),
        _allocation_plot(plt, record, folder),
    ]
    from faasml.reports.search_report import write_search_plot

    out.extend(write_search_plot(record, folder))
    return out


def _metric_plot(plt: Any, record: RunRecord, metric: RunMetric, folder: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    curves = metric_curves(record, metric)
    for curve in curves:
        ax.plot(curve.epochs, curve.values, marker="o", label=curve.label)
    for epoch in stage_boundaries(record):
        ax.axvline(epoch + 0.5, color="lightgrey", linewidth=0.8)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric.label)
    best = "highest" if metric.mode == "max" else "lowest"
    ax.set_title(f"{metric.label[0].upper()}{metric.label[1:]} by epoch ({best} ranks first)")
    if curves and len(curves) <= 12:
        ax.legend(fontsize="small")
    # A reported metric's name may hold characters a file name cannot ('val/f1').
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", metric.name).strip("._") or "metric"
    return _save(fig, folder / f"{stem}.png")


def _spend_plot(plt: Any, record: RunRecord, starts: tuple[float, ...], folder: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    spent = spend_series(record)
    ax.step(spent.xs, spent.ys[0], where="post", label="spent")
    planned = planned_spend_series(record)
    if planned.xs:
        ax.plot(planned.xs, planned.ys[0], linestyle=":", color="grey", label="planned")
    for at in starts:
        ax.axvline(at, color="lightgrey", linewidth=0.8)
    budget = record.constraint.budget_usd
    title = "Spend over time"
    top = max([*spent.ys[0], *planned.ys[0]])
    if budget is not None and top >= 0.1 * budget:
        ax.axhline(budget, color="red", linestyle="--", label="budget")
    elif budget is not None:
        title += f" (budget {money(budget)}, off the scale)"
    ax.set_xlabel("seconds")
    ax.set_ylabel("US dollars")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return _save(fig, folder / "spend.png")


def _allocation_plot(plt: Any, record: RunRecord, folder: Path) -> Path:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 4.5), sharex=True)
    series = allocation_series(record)
    functions, gb = series.ys
    top.step(series.xs, functions, where="post")
    top.set_ylabel("functions")
    bottom.step(series.xs, gb, where="post", color="tab:orange")
    bottom.set_ylabel("GB")
    bottom.set_xlabel("seconds")
    top.set_title("Functions and memory in use (all trials at once)")
    return _save(fig, folder / "allocation.png")


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
