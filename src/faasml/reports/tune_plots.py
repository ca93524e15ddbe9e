"""Plots of tuning plans (matplotlib, imported only when a plot is asked for).

``budget_share_png``: each stage's share of the plan's spending, per planner (CE-scaling
Fig. 11). ``tradeoff_png``: the objective against the swept bound (time against budget, or
cost against deadline) for every planner (CE-scaling Fig. 14). Files are written atomically:
a temporary file renamed into place.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faasml._imports import optional_import
from faasml.exceptions import ConfigError
from faasml.types import TunePlan


def _pyplot() -> Any:
    matplotlib = optional_import("matplotlib", "plot")
    matplotlib.use("Agg")
    return optional_import("matplotlib.pyplot", "plot")


def _save(figure: Any, path: Path) -> Path:
    """Write ``figure`` to ``path`` atomically; ConfigError (naming the path and the reason)
    when the folder cannot be made or written."""
    temporary = str(path.with_name(f".{path.name}.{secrets.token_hex(6)}.png"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Created with the permissions the umask gives (0644 under 022), as write_atomic's.
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as err:
        reason = "a file is in the way" if isinstance(err, FileExistsError) else err.strerror
        raise ConfigError(f"cannot write the plot {str(path)!r}: {reason}") from None
    try:
        figure.savefig(temporary, dpi=120, bbox_inches="tight")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def budget_share_png(plans: Mapping[str, TunePlan], path: Path) -> Path:
    """Grouped bars per stage and planner: (top) the share of the plan's spending; (bottom)
    the spending per trial relative to ``static-cheapest`` (the normalisation of Fig. 11)."""
    plt = _pyplot()
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(max(7.0, 0.6 * _stages(plans)), 6.4), sharex=True
    )
    names = list(plans)
    reference = plans.get("static-cheapest") or next(iter(plans.values()))
    width = 0.8 / max(1, len(names))
    for k, name in enumerate(names):
        plan = plans[name]
        xs = [s.index - 0.4 + width * (k + 0.5) for s in plan.stages]
        shares = [100 * s.cost_usd / plan.cost_usd for s in plan.stages]
        relative = [
            s.cost_usd / ref.cost_usd for s, ref in zip(plan.stages, reference.stages, strict=True)
        ]
        top.bar(xs, shares, width=width, label=name)
        bottom.bar(xs, relative, width=width, label=name)
    bottom.set_xticks([s.index for s in reference.stages])
    bottom.set_xticklabels([f"{s.index}\n({s.trials})" for s in reference.stages], fontsize=7)
    bottom.set_xlabel("stage (trials)")
    top.set_ylabel("share of spending (%)")
    bottom.set_ylabel("spending per trial\n(× static-cheapest)")
    bottom.axhline(1.0, color="grey", linewidth=0.8)
    top.set_title(f"{reference.workload}: budget per stage")
    top.legend(fontsize=8)
    try:
        return _save(figure, path)
    finally:
        plt.close(figure)


def _stages(plans: Mapping[str, TunePlan]) -> int:
    return max((len(p.stages) for p in plans.values()), default=1)


def tradeoff_png(
    limits: Sequence[float],
    results: Mapping[str, Sequence[float | None]],
    path: Path,
    *,
    sweep: str,
    objective: str,
    title: str,
) -> Path:
    """One line per planner: the objective ("time" or "cost") reached at each value of the
    swept bound ("budget" or "deadline"); None: no plan found."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.0, 3.8))
    for name, values in results.items():
        points = [(x, y) for x, y in zip(limits, values, strict=True) if y is not None]
        if points:
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    axes.set_xlabel("budget (US$)" if sweep == "budget" else "deadline (s)")
    axes.set_ylabel("time (s)" if objective == "time" else "cost (US$)")
    axes.set_title(title)
    axes.legend(fontsize=8)
    try:
        return _save(figure, path)
    finally:
        plt.close(figure)
