"""Plots of a run: loss curves, spend over time, allocation over time (matplotlib, optional)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from faasml.runtime.record import RunRecord


def write_plots(record: RunRecord, folder: Path) -> list[Path]:
    """PNG plots of a run record; none (and no error) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    trials = [t for t in record.trials if t.history]

    fig, ax = plt.subplots(figsize=(6, 4))
    for trial in trials:
        points = [  # a diverged epoch's NaN or infinite loss is left out
            (h["epoch"], h["val_loss"] if h.get("val_loss") is not None else h["loss"])
            for h in trial.history
        ]
        points = [(e, v) for e, v in points if math.isfinite(v)]
        label = f"trial {trial.trial_id}"
        if trial.status == "diverged":
            label += f" (diverged at epoch {trial.diverged_epoch})"
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation loss")
    ax.set_title("Loss curves")
    if len(trials) <= 12:
        ax.legend(fontsize="small")
    out.append(_save(fig, folder / "loss.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    charges = sorted(record.charges, key=lambda c: c.t_s)
    total, xs, ys = 0.0, [0.0], [0.0]
    for charge in charges:
        total += charge.usd
        xs.append(charge.t_s)
        ys.append(total)
    ax.step(xs, ys, where="post", label="spent")
    budget = record.constraint.budget_usd
    title = "Spend over time"
    if budget is not None and total >= 0.1 * budget:
        ax.axhline(budget, color="red", linestyle="--", label="budget")
    elif budget is not None:
        title += f" (budget ${budget:g}, off the scale)"
    ax.set_xlabel("seconds")
    ax.set_ylabel("US dollars")
    ax.set_title(title)
    ax.legend(fontsize="small")
    out.append(_save(fig, folder / "spend.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    points = sorted(
        ((h["t_s"], h["n"] * h["memory_mb"]) for t in trials for h in t.history),
    )
    if points:
        ax.step([p[0] for p in points], [p[1] for p in points], where="pre")
    ax.set_xlabel("seconds")
    ax.set_ylabel("functions × MB of the epoch ending")
    ax.set_title("Allocation over time")
    out.append(_save(fig, folder / "allocation.png"))
    from faasml.reports.search_report import write_search_plot

    out.extend(write_search_plot(record, folder))
    return out


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
